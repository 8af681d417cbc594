"""Readiness checks registry: named async checks, run concurrently, with a time limit."""

import asyncio
import time

import pytest

from {{ cookiecutter.package_name }}.api.readiness import ReadinessChecks

from .logcapture import JsonLines


async def ready() -> bool:
    return True


async def not_ready() -> bool:
    return False


async def broken() -> bool:
    raise ConnectionError("db down")


async def slow() -> bool:
    await asyncio.sleep(5)
    return True


def test_each_outcome_is_reported_by_name() -> None:
    """ok, failed, error and timed out are told apart, in registration order."""
    checks = ReadinessChecks(timeout_seconds=0.1)
    for name, check in [("a", ready), ("b", not_ready), ("c", broken), ("d", slow)]:
        checks.add(name, check)
    outcomes = asyncio.run(checks.run())
    assert outcomes == {"a": "ok", "b": "failed", "c": "error", "d": "timed out"}


def test_no_checks_means_nothing_fails() -> None:
    """A service without dependencies is ready as soon as it runs."""
    assert asyncio.run(ReadinessChecks().run()) == {}


def test_checks_run_concurrently() -> None:
    """Three slow checks take the time of one, so /readyz answers within one timeout."""
    checks = ReadinessChecks(timeout_seconds=0.2)
    for name in "xyz":
        checks.add(name, slow)
    started = time.monotonic()
    asyncio.run(checks.run())
    assert time.monotonic() - started < 0.4


def test_a_duplicate_name_is_refused() -> None:
    """Two checks under one name would hide one of them."""
    checks = ReadinessChecks()
    checks.add("db", ready)
    with pytest.raises(ValueError, match="'db' is already registered"):
        checks.add("db", ready)


def test_a_check_can_be_removed() -> None:
    """Removing a check (on shutdown, say) drops it from the next run."""
    checks = ReadinessChecks()
    checks.add("db", ready)
    checks.add("cache", ready)
    checks.remove("db")
    assert checks.names == ["cache"]


def test_failures_are_logged_with_the_exception(json_lines: JsonLines) -> None:
    """The exception goes to the log (never to the response) with the check's name."""
    checks = ReadinessChecks()
    checks.add("db", broken)
    asyncio.run(checks.run())
    [line] = [line for line in json_lines.lines if line.get("check") == "db"]
    assert line["level"] == "error"
    assert "ConnectionError: db down" in line["exception"]
