"""The rollout rehearsal's figures from its load's tally (lab/rollout.py), and their report."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from lab.stats import percentile

if TYPE_CHECKING:
    from lab.rollout_load import Tally

REQUEST_KINDS = ("GET", "POST", "upload")
# What a rollout that loses nothing leaves: answers, and streams and sessions ended cleanly.
WHOLE_STREAMS = ("whole", "cut at an event boundary")
CLEAN_CLOSES = (1001, 1012)


def percentiles(samples: list[float]) -> dict[str, Any]:
    """p50 and p99 in ms of samples (seconds), and their count; None where too few."""
    if len(samples) < 2:
        return {"count": len(samples), "p50_ms": None, "p99_ms": None}
    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
    return {"count": len(samples), "p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3}


def figures(tally: Tally, phases: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Requests by kind and outcome, in all and started during the rollout; the GETs' latency
    per phase; streams by how they ended; WebSocket sessions by close code and reconnect."""
    everything: dict[str, Counter[str]] = {kind: Counter() for kind in REQUEST_KINDS}
    during: dict[str, Counter[str]] = {kind: Counter() for kind in REQUEST_KINDS}
    start, end = phases["during"]
    for kind, started, _, outcome in tally.requests:
        everything[kind][outcome] += 1
        if start <= started < end:
            during[kind][outcome] += 1
    latency = {
        phase: percentiles(
            [
                seconds
                for kind, started, seconds, outcome in tally.requests
                if kind == "GET" and outcome == "200" and first <= started < last
            ]
        )
        for phase, (first, last) in phases.items()
    }
    return {
        "requests": {kind: dict(sorted(counts.items())) for kind, counts in everything.items()},
        "requests_during": {kind: dict(sorted(counts.items())) for kind, counts in during.items()},
        "get_latency": latency,
        "streams": dict(sorted(tally.streams.items())),
        "websocket_closes": dict(sorted(tally.sessions.items())),
        "websocket_handshake_failures": dict(sorted(tally.handshakes.items())),
    }


def failed(outcomes: dict[str, int]) -> int:
    """The requests among outcomes that got no 2xx answer."""
    return sum(count for outcome, count in outcomes.items() if not outcome.startswith("2"))


def _outcomes(counts: dict[str, int]) -> str:
    return ", ".join(f"{outcome}: {count}" for outcome, count in counts.items()) or "none"


def _setting(value: object) -> str:
    """A number as set ("0", "5", "2.5"), or a setting's words ("the image's default")."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _decimal(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown(result: dict[str, Any]) -> str:
    """rollout.md: the setting in a sentence, then one table per kind of client."""
    retries = result["retries"]
    lines = [
        "# Rollout rehearsal (issue 47)",
        "",
        f"`{result['command']}`: {len(result['containers']) // 2} containers of"
        f" `{result['image']}` replaced one by one behind HAProxy {result['haproxy']}"
        f" (docs/deploy.md's settings, retries {retries}), DRAIN_SECONDS"
        f" {_setting(result['drain_seconds'])}, each stopped with `podman stop --time"
        f" {result['grace_seconds']}`. The rollout took {result['rollout_seconds']:.1f} s"
        + (
            f", its migration {result['migration_seconds']:.1f} s of it."
            if result["migration_seconds"] is not None
            else "."
        ),
        "",
        "| requests | in all | failed | outcomes in all | during the rollout |",
        "|---|---|---|---|---|",
    ]
    for kind, counts in result["requests"].items():
        during = result["requests_during"][kind]
        lines.append(
            f"| {kind} | {sum(counts.values())} | {failed(counts)} | {_outcomes(counts)}"
            f" | {_outcomes(during)} |"
        )
    lines += ["", "| GETs answered 200 | count | p50 ms | p99 ms |", "|---|---|---|---|"]
    for phase, figures in result["get_latency"].items():
        lines.append(
            f"| {phase} the rollout | {figures['count']} | {_decimal(figures['p50_ms'])}"
            f" | {_decimal(figures['p99_ms'])} |"
        )
    lines += ["", "| event streams | WebSocket sessions closed | WebSocket handshakes failed |"]
    lines += [
        "|---|---|---|",
        (
            f"| {_outcomes(result['streams'])} | {_outcomes(result['websocket_closes'])}"
            f" | {_outcomes(result['websocket_handshake_failures'])} |"
        ),
        "",
        "| container | slot | started, s into the rollout | UP after, s | stopped in, s | exit |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c['name']} | {c['slot']} | {c['started']:.1f} | {c['up_s']:.1f}"
        f" | {_decimal(c['stop_s'] or None) if c['exit_code'] is not None else 'still running'}"
        f" | {c['exit_code'] if c['exit_code'] is not None else '-'} |"
        for c in result["containers"]
    ]
    return "\n".join(lines) + "\n"
