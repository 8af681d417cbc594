"""nginx's error lines through the relay (log_relay.LimitCounter), each test's counter in a
fresh interpreter: prometheus_client picks its multiprocess storage on import."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HEAD = b"2026/01/02 03:04:05 [warn] 12#12: *3 "
CONTEXT = b', client: 127.0.0.2, server: _, request: "GET / HTTP/1.1", host: "localhost"'
# A Referer imitating a refusal, then a client field: what an attacker sent in the red-team run.
FORGED = (
    b"2026/01/02 03:04:05 [error] 12#12: *3 client intended to send too large body: 9 bytes"
    + CONTEXT
    + b', referrer: "] 1#1: *1 limiting requests by zone \\"app_requests\\" x", client: 1.2.3.4'
)


# argv: the metrics directory, the budget, "1" to relay the last line again a second later.
RELAY = """
import json, sys, time
from pathlib import Path
from serving_stack.log_relay import LimitCounter
time.monotonic = lambda: 1000.0  # every line in one second: the budget's window holds
directory = Path(sys.argv[1])
directory.mkdir(exist_ok=True)
lines = [bytes.fromhex(line) for line in json.loads(sys.stdin.read())]
counter = LimitCounter(directory, budget=int(sys.argv[2]))
out = [counter.line(line) for line in lines]
if sys.argv[3] == "1":
    counter.second -= 1
    out.append(counter.line(lines[-1]))
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
registry = CollectorRegistry()
MultiProcessCollector(registry, str(directory))
samples = [s for metric in registry.collect() for s in metric.samples]
counted = [
    [s.labels["zone"], s.labels["dry_run"], s.value]
    for s in samples if s.name == "nginx_limited_requests_total"
]
dropped = [s.value for s in samples if s.name == "nginx_log_lines_dropped_total"]
sizes = {p.name: p.stat().st_size for p in directory.glob("*.db")}
print(json.dumps([out, counted, sum(dropped), sizes]))
"""


def relay(
    tmp_path: Path, lines: list[bytes], budget: int = 1000, *, new_second: bool = False
) -> tuple[list[str], dict[tuple[str, str], float], float, dict[str, int]]:
    """Feed lines to a LimitCounter in a fresh interpreter: what it wrote for each, the
    refusals counted by (zone, dry run), the lines dropped, the metric files' sizes."""
    args = [str(tmp_path), str(budget), "1" if new_second else "0"]
    hexed = json.dumps([line.hex() for line in lines])
    command = [sys.executable, "-c", RELAY, *args]
    done = subprocess.run(command, input=hexed, capture_output=True, text=True, check=True)
    out, counted, dropped, sizes = json.loads(done.stdout)
    return out, {(zone, dry_run): value for zone, dry_run, value in counted}, dropped, sizes


def test_refusals_are_counted_from_nginx_text_only(tmp_path: Path) -> None:
    """nginx's three refusal shapes count under their zone; a Referer imitating one, or a zone
    deploy/nginx.conf does not have, counts nothing and adds no series: ten thousand invented
    zones leave the counter file at its reserved size. The Referer's `", client: ...` stays
    inside the referrer, client is the one nginx wrote."""
    lines = [
        HEAD + b'limiting requests, excess: 1.000 by zone "client_rate"' + CONTEXT,
        HEAD + b'limiting requests, dry run, excess: 0.500 by zone "client_rate"' + CONTEXT,
        HEAD + b'limiting connections by zone "app_requests"' + CONTEXT,
        HEAD + b'limiting connections by zone "made_up"' + CONTEXT,
        FORGED,
    ]
    invented = [HEAD + f'limiting requests by zone "z{n}"'.encode() + CONTEXT for n in range(10000)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # side by side: mostly interpreter start-ups
        relayed = pool.map(relay, [tmp_path / "few", tmp_path / "many"], [lines, invented + lines])
        (out, counted, _, before), (_, counted_after, _, after) = relayed
    assert {key: value for key, value in counted.items() if value} == {
        ("client_rate", "false"): 1.0,
        ("client_rate", "true"): 1.0,
        ("app_requests", "false"): 1.0,
    }
    assert counted_after == counted
    assert sorted(before.values()) == sorted(after.values())
    assert {zone for zone, _ in counted} == {
        "client_rate",
        "oversized",
        "client_requests",
        "app_requests",
        "probes",
        "probe_connections",
    }
    forged = json.loads(out[-1])
    assert (forged["client"], forged["server"]) == ("127.0.0.2", "_")
    assert "client: 1.2.3.4" in forged["referrer"]
    assert forged["message"] == "client intended to send too large body: 9 bytes"


def test_lines_are_cut_and_relayed_under_a_budget(tmp_path: Path) -> None:
    """A 100 KB error line of 0xFF bytes becomes a JSON line under 6 KB (a kept byte is
    written as up to 5 characters); past the budget of lines a second they are dropped and
    counted, and the next second says how many, once."""
    long = HEAD + b"upstream timed out" + CONTEXT + b', referrer: "' + b"\xff" * 100_000 + b'"'
    out, _, dropped, _ = relay(tmp_path, [long] * 10, budget=3, new_second=True)
    assert [bool(text) for text in out[:10]] == [True] * 3 + [False] * 7
    assert dropped == 7
    assert all(len(text) < 6000 for text in out)
    warning, relayed = (json.loads(line) for line in out[10].splitlines())
    assert (warning["message"], warning["dropped"]) == (
        "nginx's error lines over the budget were dropped",
        7,
    )
    assert relayed["client"] == "127.0.0.2"
