"""The attackers of the peers experiment (lab/peers.py), and how its clients get addresses.

    python -m lab.attacks slow --port PORT --clients 2000 --kind mix --seconds 20

Three scenarios, each beside the same normal clients (wrk, 64 connections from 64 addresses):

- flood: one client (one address, 127.0.0.9) sending requests as fast as wrk can, on many
  connections;
- slow: 2,000 clients from 250 addresses holding connections open at a byte every 2 s: a
  third send their header slowly, a third a body slowly (a POST announcing 1 MB), a third ask
  for 1 MiB and never read it. A connection the server closes is opened again, so the 2,000
  stay for the whole run;
- oversized: one client (127.0.0.9) sending bodies of 2 MiB, above the stack's 1 MiB limit,
  as fast as wrk can.

The slow clients are this module's `slow` command: asyncio on plain sockets, so 2,000 cost
the machine a few hundred wake-ups a second. It prints `ready` once every client has
connected and, on SIGTERM or after --seconds, one JSON line of counts.

Client addresses: all of 127.0.0.0/8 is local on Linux, so a client bound to 127.0.1.7 is,
to nginx, another client than 127.0.1.8. The slow clients bind their sockets themselves;
wrk is given lab/source_address.c (compiled here with cc) through LD_PRELOAD. Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SHIM_SOURCE = Path(__file__).with_name("source_address.c")
# Addresses: the normal clients, the flooding client, the slow clients (250 addresses).
NORMAL_FIRST, NORMAL_COUNT = "127.0.1.1", 64
ATTACKER = "127.0.0.9"
SLOW_FIRST, SLOW_ADDRESSES = "127.0.2.1", 250
SLOW_INTERVAL_S = 2.0
OVERSIZED_BYTES = 2 * 1024 * 1024

OVERSIZED_SCRIPT = f"""-- lab/attacks.py: a POST with a body above client_max_body_size (1m).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.rep("x", {OVERSIZED_BYTES})
"""


class AttackError(RuntimeError):
    """An attacker could not be built or started; the message says why, in one line."""


def build_shim(directory: Path) -> Path:
    """Compile lab/source_address.c into directory; the library's path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise AttackError(
            "no C compiler (cc) on PATH: the peers experiment gives its clients their own "
            "addresses with lab/source_address.c; install one with `apt-get install gcc`"
        )
    library = directory / "source_address.so"
    done = subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(SHIM_SOURCE), "-ldl"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AttackError(f"cc could not build {SHIM_SOURCE.name}: {done.stderr.strip()}")
    return library


def source_env(library: Path, first: str, count: int) -> dict[str, str]:
    """Environment making a process's connections come from first .. first + count - 1."""
    return {"LD_PRELOAD": str(library), "LAB_SOURCE_FIRST": first, "LAB_SOURCE_COUNT": str(count)}


def raise_open_files_limit() -> int:
    """The soft limit on open files raised to the hard one (children inherit it); the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


@dataclass
class Counts:
    connects: int = 0  # connections opened, the first of each client included
    closed_by_server: int = 0  # connections the server ended (timeouts, resets)
    refused: int = 0  # connect() failures
    kinds: dict[str, int] = field(default_factory=dict)


def _requests(kind: str, port: int, large_path: str, body_path: str) -> tuple[bytes, bytes]:
    """What a client sends at once, then byte by byte."""
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    if kind == "headers":
        # A request line and a header that never ends.
        return b"GET /livez HTTP/1.1\r\n" + host, b"X-Slow: " + b"a" * 100_000
    if kind == "bodies":
        head = (
            f"POST {body_path} HTTP/1.1\r\n".encode()
            + host
            + b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        )
        return head, b'{"name":"' + b"a" * 999_000
    # unread: ask for the large response, then never read a byte of it.
    return f"GET {large_path} HTTP/1.1\r\n".encode() + host + b"\r\n", b""


@dataclass
class Crowd:
    """What every slow client shares: the target, the counts, the two events."""

    port: int
    paths: tuple[str, str]  # the large response's, the body's
    total: int
    counts: Counts = field(default_factory=Counts)
    connected: asyncio.Event = field(default_factory=asyncio.Event)  # every client once
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def _client(index: int, kind: str, crowd: Crowd) -> None:
    loop = asyncio.get_running_loop()
    base = int(ipaddress.IPv4Address(SLOW_FIRST))
    source = str(ipaddress.IPv4Address(base + index % SLOW_ADDRESSES))
    head, trickle = _requests(kind, crowd.port, *crowd.paths)
    counts, stop = crowd.counts, crowd.stop
    first = True
    while not stop.is_set():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)  # noqa: FBT003 - socket.setblocking takes a positional flag
        if kind == "unread":
            # A small window: the server's writes stop after a few KiB, as to a stalled reader.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            sock.bind((source, 0))
            await loop.sock_connect(sock, ("127.0.0.1", crowd.port))
        except OSError:
            counts.refused += 1
            sock.close()
            await asyncio.sleep(0.5)
            continue
        counts.connects += 1
        if first:
            first = False
            counts.kinds[kind] = counts.kinds.get(kind, 0) + 1
            if sum(counts.kinds.values()) == crowd.total:
                crowd.connected.set()
        try:
            await loop.sock_sendall(sock, head)
            for position in range(len(trickle) or 1_000_000):
                if await _closed_or_stopped(sock, stop, kind):
                    break
                if trickle:
                    await loop.sock_sendall(sock, trickle[position : position + 1])
        except OSError:
            pass
        finally:  # also when the run's end cancels the task
            sock.close()
        if not stop.is_set():
            counts.closed_by_server += 1


async def _closed_or_stopped(sock: socket.socket, stop: asyncio.Event, kind: str) -> bool:
    """Wait one interval; True when the run stopped or the server closed the connection."""
    # A plain sleep: the run's end cancels the clients. wait_for(stop.wait()) cost a task and
    # a timer a client a wake-up, 6 % of a 2-CPU machine for 2,000 clients.
    await asyncio.sleep(SLOW_INTERVAL_S)
    if stop.is_set():
        return True
    if kind == "unread":
        # Never read the body; only notice a close or a reset (an error on the socket).
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0
    try:
        data = sock.recv(65536)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return not data  # b"": the server closed; a response (408, 413...) comes before the close


async def slow(  # noqa: PLR0913 - the command's options, one call site
    port: int, clients: int, kind: str, seconds: float, paths: tuple[str, str], *, spread_s: float
) -> Counts:
    """Hold `clients` slow connections for `seconds` (or until SIGTERM), their first
    connections opened evenly over `spread_s`; the counts."""
    kinds = ("headers", "bodies", "unread") if kind == "mix" else (kind,)
    crowd = Crowd(port, paths, clients)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, crowd.stop.set)
    tasks = []
    for index in range(clients):
        tasks.append(asyncio.create_task(_client(index, kinds[index % len(kinds)], crowd)))
        if spread_s:
            await asyncio.sleep(spread_s / clients)
        elif index % 100 == 99:
            await asyncio.sleep(0.01)  # a listen backlog's worth at a time
    started = time.monotonic()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(crowd.connected.wait(), 30 + spread_s)
    print("ready" if crowd.connected.is_set() else "not ready", flush=True)
    with contextlib.suppress(TimeoutError):
        remaining = max(0.0, seconds - (time.monotonic() - started))
        await asyncio.wait_for(crowd.stop.wait(), remaining)
    crowd.stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return crowd.counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.attacks", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("slow", help="hold slow connections")
    command.add_argument("--port", type=int, required=True)
    command.add_argument("--clients", type=int, default=2000)
    command.add_argument("--kind", choices=("mix", "headers", "bodies", "unread"), default="mix")
    command.add_argument("--seconds", type=float, default=30.0)
    command.add_argument(
        "--spread", type=float, default=0.0, help="open the first connections over this long"
    )
    command.add_argument("--large-path", default="/bench/1mb")
    command.add_argument("--body-path", default="/items")
    args = parser.parse_args(argv)
    limit = raise_open_files_limit()
    if limit < args.clients + 64:
        print(f"error: {args.clients} clients need more open files than {limit}", file=sys.stderr)
        return 1
    counts = asyncio.run(
        slow(
            args.port,
            args.clients,
            args.kind,
            args.seconds,
            (args.large_path, args.body_path),
            spread_s=args.spread,
        )
    )
    print(json.dumps(counts.__dict__), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
