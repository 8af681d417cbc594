"""The peers experiment's parts: client addresses, the slow clients, the stack variants and
the report (lab/peers.py, lab/attacks.py). The whole run is tests/test_peers.py's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lab import attacks, held, peers

if TYPE_CHECKING:
    from lab.project import Project

TEMPLATE = Path(__file__).resolve().parent.parent.parent
CONNECT = """
import socket, sys
for _ in range(3):
    socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()
"""


def _accept_peers(server: socket.socket, count: int, seen: list[str]) -> None:
    for _ in range(count):
        connection, (host, _) = server.accept()
        seen.append(host)
        connection.close()


def test_the_source_address_library_gives_each_connection_the_next_address(
    tmp_path: Path,
) -> None:
    """A process run with lab/source_address.c connects from FIRST, FIRST + 1... in turn, so
    nginx sees as many clients as the range holds; without the variables, from 127.0.0.1."""
    library = attacks.build_shim(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        seen: list[str] = []
        listener = threading.Thread(target=_accept_peers, args=(server, 6, seen))
        listener.start()
        env = dict(os.environ, **attacks.source_env(library, "127.0.1.1", 2))
        for environ in (env, dict(os.environ)):
            subprocess.run([sys.executable, "-c", CONNECT, str(port)], env=environ, check=True)
        listener.join(timeout=30)
    assert seen == ["127.0.1.1", "127.0.1.2", "127.0.1.1", *["127.0.0.1"] * 3]


def test_the_slow_clients_hold_their_connections_from_many_addresses() -> None:
    """`python -m lab.attacks slow` connects every client (each kind a third), from the
    slow clients' addresses, says `ready`, and reports its counts when stopped."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as server:
        port = server.getsockname()[1]
        seen: list[str] = []
        listener = threading.Thread(target=_accept_peers, args=(server, 30, seen))
        listener.start()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "lab.attacks",
                "slow",
                "--port",
                str(port),
                "--clients",
                "30",
                "--seconds",
                "1",
            ],
            env=dict(os.environ, PYTHONPATH=str(TEMPLATE)),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        listener.join(timeout=30)
    lines = done.stdout.splitlines()
    assert lines[0] == "ready"
    counts = json.loads(lines[-1])
    assert counts["kinds"] == {"headers": 10, "bodies": 10, "unread": 10}
    assert len(set(seen)) == 30  # one address each (250 in the range)
    assert all(host.startswith("127.0.2.") for host in seen)


def test_every_stack_variant_edits_the_shipped_nginx_conf_once(
    project: Project, tmp_path: Path
) -> None:
    """Each variant's edits match the bake's serving_stack/nginx.conf exactly once (a changed
    config stops the run with the variant's name rather than measuring the shipped one)."""
    launcher = peers.PeerLauncher(project, tmp_path, workers=2, granian=None)
    for server in peers.VARIANTS.values():
        if server.nginx_edits:
            directory = tmp_path / server.id
            directory.mkdir()
            edited = launcher._edited_nginx_conf(server, directory).read_text(encoding="utf-8")
            for _, replacement in server.nginx_edits:
                assert replacement in edited, server.id
    broken = peers.Server("broken", "", "stack", nginx_edits=(("no such directive;", "x"),))
    with pytest.raises(peers.PeersError, match=r"broken: the stack.s nginx\.conf has 0 matches"):
        launcher._edited_nginx_conf(broken, tmp_path)


def _run(server: str, condition: str, requests: int, non_2xx: int = 0) -> dict[str, Any]:
    return {
        "server": server,
        "condition": condition,
        "round": 0,
        "normal": {
            "requests": requests,
            "non_2xx": non_2xx,
            "socket_errors": 0,
            "duration_s": 1.0,
            "p50_ms": 1.0,
            "p99_ms": 9.0,
        },
        "cpu_s": {
            "supervisor": 0.0,
            "nginx": 0.0,
            "metrics": 0.0,
            "app": 1.0,
            "clients": 0.1,
            "attacker": 0.0,
        },
        "attacker": {},
        "rss_mib": 100.0,
    }


def test_the_report_compares_with_the_fastest_direct_server_and_the_same_server_alone() -> None:
    """Raw figures as multiples of the fastest DIRECT server (a stack variant is never the
    yardstick); attacked goodput (2xx only) as a multiple of the same server's alone; a
    server that answered nothing shows "-" for its latency."""
    results = {
        "command": "./scripts/bench my-service --peers",
        "started": "2026-11-24T01:00:00Z",
        "finished": "2026-11-24T01:10:00Z",
        "machine": {"cpus": 2, "cpu_model": "x", "platform": "Linux", "versions": {}},
        "settings": {"workers": 2, "rounds": 1, "duration_s": 1, "normal_connections": 64},
        "servers": [
            {"id": "stack", "label": "the stack", "kind": "stack"},
            {"id": "stack-web-3", "label": "stack, 3 workers", "kind": "stack"},
            {"id": "uvicorn", "label": "uvicorn", "kind": "uvicorn"},
            {"id": "granian", "label": "granian", "kind": "granian"},
        ],
        "skipped": {"gunicorn-asgi": "gunicorn 23 has no asgi worker"},
        "conditions": ["items", "flood"],
        "runs": [
            _run("stack", "items", 8000),
            _run("stack-web-3", "items", 12000),
            _run("uvicorn", "items", 10000),
            _run("granian", "items", 9000),
            _run("stack", "flood", 7000, non_2xx=1000),
            _run("stack-web-3", "flood", 6000),
            _run("uvicorn", "flood", 2000),
            _run("granian", "flood", 0),
        ],
    }
    report = peers.markdown(results)
    assert "Skipped gunicorn-asgi: gunicorn 23 has no asgi worker." in report
    assert "| the stack | 8,000 | 0.80 x | 1.0 / 9.0 | 0 |" in report
    assert "| stack, 3 workers | 12,000 | 1.20 x |" in report
    assert "| the stack | 8,000 (9.0) | 6,000 | 0.75 x | 9.0 | 1,000 |" in report
    assert "| granian | 9,000 (9.0) | 0 | 0.00 x | - | 0 |" in report
    assert "| one client flooding | granian | - | - | - | - | - | - | - | 100 |" in report


def test_unknown_servers_and_conditions_are_one_line() -> None:
    with pytest.raises(peers.PeersError, match=r"unknown server\(s\) \['nginx'\]"):
        peers.choose_servers(["stack", "nginx"])
    with pytest.raises(peers.PeersError, match=r"unknown condition\(s\) \['ddos'\]"):
        peers.choose_conditions(["ddos"], short=False)
    # An attack needs its "alone" figure: the validated endpoint comes with it.
    assert peers.choose_conditions(["flood"], short=True) == ["items", "flood"]


def test_the_held_table_reports_memory_per_connection_and_tokens_on_time() -> None:
    """Memory per open connection is the server's PSS held minus before over the connections
    open at the end; tokens on time count a stalled stream's pending token as late; the
    normal clients' goodput and p99 stand beside the same server's alone."""
    held = _run("uvicorn", "held", 5000)
    held["attacker"] = {
        "streams_open": 300,
        "websockets_open": 1000,
        "streams_ended": 0,
        "failed": {},
        "window_s": 20.0,
        "tokens": 59_000,
        "tokens_expected": 60_000,
        "on_time": 58_000,
        "late": 2_000,
        "gap_p99_ms": 180.0,
        "gap_max_ms": 900.0,
        "pss_before_kib": 100_000,
        "pss_held_kib": 230_000,
    }
    results = {
        "command": "./scripts/bench my-service --peers --conditions held",
        "started": "2026-11-27T05:00:00Z",
        "finished": "2026-11-27T05:10:00Z",
        "machine": {"cpus": 2, "cpu_model": "x", "platform": "Linux", "versions": {}},
        "settings": {
            "workers": 2,
            "rounds": 1,
            "duration_s": 1,
            "normal_connections": 64,
            "held_streams": 300,
            "held_websockets": 1000,
            "held_s": 20,
            "token_interval_s": 0.1,
        },
        "servers": [{"id": "uvicorn", "label": "uvicorn", "kind": "uvicorn"}],
        "skipped": {},
        "conditions": ["items", "held"],
        "runs": [_run("uvicorn", "items", 10000), held],
    }
    report = peers.markdown(results)
    assert "300 event streams (a token every 100 ms) and 1,000 idle WebSockets" in report
    assert (
        "| uvicorn | 10,000 (9.0) | 5,000 | 0.50 x | 9.0 | 0 | 300 | 1,000 | 100 | 96.7% "
        "| 98.3% | 180 |"
    ) in report


def _held_run(server: str, pss_held_kib: int) -> dict[str, Any]:
    """A held run whose 1,300 connections added pss_held_kib - 100,000 KiB."""
    run = _run(server, "held", 5000)
    run["attacker"] = {
        "streams_open": 300,
        "websockets_open": 1000,
        "on_time": 1,
        "late": 0,
        "tokens": 1,
        "tokens_expected": 1,
        "gap_p99_ms": 100.0,
        "pss_before_kib": 100_000,
        "pss_held_kib": pss_held_kib,
    }
    return run


@pytest.mark.parametrize(
    ("stack_kib", "expected"),
    [
        (178_000, (True, "the stack 60 KiB each, uvicorn 50 KiB: 1.20 x, budget at most 1.20 x")),
        (178_200, (False, "the stack 60 KiB each, uvicorn 50 KiB: 1.20 x")),  # 1.203 x
    ],
)
def test_the_stacks_memory_per_held_connection_is_judged_against_uvicorns(
    stack_kib: int, expected: tuple[bool, str]
) -> None:
    """At most the budget's ratio of the baseline's memory per held connection passes; above
    it fails; without the baseline's held run there is nothing to judge."""
    budget = peers.HeldMemoryBudget("uvicorn", 1.2, "why")
    runs = [_held_run("stack", stack_kib), _held_run("uvicorn", 165_000)]
    verdict = peers.check_held_memory({"runs": runs}, budget)
    assert verdict is not None
    assert verdict[0] is expected[0]
    assert expected[1] in verdict[1]
    assert peers.check_held_memory({"runs": runs[:1]}, budget) is None


def test_the_shipped_held_memory_budget_is_uvicorns_times_1_2() -> None:
    budget = peers.load_held_budget(Path(peers.__file__).with_name("budgets.toml"))
    assert (budget.baseline, budget.max_ratio) == ("uvicorn", 1.2)


def test_a_token_is_on_time_within_two_periods_of_the_one_before() -> None:
    """Gaps of one and two periods are on time, three is late; tokens before the window
    starts are not counted, and a stream silent for longer at the end adds one late."""
    tally = held.Tally(interval=0.1)
    tally.token(1, 0.0)
    tally.restart(0.05)
    for now in (0.1, 0.3, 0.6):
        tally.token(1, now)
    tally.token(2, 0.55)
    summary = tally.summary(1.0, streams_open=2, websockets_open=0)
    assert (summary["tokens"], summary["on_time"], summary["late"]) == (3, 2, 3)
