"""Issue 47: a rollout loses nothing. The rollout suite replaces every container of the default
bake's image, and of the postgresql bake's with a real database, under load behind HAProxy set
up as the bake's docs/deploy.md says and not retrying (`./scripts/bench BAKE --rollout`,
lab/rollout.py); here its counts are read back. With the drain phase: no request of any kind
failed, every stream whole or ended at an event boundary, every WebSocket session closed with
1001 or 1012 and reconnected. Without it, the failures are shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROLLOUT_STEPS
from .full_suites import FullSuites

# The images the rollout replaces are the image suites' (the rollout suite waits for them).
pytestmark = [pytest.mark.full_suite("image"), pytest.mark.full_suite("image-postgresql")]
REQUEST_KINDS = {"GET", "POST", "upload"}
LOAD_KINDS = {*REQUEST_KINDS, "stream", "websocket"}
CLEAN_STREAMS = {"whole", "cut at an event boundary"}
CLEAN_CLOSES = {"1001 reconnected", "1012 reconnected"}


def rollout(full_suites: FullSuites, step: str) -> tuple[dict[str, Any], str]:
    """The step's rollout.json and rollout.md, once it passed."""
    done = full_suites.step("rollout", step)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    out = Path(re.findall(r"^results in (.+)$", done.stdout, flags=re.MULTILINE)[-1])
    result = json.loads((out / "rollout.json").read_text(encoding="utf-8"))
    return result, (out / "rollout.md").read_text(encoding="utf-8")


def failures(result: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Each request kind's outcomes that were no 2xx answer."""
    return {
        kind: {outcome: count for outcome, count in outcomes.items() if outcome[0] != "2"}
        for kind, outcomes in result["requests"].items()
    }


@pytest.mark.full_suite("rollout")
@pytest.mark.parametrize("step", [name for name, _, _ in ROLLOUT_STEPS])
def test_rollout_counts_every_kind(full_suites: FullSuites, step: str) -> None:
    """Every kind of load ran through the rollout and was counted, each container replaced and
    stopped with 0; the database bake's migration ran once before its new containers."""
    result, _ = rollout(full_suites, step)
    assert set(result["kinds"]) == LOAD_KINDS
    for kind in REQUEST_KINDS:
        assert sum(result["requests_during"][kind].values()) > 0, kind
    assert sum(result["streams"].values()) > 0
    assert sum(result["websocket_closes"].values()) > 0
    assert result["get_latency"]["before"]["count"] > 0
    assert result["get_latency"]["during"]["count"] > 0
    replaced = [c for c in result["containers"] if c["exit_code"] is not None]
    assert [c["exit_code"] for c in replaced] == [0, 0]
    assert (result["migration_seconds"] is not None) == ("postgresql" in step)


@pytest.mark.full_suite("rollout")
@pytest.mark.parametrize("step", ["drain on", "postgresql drain on"])
def test_a_rollout_with_the_drain_phase_loses_nothing(full_suites: FullSuites, step: str) -> None:
    """Behind a balancer that retries nothing: no request of any kind failed or was reset,
    every event stream ended whole or at an event boundary, every WebSocket session closed
    with 1001 or 1012 and its reconnect succeeded."""
    result, report = rollout(full_suites, step)
    assert result["retries"] == 0
    assert failures(result) == {kind: {} for kind in REQUEST_KINDS}, report
    assert set(result["streams"]) <= CLEAN_STREAMS, report
    assert set(result["websocket_closes"]) <= CLEAN_CLOSES, report
    assert result["websocket_handshake_failures"] == {}, report


@pytest.mark.full_suite("rollout")
def test_a_rollout_without_the_drain_phase_shows_its_failures(full_suites: FullSuites) -> None:
    """DRAIN_SECONDS=0 and no retries: the same rollout (every kind counted, as above) fails
    requests, which the drain phase prevents: the rehearsal measures what it is there for."""
    result, report = rollout(full_suites, "drain off")
    assert result["drain_seconds"] == 0
    assert result["retries"] == 0
    found = failures(result)
    print(report)
    print(f"failed requests without the drain phase: {found}")
    print(f"streams: {result['streams']}, WebSocket closes: {result['websocket_closes']}")
    assert sum(count for outcomes in found.values() for count in outcomes.values()) > 0, report
