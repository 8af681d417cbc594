"""The long-lived clients of the peers experiment's held condition (lab/peers.py): event
streams and idle WebSockets, held open while wrk measures ordinary requests beside them.

    python -m lab.held --port PORT --streams 300 --websockets 1000 --interval 0.1 --seconds 60

Each stream is a GET of the lab app's /bench/events (lab/apps.py): a server-sent event every
--interval seconds. Each WebSocket opens /bench/ws and sends nothing; the client library
answers the server's pings, as a browser does. Connections come from their own addresses
(127.0.3.1 on), PER_ADDRESS each, below the stack's per-client caps (32 connections, 32
WebSockets, a burst of 20 handshakes): many clients, as a real service's would be.

It prints `ready` once every connection was tried (`not ready: ...` with the counts when some
failed); on SIGUSR1 it starts counting afresh (the measurement begins); on SIGTERM or after
--seconds, one JSON line: the connections open at the end and the failures by reason, and
the tokens of the measured window. A token is on time when it came at most LATE_FACTOR
intervals after the one before it on its stream; a stream that has been silent longer than
that when the window ends counts one late token more, so a stalled stream is never on time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import math
import signal
import sys
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.protocol import State

from lab.attacks import raise_open_files_limit

FIRST_ADDRESS = "127.0.3.1"
# Connections per client address: below CONNECTIONS_PER_CLIENT and WEBSOCKETS_PER_CLIENT
# (32 each) and the handshake burst (20), so the stack's edge caps never refuse them.
PER_ADDRESS = 16
LATE_FACTOR = 2.0  # lab/peers.py's report says "two periods"
OPENING_AT_ONCE = 64  # connections being opened together: a listen backlog's worth
OPEN_TIMEOUT_S = 60.0


@dataclass
class Tally:
    """The measured window's tokens, and the connections' fates."""

    interval: float
    window_start: float = 0.0
    tokens: int = 0
    on_time: int = 0
    gaps: list[float] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    last_token: dict[int, float] = field(default_factory=dict)  # per open stream
    streams_ended: int = 0

    def token(self, stream: int, now: float) -> None:
        previous = self.last_token.get(stream)
        self.last_token[stream] = now
        if previous is None or now < self.window_start:
            return
        gap = now - previous
        self.tokens += 1
        self.gaps.append(gap)
        if gap <= LATE_FACTOR * self.interval:
            self.on_time += 1

    def fail(self, reason: str) -> None:
        self.failed[reason] = self.failed.get(reason, 0) + 1

    def restart(self, now: float) -> None:
        self.window_start, self.tokens, self.on_time = now, 0, 0
        self.gaps.clear()

    def summary(self, now: float, streams_open: int, websockets_open: int) -> dict[str, Any]:
        window = now - self.window_start
        stalled = sum(
            1 for last in self.last_token.values() if now - last > LATE_FACTOR * self.interval
        )
        gaps = sorted(self.gaps)
        return {
            "streams_open": streams_open,
            "websockets_open": websockets_open,
            "streams_ended": self.streams_ended,
            "failed": self.failed,
            "window_s": round(window, 3),
            "tokens": self.tokens,
            "tokens_expected": round(streams_open * window / self.interval),
            "on_time": self.on_time,
            "late": self.tokens - self.on_time + stalled,
            "gap_p99_ms": round(gaps[int(0.99 * (len(gaps) - 1))] * 1000, 1) if gaps else 0.0,
            "gap_max_ms": round(gaps[-1] * 1000, 1) if gaps else 0.0,
        }


def source(index: int) -> str:
    base = int(ipaddress.IPv4Address(FIRST_ADDRESS))
    return str(ipaddress.IPv4Address(base + index // PER_ADDRESS))


async def _stream(index: int, port: int, tokens: int, tally: Tally, opened: asyncio.Event) -> None:
    """One event stream, read line by line until it ends or the run does."""
    loop = asyncio.get_running_loop()
    target = f"/bench/events?tokens={tokens}&interval={tally.interval}"
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, local_addr=(source(index), 0)
        )
    except OSError as error:
        tally.fail(f"stream connect: {type(error).__name__}")
        opened.set()
        return
    try:
        writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        status = await reader.readline()
        if b" 200 " not in status:
            tally.fail(f"stream status: {status.decode(errors='replace').strip()[:40]}")
            return
        tally.last_token[index] = loop.time()  # the answer's start: the first gap's origin
        opened.set()
        # The chunked body's size lines come between the events' lines: only these count.
        while line := await reader.readline():
            if line.startswith(b"data: "):
                tally.token(index, loop.time())
        tally.streams_ended += 1
    except OSError as error:
        tally.fail(f"stream: {type(error).__name__}")
    finally:
        opened.set()
        tally.last_token.pop(index, None)
        writer.close()


async def _websocket(index: int, port: int, tally: Tally, sessions: list[ClientConnection]) -> None:
    try:
        session = await connect(
            f"ws://127.0.0.1:{port}/bench/ws",
            local_addr=(source(index), 0),
            open_timeout=OPEN_TIMEOUT_S,
            ping_interval=None,  # idle: only the server's pings (and our pongs) cross
        )
    except Exception as error:  # noqa: BLE001 - each failure is counted by its kind
        tally.fail(f"websocket: {type(error).__name__} {str(error)[:40]}")
        return
    sessions.append(session)


async def hold(port: int, streams: int, websockets: int, interval: float, seconds: float) -> str:
    """Open the connections, hold them until SIGTERM or ``seconds``; the JSON summary."""
    loop = asyncio.get_running_loop()
    tally = Tally(interval)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: tally.restart(loop.time()))
    tokens = math.ceil(seconds / interval) + 10  # outlasts the run: ended early, it is counted
    sessions: list[ClientConnection] = []
    gate = asyncio.Semaphore(OPENING_AT_ONCE)
    tasks: list[asyncio.Task[None]] = []

    async def open_stream(index: int) -> None:
        opened = asyncio.Event()
        async with gate:
            tasks.append(asyncio.create_task(_stream(index, port, tokens, tally, opened)))
            await opened.wait()

    async def open_websocket(index: int) -> None:
        async with gate:
            await _websocket(index, port, tally, sessions)

    opening = [open_websocket(index) for index in range(websockets)]
    opening += [open_stream(websockets + index) for index in range(streams)]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*opening), OPEN_TIMEOUT_S)
    streams_open = len(tally.last_token)
    if tally.failed or streams_open < streams or len(sessions) < websockets:
        print(f"not ready: {len(sessions)} websockets, {streams_open} streams", flush=True)
    else:
        print("ready", flush=True)
    tally.restart(loop.time())
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    now = loop.time()
    websockets_open = sum(1 for session in sessions if session.state is State.OPEN)
    summary = tally.summary(now, len(tally.last_token), websockets_open)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Closed at once, not one close handshake after another: the run is over.
    for session in sessions:
        session.transport.abort()
    return json.dumps(summary)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.held", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--websockets", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between tokens")
    parser.add_argument("--seconds", type=float, default=60.0, help="the longest hold")
    args = parser.parse_args(argv)
    needed = args.streams + args.websockets + 64
    if raise_open_files_limit() < needed:
        print(f"error: {needed} connections need more open files", file=sys.stderr)
        return 1
    summary = asyncio.run(
        hold(args.port, args.streams, args.websockets, args.interval, args.seconds)
    )
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
