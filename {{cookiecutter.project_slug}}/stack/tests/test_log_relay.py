"""nginx's error lines through the relay (log_relay.LimitCounter): what it writes, and what it
counts into its metric file, read back as the metrics listener reads it. A Referer imitating a
refusal: the template's battery (test_side_doors.py), and the context rule: test_child_lines.py."""

import json
import os
import types
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, values
from prometheus_client.multiprocess import MultiProcessCollector

from serving_stack import log_relay, nginx_conf
from serving_stack.settings import OWN_CONFIGS

HEAD = b"2026/01/02 03:04:05 [warn] 12#12: *3 "
CONTEXT = b', client: 127.0.0.2, server: _, request: "GET / HTTP/1.1", host: "localhost"'


def samples(directory: Path, name: str) -> dict[tuple[str, str], float]:
    """A metric's values by zone and dry run, from the directory's files."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, str(directory))  # type: ignore[no-untyped-call]  # unannotated upstream
    found = [s for metric in registry.collect() for s in metric.samples if s.name == name]
    return {(s.labels.get("zone", ""), s.labels.get("dry_run", "")): s.value for s in found}


def test_refusals_are_counted_from_nginx_text_only_and_lines_relayed_under_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within one second, past the budget of lines, lines are dropped and counted: nginx's
    refusal shapes still count under their zone, each zone the stack's nginx.conf declares (a
    WebSocket's too); ten thousand zones it does not declare count nothing and add no series
    (the counter file keeps its reserved size). The next second says how many were dropped,
    once, and a 100 KB error line of 0xFF bytes is relayed as a JSON line under 6 KB (a kept
    byte is written as up to 5 characters)."""
    # prometheus_client's multiprocess storage in tmp_path, as the supervisor has it.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # restored after the test
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue())  # type: ignore[no-untyped-call]  # unannotated upstream
    monkeypatch.setattr(log_relay, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
    declared = nginx_conf.declared_zones(OWN_CONFIGS["nginx_conf"].read_text(encoding="utf-8"))
    counter = log_relay.LimitCounter(tmp_path, declared, budget=1000)
    sizes = {path: path.stat().st_size for path in tmp_path.glob("*.db")}
    zones = [f'limiting requests by zone "z{n}"'.encode() for n in range(10000)]
    refusals = [
        b'limiting requests, excess: 1.000 by zone "client_rate"',
        b'limiting requests, dry run, excess: 0.500 by zone "client_rate"',
        b'limiting connections by zone "app_requests"',
        b'limiting connections by zone "websockets"',
        b'limiting connections by zone "made_up"',
    ]
    out = [counter.line(HEAD + text + CONTEXT) for text in zones + refusals]
    counter.second -= 1
    long = HEAD + b"upstream timed out" + CONTEXT + b', referrer: "' + b"\xff" * 100_000 + b'"'
    said = counter.line(long)
    warning, relayed = (json.loads(line) for line in said.splitlines())

    assert [bool(text) for text in out] == [True] * 1000 + [False] * 9005
    counted = samples(tmp_path, "nginx_limited_requests_total")
    assert {labels: value for labels, value in counted.items() if value} == {
        ("client_rate", "false"): 1.0,
        ("client_rate", "true"): 1.0,
        ("app_requests", "false"): 1.0,
        ("websockets", "false"): 1.0,
    }
    assert {"websockets", "websocket_handshakes", "oversized", "probes"} <= set(declared)
    assert {zone for zone, _ in counted} == set(declared)
    assert {path: path.stat().st_size for path in sizes} == sizes
    assert samples(tmp_path, "nginx_log_lines_dropped_total") == {("", ""): 9005.0}
    assert (warning["message"], warning["dropped"]) == (
        "nginx's error lines over the budget were dropped",
        9005,
    )
    assert (len(said) < 6000, relayed["client"]) == (True, "127.0.0.2")


def test_a_stdout_that_stalls_or_closes_neither_blocks_nor_raises() -> None:
    """A pipe nobody reads: writes return at once, lines past the backlog are dropped and
    counted, and once it is read, one line says how many; a pipe without a reader: counted."""
    read_end, write_end = os.pipe()
    output = log_relay.Output(write_end)
    output.start()
    counted: list[int] = []
    output.counted = counted.append
    line = b"x" * 1023 + b"\n"
    fits = (65536 + log_relay.BACKLOG) // len(line)  # the pipe's 64 KiB, then the backlog
    for _ in range(fits + 76):
        output.write(line)
    assert sum(counted) == 76

    received = b""
    while not output.flush():
        received += os.read(read_end, 65536)
    *lines, said = (received + os.read(read_end, 65536)).splitlines()
    assert lines == [line[:-1]] * fits
    assert json.loads(said)["dropped"] == 76
    os.close(read_end)
    output.write(line)
    output.stop()
    os.close(write_end)
    assert sum(counted) == 77
