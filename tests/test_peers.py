"""The peers experiment (lab/peers.py, `./scripts/bench BAKE --peers`) runs against a default bake
in its short mode, as the peers suite in the background once the battery has ended
(tests/conftest.py, SUITE_AFTER): the stack, uvicorn and granian (the lab installs it for
itself) serve the same app, raw, under attack and beside held event streams and idle
WebSockets, on 127.0.0.1. gunicorn's two direct workers are left to the full run (before a
release, CONTRIBUTING.md): each added about 15 s here.

One run of about a minute: a second of load per server and condition (five under the flood,
lab/peers.py's FLOOD_MIN_S), no ratios asserted (a second on a shared machine measures the
neighbours); what is asserted is what the full run's figures rest on: every server answered
every normal client, each attacker really attacked, the stack's edge limits held the flood to
its rate, and nothing was left running; each server held every stream and WebSocket open, its
tokens came, and its memory was read.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from lab.peers import EDGE_LIMITS, SHORT

from .conftest import PEERS_SHORT_SERVERS, full_suite_dir, leftover_processes, peers_output

if TYPE_CHECKING:
    from pathlib import Path

    from .full_suites import FullSuites

SERVERS = set(PEERS_SHORT_SERVERS)
CONDITIONS = {"small", "items", "1mb", "flood", "slow", "oversized", "held"}
SHORT_SLOW_CLIENTS = SHORT.slow_clients


@pytest.mark.slow
@pytest.mark.full_suite("peers")
def test_a_short_peers_run_measures_every_server_raw_and_under_attack(
    full_suites: FullSuites, shared_tmp: Path
) -> None:
    """`./scripts/bench BAKE --peers --short --servers stack uvicorn granian` (the peers suite)
    measures the three servers on the three endpoints, under the three attacks and beside held
    streams and WebSockets, writes peers.json and a report that names no path of this machine,
    and leaves no server running."""
    done = full_suites.step("peers", "peers short")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    suite = full_suite_dir(shared_tmp, "peers")
    assert leftover_processes(suite / "my-service") == []
    out = peers_output(shared_tmp)
    results = json.loads((out / "peers.json").read_text(encoding="utf-8"))
    assert results["skipped"] == {}, results["skipped"]
    runs = {(run["server"], run["condition"]): run for run in results["runs"]}
    assert set(runs) == {(s, c) for s in SERVERS for c in CONDITIONS}
    for (server, condition), run in runs.items():
        normal = run["normal"]
        # Every server answers the normal clients, attacked or not; no ratio is judged here.
        assert normal["requests"] > 0, (server, condition, normal)
        if condition in {"small", "items", "1mb"}:
            assert normal["non_2xx"] + normal["socket_errors"] == 0, (server, condition, normal)
        # The stack's processes are told apart (nginx, the app); a direct server is all app.
        cpu = run["cpu_s"]
        assert cpu["app"] > 0, (server, condition, cpu)
        assert (cpu["nginx"] > 0) == (server == "stack"), (server, condition, cpu)
    for server in SERVERS:
        flood = runs[(server, "flood")]["attacker"]
        assert flood["requests"] > 0, (server, flood)
        # The edge rate limit slows one address's flood to its rate: the burst at once, then
        # a request every 1/RATE_LIMIT s (waiting their turn, not refused); direct servers
        # serve all of it.
        if server == "stack":
            limits = {name: int(value) for name, value in EDGE_LIMITS}
            rate, burst = limits["RATE_LIMIT"], limits["RATE_LIMIT_BURST"]
            assert flood["requests"] <= burst + rate * (flood["duration_s"] + 1), flood
        else:
            assert flood["non_2xx"] == 0, (server, flood)
        slow = runs[(server, "slow")]["attacker"]
        assert sum(slow["kinds"].values()) == SHORT_SLOW_CLIENTS, (server, slow)
        oversized = runs[(server, "oversized")]["attacker"]
        # 2 MiB bodies: refused by every server (413 from nginx, 4xx from the app).
        assert oversized["requests"] > 0, (server, oversized)
        assert oversized["non_2xx"] == oversized["requests"], (server, oversized)
        if server == "stack":  # its 413s wait their turn: 5 at once, then one a second
            assert oversized["requests"] <= 5 + oversized["duration_s"] + 2, oversized
        # Every stream and WebSocket stayed open to the end and the streams' tokens came (no
        # share on time asserted: a second of a shared machine); the memory was read.
        held = runs[(server, "held")]["attacker"]
        assert held["failed"] == {}, (server, held)
        assert held["streams_open"] == SHORT.held_streams, (server, held)
        assert held["websockets_open"] == SHORT.held_websockets, (server, held)
        assert held["tokens"] > 0, (server, held)
        assert held["pss_held_kib"] > 0, (server, held)
    report = (out / "peers.md").read_text(encoding="utf-8")
    assert "## Raw: requests/s, latency, errors" in report
    assert "## Under attack: the normal clients' goodput" in report
    assert "## Held: event streams and idle WebSockets beside the normal clients" in report
    assert str(suite) not in report
