"""Health: /livez touches nothing; /readyz runs the registered checks (api/readiness.py)
concurrently, in a time limit, 503 naming the failing ones. Needs the app (conftest.py).
"""

import asyncio
import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.api.readiness import ReadinessChecks

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
    raise ConnectionError("db down")


async def slow() -> bool:
    await asyncio.sleep(5)
    return True


def test_readyz_names_the_failing_check_and_livez_stays_up(
    app: FastAPI, client: TestClient
) -> None:
    """A failing check makes it a documented 503 naming it, while /livez stays 200."""
    assert client.get("/readyz").json() == {"status": "ready", "failing": [], "checks": BUILT_IN}
    app.state.readiness.add("db", ready)
    app.state.readiness.add("cache", not_ready)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not ready", "failing": ["cache"],
        "checks": {**BUILT_IN, "db": "ok", "cache": "failed"},
    }  # fmt: skip
    assert client.get("/livez").json() == {"status": "ok"}
    assert set(app.openapi()["paths"]["/readyz"]["get"]["responses"]) >= {"200", "503"}


def test_each_outcome_is_told_apart_within_one_timeout(json_lines: JsonLines) -> None:
    """ok, failed, error (logged only), timed out (two in one timeout); unique names."""
    checks = ReadinessChecks(timeout_seconds=0.2)
    for name, check in [("a", ready), ("b", not_ready), ("c", broken), ("d", slow), ("e", slow)]:
        checks.add(name, check)
    started = time.monotonic()
    outcomes = asyncio.run(checks.run())
    assert time.monotonic() - started < 0.4
    assert outcomes == {"a": "ok", "b": "failed", "c": "error", "d": "timed out", "e": "timed out"}
    [line] = [line for line in json_lines.lines if line.get("check") == "c"]
    assert "ConnectionError: db down" in line["exception"]
    with pytest.raises(ValueError, match="'a' is already registered"):
        checks.add("a", ready)
    checks.remove("a")
    assert checks.names == ["b", "c", "d", "e"]
