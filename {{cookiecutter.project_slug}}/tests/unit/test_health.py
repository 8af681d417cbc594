"""Health (api/health.py): /livez, /readyz and ReadinessChecks' outcomes, time limit, cache,
log lines and metric. Needs the app (conftest.py)."""

import asyncio
import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from {{ cookiecutter.package_name }}.api.health import ReadinessChecks
from {{ cookiecutter.package_name }}.middleware.metrics import RequestMetrics

from .conftest import JsonLines

{%- if cookiecutter.database == "postgresql" %}

# The check the app registers itself, in its lifespan, against the tests' PostgreSQL.
BUILT_IN = {"database": "ok"}
{%- else %}

BUILT_IN: dict[str, str] = {}
{%- endif %}


async def ready() -> bool:
    return True


async def not_ready() -> bool:
    return False


async def broken() -> bool:
    raise ConnectionError("refused\nby the server")


def test_readyz_names_the_failing_required_check_and_livez_stays_up(
    app: FastAPI, client: TestClient
) -> None:
    """A failing required check: a documented 503 naming it, /livez still 200; required=False:
    named, the worker still ready."""
    ready_body = {"status": "ready", "failing": [], "checks": BUILT_IN, "required": []}
    assert client.get("/readyz").json() == ready_body
    app.state.readiness.add("shared", broken, required=False)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        **ready_body,
        "failing": ["shared"],
        "checks": {**BUILT_IN, "shared": "error"},
    }
    app.state.readiness.add("db", ready)
    app.state.readiness.add("cache", not_ready)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not ready",
        "failing": ["shared", "cache"],
        "required": ["db", "cache"],
        "checks": {**BUILT_IN, "shared": "error", "db": "ok", "cache": "failed"},
    }
    assert client.get("/livez").json() == {"status": "ok"}
    assert set(app.openapi()["paths"]["/readyz"]["get"]["responses"]) >= {"200", "503"}


def test_a_readyz_flood_runs_the_checks_once_per_interval(app: FastAPI, client: TestClient) -> None:
    """Fifty /readyz within the cache interval run a check once; past it, again. The interval
    is set, not waited for: a busy machine's slowness must not decide the test."""
    runs = []

    async def counted() -> bool:
        runs.append(time.monotonic())
        return True

    app.state.readiness.cache_seconds = 3600.0
    app.state.readiness.add("counted", counted)
    for _ in range(50):
        assert client.get("/readyz").json()["checks"]["counted"] == "ok"
    assert len(runs) == 1
    app.state.readiness.cache_seconds = 0.0  # the last run is now older than the interval
    client.get("/readyz")
    assert len(runs) == 2


def test_each_outcome_is_told_apart_within_one_timeout_and_sets_the_metric() -> None:
    """ok, failed, error, timed out (two in one timeout); unique names; the check's metric
    readiness_check_passing{check} is 1 after a pass and 0 after any failure."""
    metrics = RequestMetrics(deadline_seconds=30, registry=CollectorRegistry())
    checks = ReadinessChecks(timeout_seconds=0.2, on_outcome=metrics.readiness_outcome)
    slow_steps: list[str] = []

    async def slow() -> bool:
        slow_steps.append("started")
        try:
            await asyncio.sleep(5)
        finally:
            slow_steps.append("cut")
        return True

    for name, check in [("a", ready), ("b", not_ready), ("c", broken), ("d", slow), ("e", slow)]:
        checks.add(name, check)
    outcomes = asyncio.run(checks.run())
    # In one timeout, not one after the other (no clock: these machines are noisy).
    assert slow_steps == ["started", "started", "cut", "cut"]
    assert outcomes == {"a": "ok", "b": "failed", "c": "error", "d": "timed out", "e": "timed out"}
    sample = metrics.registry.get_sample_value
    passing = [sample("readiness_check_passing", {"check": name}) for name in "abcde"]
    assert passing == [1.0, 0.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="'a' is already registered"):
        checks.add("a", ready)
    checks.remove("a")
    assert checks.required == ["b", "c", "d", "e"]


def test_a_failing_check_logs_one_line_per_change_and_its_traceback_at_debug(
    json_lines: JsonLines,
) -> None:
    """Probes against a dependency that stays down: one warning line (the reason on one line,
    no traceback), then debug lines only; its return is one info line."""
    runs = iter([broken] * 5 + [ready] * 3)

    async def flapping() -> bool:
        return await next(runs)()

    checks = ReadinessChecks()
    checks.add("database", flapping, required=False)
    for _ in range(8):
        asyncio.run(checks.run())

    lines = json_lines.from_logger("{{ cookiecutter.package_name }}.api.health.readiness")
    failing, recovered = [line for line in lines if line["level"] != "debug"]
    assert (recovered["level"], recovered["message"]) == ("info", "readiness check recovered")
    assert (
        failing.items()
        >= {
            "level": "warning",
            "message": "readiness check failing",
            "check": "database",
            "outcome": "error",
            "required": False,
            "reason": "ConnectionError: refused by the server",
        }.items()
    )
    assert "exception" not in failing
    assert [line["level"] for line in lines if "exception" in line] == ["debug"] * 5
