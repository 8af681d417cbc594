"""Health: /livez touches nothing; /readyz runs the registered checks (api/readiness.py)
concurrently, in a time limit, 503 naming the failing required ones, the others reported;
one log line per change of outcome, a metric per check. Needs the app (conftest.py).
"""

import asyncio
import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from {{ cookiecutter.package_name }}.api.readiness import Outcome, ReadinessChecks
from {{ cookiecutter.package_name }}.middleware.metrics import RequestMetrics

from .asgi import JsonLines

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
    raise ConnectionError("db down\nsecond line")


async def slow() -> bool:
    await asyncio.sleep(5)
    return True


def test_readyz_names_the_failing_check_and_livez_stays_up(
    app: FastAPI, client: TestClient
) -> None:
    """A failing required check makes it a documented 503 naming it, while /livez stays 200."""
    assert client.get("/readyz").json() == {
        "status": "ready", "failing": [], "checks": BUILT_IN, "required": [],
    }  # fmt: skip
    app.state.readiness.add("db", ready)
    app.state.readiness.add("cache", not_ready)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not ready", "failing": ["cache"],
        "checks": {**BUILT_IN, "db": "ok", "cache": "failed"}, "required": ["db", "cache"],
    }  # fmt: skip
    assert client.get("/livez").json() == {"status": "ok"}
    assert set(app.openapi()["paths"]["/readyz"]["get"]["responses"]) >= {"200", "503"}


def test_a_check_that_is_not_required_is_reported_but_keeps_the_worker_ready(
    app: FastAPI, client: TestClient
) -> None:
    """A failing check added with required=False is named in the body, and /readyz stays 200."""
    app.state.readiness.add("shared", broken, required=False)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready", "failing": ["shared"],
        "checks": {**BUILT_IN, "shared": "error"}, "required": [],
    }  # fmt: skip


def test_each_outcome_is_told_apart_within_one_timeout() -> None:
    """ok, failed, error, timed out (two in one timeout); unique names."""
    checks = ReadinessChecks(timeout_seconds=0.2)
    for name, check in [("a", ready), ("b", not_ready), ("c", broken), ("d", slow), ("e", slow)]:
        checks.add(name, check)
    started = time.monotonic()
    outcomes = asyncio.run(checks.run())
    assert time.monotonic() - started < 0.4
    assert outcomes == {"a": "ok", "b": "failed", "c": "error", "d": "timed out", "e": "timed out"}
    with pytest.raises(ValueError, match="'a' is already registered"):
        checks.add("a", ready)
    checks.remove("a")
    assert checks.names == ["b", "c", "d", "e"]


def test_a_failing_check_logs_one_line_per_change_and_its_traceback_at_debug(
    json_lines: JsonLines,
) -> None:
    """Probes against a dependency that stays down: one warning line (the reason on one line,
    no traceback), then debug lines only; its return is one info line."""
    state = {"up": False}

    async def flapping() -> bool:
        if not state["up"]:
            raise ConnectionError("refused\nby the server")
        return True

    checks = ReadinessChecks()
    checks.add("database", flapping, required=False)
    for _ in range(5):
        asyncio.run(checks.run())
    state["up"] = True
    for _ in range(3):
        asyncio.run(checks.run())

    lines = json_lines.from_logger("{{ cookiecutter.package_name }}.api.readiness")
    above_debug = [line for line in lines if line["level"] != "debug"]
    assert [(line["level"], line["message"]) for line in above_debug] == [
        ("warning", "readiness check failing"),
        ("info", "readiness check recovered"),
    ]
    failing = above_debug[0]
    assert failing["reason"] == "ConnectionError: refused by the server"
    assert (failing["check"], failing["outcome"]) == ("database", "error")
    assert failing["required"] is False
    assert "exception" not in failing
    tracebacks = [line for line in lines if "exception" in line]
    assert len(tracebacks) == 5
    assert {line["level"] for line in tracebacks} == {"debug"}


def test_each_outcome_sets_the_checks_metric() -> None:
    """readiness_check_passing{check} is 1 after a pass and 0 after any failure."""
    metrics = RequestMetrics(deadline_seconds=30, registry=CollectorRegistry())
    seen: list[tuple[str, Outcome]] = []

    def record(name: str, outcome: Outcome) -> None:
        seen.append((name, outcome))
        metrics.readiness_outcome(name, outcome)

    checks = ReadinessChecks(on_outcome=record)
    checks.add("up", ready)
    checks.add("down", not_ready, required=False)
    asyncio.run(checks.run())

    def value(check: str) -> float | None:
        return metrics.registry.get_sample_value("readiness_check_passing", {"check": check})

    assert (value("up"), value("down")) == (1.0, 0.0)
    assert seen == [("up", "ok"), ("down", "failed")]
