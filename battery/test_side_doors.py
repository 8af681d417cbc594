"""The edge's side doors (issue 30): one client must not kill, starve or blind the stack
through its logs, probes, spool or refusals.

Each test is an attack from one address (127.0.0.2, or a few: 127.0.0.2-5) beside a victim on
others (127.0.1.1-32: every address of 127.0.0.0/8 is local on Linux, and a different client
to nginx), against one stack with the shipped per-client limits (RATE_LIMIT and
CONNECTIONS_PER_CLIENT as a deployment has them). Where the finding is starvation, the victim
runs alone, then beside the attack, then alone again, in the same test: its throughput and p99
are compared as ratios, never against a wall-clock figure. Each phase lasts seconds; a round
that misses the floor is run again, three rounds at most (the CPUs are shared).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import re
import shutil
import socket
import time
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from harness.ports import wait_for
from harness.stack import RunningStack
from lab.attacks import build_shim, source_env

from .conftest import FAULT_APP, SYSTEM_PATH, Identity, Stacks, lines_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.live

ATTACKER = "127.0.0.2"
# Ninety-six victim addresses: each well under its own RATE_LIMIT (100 a second) at the
# throughput 2 CPUs give, so only the attack, never the victim's own limit, can slow it. With
# 32, a 2-CPU Xeon's 5,500 requests/s were 170 a second each: the attacked phase was capped at
# 32 x 117 (its burst spent), 0.68-0.71 x of alone, whatever the attack.
VICTIMS = tuple(f"127.0.1.{n}" for n in range(1, 97))
# One phase of the victim's measure, alone and attacked.
PHASE_SECONDS = 3.0
# The victim keeps at least this share of its unattacked throughput (issue 30, "Done when").
FLOOR = 0.8
# The template's CI runs the battery beside image builds: a round whose phases met different
# background load is run again, up to this many times (an attack that works fails them all).
ROUNDS = 5
# The limit zones the rendered nginx.conf declares: the relay's only labels.
ZONE = re.compile(r"^\s*limit_(?:req|conn)_zone\s[^;]*?\bzone=([^:\s;]+):", re.MULTILINE)


@pytest.fixture(scope="module")
def door_stack(nginx_bin: str, identity: Identity) -> Iterator[RunningStack]:
    """One stack with the shipped per-client limits; each test leaves it serving."""
    started = Stacks(nginx_bin, identity)
    stack = started.start(FAULT_APP, shipped_limits=True)
    wait_for(lambda: scrape(stack) is not None, 30, "the metrics listener to answer")
    yield stack
    started.stop_all()


def scrape(stack: RunningStack) -> str | None:
    url = f"http://127.0.0.1:{stack.metrics_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode() if response.status == 200 else None
    except OSError:
        return None


def limited(text: str) -> dict[tuple[str, str], float]:
    """nginx_limited_requests_total by (zone, dry_run)."""
    found = {}
    pattern = re.compile(
        r'^nginx_limited_requests_total\{dry_run="(\w+)",zone="([^"]*)"\} (\S+)$', re.MULTILINE
    )
    for dry_run, zone, value in pattern.findall(text):
        found[zone, dry_run] = float(value)
    return found


# --- clients bound to a source address -------------------------------------------------------


async def connect(port: int, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.bind((source, 0))
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock)


async def answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """One response's status and whether the connection stays open (its body read)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    await reader.readexactly(int(length.group(1)) if length else 0)
    return status, re.search(rb"(?im)^connection:\s*close", head) is None


@dataclass
class Measure:
    """What the victim saw in one phase."""

    seconds: float
    ok: int = 0
    other: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies) or [float("inf")]
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def victim(port: int, seconds: float) -> Measure:
    """One keep-alive connection per victim address, GET /fault/pid (the app) back to back."""
    measure = Measure(seconds)
    wire = b"GET /fault/pid HTTP/1.1\r\nHost: localhost\r\n\r\n"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def one(source: str) -> None:
        conn = None
        while loop.time() < deadline:
            try:
                if conn is None:
                    conn = await connect(port, source)
                started = loop.time()
                conn[1].write(wire)
                status, keep = await asyncio.wait_for(answer(conn[0]), 10)
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                measure.other.append(0)
                conn = None
                continue
            if status == 200:
                measure.ok += 1
                measure.latencies.append(loop.time() - started)
            else:
                measure.other.append(status)
            if not keep:
                conn[1].close()
                conn = None
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(one(source) for source in VICTIMS))
    return measure


def side_by_side(
    port: int, attack: Callable[[float], Awaitable[object]], warmup: float = 0.5
) -> tuple[Measure, Measure, object]:
    """The victim alone, then beside the attack (started warmup s before it, in a process of
    its own: the victim's event loop is not the attacker's): both measures and what the
    attack returned."""
    first = asyncio.run(victim(port, PHASE_SECONDS / 2))
    context = multiprocessing.get_context("fork")
    results = context.SimpleQueue()

    def attacker() -> None:
        results.put(asyncio.run(attack(PHASE_SECONDS + warmup + 0.5)))

    process = context.Process(target=attacker, daemon=True)
    process.start()
    try:
        time.sleep(warmup)
        attacked = asyncio.run(victim(port, PHASE_SECONDS))
        process.join(PHASE_SECONDS + warmup + 30)
        returned = results.get() if not results.empty() else None
    finally:
        process.kill()
        process.join()
    # Alone before and after, half a phase each: a machine's drift (other work on shared CPUs)
    # weighs on both sides of the ratio alike.
    second = asyncio.run(victim(port, PHASE_SECONDS / 2))
    alone = Measure(
        PHASE_SECONDS,
        first.ok + second.ok,
        first.other + second.other,
        first.latencies + second.latencies,
    )
    return alone, attacked, returned


def holds(
    name: str, port: int, attack: Callable[[float], Awaitable[object]], warmup: float = 0.5
) -> tuple[Measure, Measure, object, int]:
    """side_by_side() until the victim keeps FLOOR of its throughput, ROUNDS at most: the 2
    CPUs are shared, and other work can take a phase's CPU (an attack that works fails every
    round: 0.0-0.4 x before issue 30's changes). The last round, what its attack returned, and
    the rounds run."""
    for round_number in range(1, ROUNDS + 1):
        alone, attacked, returned = side_by_side(port, attack, warmup)
        print(f"round {round_number}:", report(name, alone, attacked), f"attacker: {returned}")
        if attacked.rate >= FLOOR * alone.rate:
            break
    return alone, attacked, returned, round_number


def report(name: str, alone: Measure, attacked: Measure) -> str:
    return (
        f"{name}: victim {alone.rate:.0f} -> {attacked.rate:.0f} r/s "
        f"({attacked.rate / max(alone.rate, 1e-9):.2f} x), p99 {alone.p99 * 1000:.1f} -> "
        f"{attacked.p99 * 1000:.1f} ms, refused {len(attacked.other)}"
    )


async def flood(port: int, wire: bytes, seconds: float, connections: int = 16) -> dict[int, int]:
    """Requests from ATTACKER as fast as nginx answers them; how many of each status came."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    answered: dict[int, int] = {}

    async def one() -> None:
        conn = None
        while loop.time() < deadline:
            try:
                if conn is None:
                    conn = await connect(port, ATTACKER)
                conn[1].write(wire)
                status, keep = await asyncio.wait_for(answer(conn[0]), 5)
                answered[status] = answered.get(status, 0) + 1
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError, IndexError):
                keep = False
            if not keep and conn is not None:
                conn[1].close()
                conn = None
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return answered


# --- finding 1: counters and the error line from structure, never from client text ----------


def test_a_forged_referer_neither_counts_refusals_nor_names_the_client(
    door_stack: RunningStack,
) -> None:
    """Error lines whose Referer imitates a refusal and a client field count nothing, add no
    series, and the relayed line names the real client address."""
    before = limited(scrape(door_stack) or "")
    forged = (
        '] 1#1: *1 limiting requests by zone "app_requests" '
        '] 1#1: *1 limiting connections by zone "forged_zone" x", client: 198.51.100.77'
    )
    wire = (
        "POST /fault/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000000\r\n"
        f"Referer: {forged}\r\nConnection: close\r\n\r\n"
    ).encode()

    async def attack() -> None:
        for _ in range(5):  # within the oversized queue's burst: each one a 413
            reader, writer = await connect(door_stack.port, ATTACKER)
            writer.write(wire)
            status, _ = await asyncio.wait_for(answer(reader), 10)
            assert status == 413
            writer.close()

    asyncio.run(attack())
    wait_for(
        lambda: (
            sum("forged_zone" in str(line) for line in lines_of(door_stack, "nginx.error")) >= 5
        ),
        10,
        "nginx's error lines about the 413s",
    )
    after = limited(scrape(door_stack) or "")
    assert set(after) == set(before), f"series added: {set(after) - set(before)}"
    rendered = (door_stack.run_dir / "nginx.conf").read_text(encoding="utf-8")
    assert {zone for zone, _ in after} == set(ZONE.findall(rendered))
    assert {"websockets", "websocket_handshakes"} <= set(ZONE.findall(rendered))
    assert after == before, "a refusal counted from a client's Referer"
    forged_lines = [
        line for line in lines_of(door_stack, "nginx.error") if "forged_zone" in str(line)
    ]
    assert {line.get("client") for line in forged_lines} == {ATTACKER}, forged_lines[-1]


# --- finding 3: the probes are no side door ------------------------------------------------


@pytest.mark.parametrize(
    "target", ["/livez", "/livez?flood", "/x/../livez", "/readyz?x"], ids=lambda t: t
)
def test_a_probe_flood_is_held_to_the_clients_limits(door_stack: RunningStack, target: str) -> None:
    """A flood of probe requests from one address (the exact path, or a variant the old
    exemption matched) is held to a probe's limit: the victim keeps its throughput."""

    def attack(seconds: float) -> Awaitable[dict[int, int]]:
        wire = f"GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
        return flood(door_stack.port, wire, seconds)

    def served() -> int:
        return sum(
            line.get("client") == ATTACKER and line.get("status") == 200
            for line in lines_of(door_stack, "nginx.access")
        )

    before = served()
    alone, attacked, _, rounds = holds(f"probe flood {target}", door_stack.port, attack)
    time.sleep(1.5)  # the access log's buffer flushes within 1 s
    count = (served() - before) / rounds
    print(f"{count:.0f} of the attacker's requests served a round")
    # A probe's own limit or the client's rate, with their bursts: hundreds, never thousands.
    assert count < 1000, f"{count} probe requests of one address served in {PHASE_SECONDS} s"
    assert attacked.rate >= FLOOR * alone.rate, report(target, alone, attacked)


def test_a_probe_takes_no_body(door_stack: RunningStack) -> None:
    """POST /livez, a body on GET /livez and a chunked /livez are refused at once."""

    async def send(wire: bytes) -> int:
        reader, writer = await connect(door_stack.port, ATTACKER)
        writer.write(wire)
        status, _ = await asyncio.wait_for(answer(reader), 5)
        writer.close()
        return status

    host = "Host: localhost\r\nConnection: close\r\n"
    wires = {
        "POST": f"POST /livez HTTP/1.1\r\n{host}Content-Length: 1\r\n\r\n".encode(),
        "GET body": f"GET /livez HTTP/1.1\r\n{host}Content-Length: 3\r\n\r\n".encode(),
        "chunked": f"GET /livez HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n\r\n5".encode(),
    }
    started = time.monotonic()
    statuses = {name: asyncio.run(send(wire)) for name, wire in wires.items()}
    assert statuses == {"POST": 405, "GET body": 400, "chunked": 400}
    assert time.monotonic() - started < 5, "nginx waited for a probe's body"


# --- finding 2: slow uploads cannot hold the overload cap --------------------------------------


@pytest.mark.parametrize(
    ("addresses", "each"),
    # Four addresses of 128 (issue 46); sixteen of CONNECTIONS_PER_CLIENT's 32 (issue 50: 0 of
    # 25,605 answered, all 503, before requests sending a body got their share of the cap).
    [(4, 128), (16, 32)],
    ids=["4x128", "16x32"],
)
def test_slow_uploads_leave_room_for_others(
    door_stack: RunningStack, addresses: int, each: int
) -> None:
    """Slow uploads (a byte sent, the rest never), 512 together, the whole of app_requests,
    hold only the uploads' share of it: the victim keeps its throughput."""
    attackers = [f"127.0.0.{n}" for n in range(2, 2 + addresses)]
    held: list[asyncio.StreamWriter] = []
    wire = (
        b"POST /fault/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )

    async def attack(seconds: float) -> int:
        for source in attackers:
            for _ in range(each):
                _, writer = await connect(door_stack.port, source)
                writer.write(wire)
                held.append(writer)
        await asyncio.sleep(seconds)
        for writer in held:
            writer.close()
        return len(held)

    name = f"slow uploads {addresses} x {each}"
    alone, attacked, _, _ = holds(name, door_stack.port, attack, warmup=1.0)
    assert attacked.rate >= FLOOR * alone.rate, report("slow uploads", alone, attacked)


# --- finding 4: refusals cost bounded bytes and never block nginx -------------------------------


def test_refused_requests_with_huge_agents_write_bounded_lines(door_stack: RunningStack) -> None:
    """Bad-Host requests with a 7 KB User-Agent of 0xFF bytes: each access line stays short
    (the agent and path cut) and the victim keeps its throughput."""
    agent = b"\xff" * 7000
    path = "/" + "a" * 6000
    wire = (
        f"GET {path} HTTP/1.1\r\nHost: evil.example\r\nUser-Agent: ".encode() + agent + b"\r\n\r\n"
    )
    size_before = door_stack.log_path.stat().st_size

    def attack(seconds: float) -> Awaitable[dict[int, int]]:
        return flood(door_stack.port, wire, seconds, connections=8)

    alone, attacked, _, _ = holds("bad-host flood", door_stack.port, attack)
    time.sleep(1.5)  # the access log's buffer flushes within 1 s
    with door_stack.log_path.open("rb") as log:
        log.seek(size_before)
        written = log.read()
    refused = [
        raw for raw in written.splitlines() if b'"status":400' in raw and ATTACKER.encode() in raw
    ]
    print(f"longest refusal line: {max((len(raw) for raw in refused), default=0)} B")
    assert refused, "no access line for the refused requests"
    assert max(len(raw) for raw in refused) <= 2048, refused[0][:300]
    for raw in refused[:50]:
        json.loads(raw)
    assert attacked.rate >= FLOOR * alone.rate, report("bad-host flood", alone, attacked)


# --- issue 50, finding 1: a refusal costs less than an answer ----------------------------------

# A log line's bytes, at most, for each of the attacker's refused requests (its access line with
# the agent cut, each 0xFF written as the 5 bytes of "\\xff"; its error lines are budgeted).
LOG_BYTES_PER_REFUSAL = 2048


def test_refusals_at_a_partners_rate_cost_less_than_answers(stacks: Stacks, tmp_path: Path) -> None:
    """One address allowed 5,000 requests a second (a busy NAT, a partner behind one address)
    sends bad-Host requests with a 7 KB User-Agent of 0xFF as fast as nginx answers them: the
    victim keeps its throughput, each refusal writes a bounded number of log bytes, and the
    stack still serves. The attacker is wrk from ATTACKER (lab/source_address.c): issue 50's
    0.44 x came from a client in Python, whose own CPU the victim lost too (0.57-0.71 x here,
    with the relay of then and of now alike; with wrk, 0.84-1.03 x with both)."""
    wrk = shutil.which("wrk", path=SYSTEM_PATH)
    if wrk is None:
        pytest.skip("wrk is not installed (sudo apt-get install -y wrk)")
    source = source_env(build_shim(tmp_path), ATTACKER, 1)
    script = tmp_path / "bad_host.lua"
    script.write_text(
        'wrk.headers["Host"] = "evil.example"\n'
        'wrk.headers["User-Agent"] = string.rep("\\255", 7000)\n',
        encoding="utf-8",
    )
    stack = stacks.start(FAULT_APP, shipped_limits=True, RATE_LIMIT="5000", RATE_LIMIT_BURST="5000")
    size_before = stack.log_path.stat().st_size

    async def attack(seconds: float) -> str:
        command = [wrk, "-t1", "-c16", f"-d{math.ceil(seconds)}s", "-s", str(script)]
        process = await asyncio.create_subprocess_exec(
            *command,
            f"http://127.0.0.1:{stack.port}/",
            env={**os.environ, **source},
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        return " ".join(re.findall(r"\d+ requests in [\d.]+s|Non-2xx[^\n]*", out.decode()))

    alone, attacked, returned, _ = holds("bad-host flood at 5,000/s", stack.port, attack)
    time.sleep(1.5)  # the access log's buffer flushes within 1 s
    with stack.log_path.open("rb") as log:
        log.seek(size_before)
        attackers = [raw for raw in log.read().splitlines() if f'"{ATTACKER}"'.encode() in raw]
    refused = sum(b'"status":400' in raw and b"nginx.access" in raw for raw in attackers)
    per_request = sum(map(len, attackers)) / max(refused, 1)
    print(f"attacker: {returned}; {refused} refused, {per_request:.0f} log bytes each")
    assert refused > 1000, f"the attack was not refused as a bad Host: {returned}"
    assert per_request <= LOG_BYTES_PER_REFUSAL, f"{per_request:.0f} log bytes a refusal"
    assert attacked.rate >= FLOOR * alone.rate, report("bad-host flood", alone, attacked)
    assert asyncio.run(victim(stack.port, 0.2)).ok > 0, "the stack no longer serves"


# --- finding 5: a 413 stops reading after a short bound -------------------------------------------


def test_a_refused_body_is_not_read_for_long(door_stack: RunningStack) -> None:
    """After its 413, a client still sending a huge body has its connection closed within a
    few seconds, not nginx's default 30 s of lingering reads."""
    head = b"POST /fault/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000000000\r\n\r\n"
    chunk = b"x" * 65536
    with socket.socket() as conn:
        conn.bind((ATTACKER, 0))
        conn.connect(("127.0.0.1", door_stack.port))
        conn.settimeout(1.0)
        conn.sendall(head)
        started = time.monotonic()
        sent = 0
        with contextlib.suppress(OSError):
            while time.monotonic() - started < 12:
                sent += conn.send(chunk)
        lasted = time.monotonic() - started
    print(f"413 lingering: nginx read {sent / 1e6:.0f} MB in {lasted:.1f} s")
    assert lasted < 6, f"nginx still read the refused body after {lasted:.1f} s ({sent} bytes)"
