"""The rollout's load through the balancer, every outcome counted (lab/rollout.py).

Keep-alive connections, each reused until the server says `Connection: close` or fails:
GETs and non-idempotent POSTs back to back, uploads of UPLOAD_BYTES, event streams reopened
when they end, WebSocket sessions that send a message every WS_PERIOD s and reconnect when
closed. Each runs on one event loop in a thread of its own, while the rollout runs beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

GET_CONNECTIONS = 2
POST_CONNECTIONS = 2
UPLOAD_CONNECTIONS = 1
STREAMS = 3
WEBSOCKETS = 3
UPLOAD_BYTES = 4 * 1024 * 1024
UPLOAD_PAUSE = 0.1  # s between two uploads: bounded load, the upload's CPU is nginx's and ours
STREAM_TOKENS, STREAM_INTERVAL = 10, 0.2  # a 2-second stream
WS_PERIOD = 0.2
TIMEOUT = 20.0  # s for a whole request or a WebSocket echo: a hung one is a failure
ITEM = json.dumps({"name": "rollout", "price_cents": 100, "tags": []}).encode()
PIECE = 256 * 1024  # an upload is written in pieces, as a client streaming a file


class Lost(Exception):  # noqa: N818 - an outcome, not an error of the rig
    """The exchange ended without a whole answer; the outcome's name."""


@dataclass
class Tally:
    """Every outcome the load saw."""

    # (kind, monotonic start, seconds, outcome): outcome a status ("200") or a failure's name.
    requests: list[tuple[str, float, float, str]] = field(default_factory=list)
    streams: Counter[str] = field(default_factory=Counter)
    # "<close code> reconnected" or "<close code> not reconnected", one per closed session.
    sessions: Counter[str] = field(default_factory=Counter)
    handshakes: Counter[str] = field(default_factory=Counter)  # failed WebSocket opens


class Connection:
    """One keep-alive HTTP/1.1 connection to the balancer, opened again after a close."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.closing = False  # the server's last answer said `Connection: close`

    async def send(
        self, method: str, path: str, body: bytes = b"", content_type: str = ""
    ) -> asyncio.StreamReader:
        """The request written whole (an upload in pieces); the reader of its answer."""
        if self.streams is None:
            try:
                self.streams = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                raise Lost("connection error") from None
        reader, writer = self.streams
        head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n"
        if content_type:
            head += f"Content-Type: {content_type}\r\n"
        try:
            writer.write(f"{head}\r\n".encode())
            for start in range(0, len(body), PIECE):
                writer.write(body[start : start + PIECE])
                await writer.drain()
            await writer.drain()
        except ConnectionError:
            # The balancer may answer (a 503) and close before reading a whole upload: what it
            # said is read next, and only a connection with no answer in it counts as reset.
            self.closing = True
        return reader

    async def head(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
        """The status and headers (names lower-case) of the answer."""
        status_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("connection", "").lower() == "close":
            self.closing = True
        return int(status_line.split()[1]), headers

    async def chunks(self, reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        """The whole body: by Content-Length, or chunked."""
        if "content-length" in headers:
            return await reader.readexactly(int(headers["content-length"]))
        body = b""
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += (await reader.readexactly(size + 2))[:-2]
        await reader.readuntil(b"\r\n")
        return body

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
        self.streams = None
        self.closing = False

    def done(self) -> None:
        """After a whole answer: closed when the server said so, kept for the next otherwise."""
        if self.closing:
            self.close()


def failure(error: BaseException) -> str:
    """The outcome's name of an exchange that raised error."""
    if isinstance(error, Lost):
        return str(error)
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, asyncio.IncompleteReadError):
        return "cut mid-answer" if error.partial else "closed unanswered"
    return "reset"  # ConnectionResetError, BrokenPipeError


async def requests_loop(kind: str, port: int, stop: asyncio.Event, tally: Tally) -> None:
    """kind's requests back to back on one keep-alive connection until stop."""
    method, path, body, content_type = {
        "GET": ("GET", "/", b"", ""),
        "POST": ("POST", "/items", ITEM, "application/json"),
        "upload": ("POST", "/uploads", b"u" * UPLOAD_BYTES, "application/octet-stream"),
    }[kind]
    # An upload's answer, as Starlette's JSONResponse writes it (compact).
    counted = json.dumps({"bytes": len(body)}, separators=(",", ":")).encode()
    connection = Connection(port)
    while not stop.is_set():
        started = time.monotonic()
        try:
            async with asyncio.timeout(TIMEOUT):
                reader = await connection.send(method, path, body, content_type)
                status, headers = await connection.head(reader)
                answer = await connection.chunks(reader, headers)
            outcome = str(status)
            if kind == "upload" and status == 200 and answer != counted:
                outcome = "wrong byte count"
            connection.done()
        except (Lost, TimeoutError, OSError, asyncio.IncompleteReadError) as error:
            outcome = failure(error)
            connection.close()
        tally.requests.append((kind, started, time.monotonic() - started, outcome))
        if kind == "upload":
            await asyncio.sleep(UPLOAD_PAUSE)
    connection.close()


@dataclass
class Events:
    """What one event stream delivered so far."""

    count: int = 0
    partial: bytes = b""  # an event's bytes not yet ended by its blank line

    async def read(self, reader: asyncio.StreamReader) -> None:
        """The stream's chunks, counting its events, up to its last chunk."""
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            try:
                data = await reader.readexactly(size + 2)
            except asyncio.IncompleteReadError as cut:
                self.partial += cut.partial
                raise
            self.partial += data[:-2]
            self.count += self.partial.count(b"\n\n")
            self.partial = self.partial.rpartition(b"\n\n")[2]
        await reader.readuntil(b"\r\n")


async def stream_once(connection: Connection, events: Events) -> str:
    """One GET /events read to its end; how it ended, unless it was cut (raises)."""
    path = f"/events?tokens={STREAM_TOKENS}&interval={STREAM_INTERVAL}"
    reader = await connection.send("GET", path)
    status, headers = await connection.head(reader)
    if status != 200:
        await connection.chunks(reader, headers)
        return f"refused: {status}"
    await events.read(reader)
    return "whole" if events.count == STREAM_TOKENS else f"short: {events.count} events"


async def stream_loop(port: int, stop: asyncio.Event, tally: Tally) -> None:
    """Event streams one after another on one keep-alive connection until stop."""
    connection = Connection(port)
    while not stop.is_set():
        events = Events()
        try:
            async with asyncio.timeout(TIMEOUT):
                outcome = await stream_once(connection, events)
            connection.done()
        except Lost as lost:
            outcome = str(lost)
            connection.close()
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            outcome = "cut mid-event" if events.partial else "cut at an event boundary"
            if not events.count:
                outcome += " (before the first)"
            connection.close()
        tally.streams[outcome] += 1
    connection.close()


async def open_session(uri: str, tally: Tally) -> ClientConnection | None:
    """A WebSocket session on uri, or None after counting why the handshake failed."""
    try:
        return await connect(uri, open_timeout=TIMEOUT, close_timeout=5)
    except InvalidStatus as refused:
        tally.handshakes[f"refused: {refused.response.status_code}"] += 1
    except (OSError, TimeoutError, WebSocketException) as error:
        tally.handshakes[
            failure(error) if isinstance(error, OSError) else type(error).__name__
        ] += 1
    return None


async def websocket_loop(port: int, stop: asyncio.Event, tally: Tally) -> None:
    """A session on /ws sending a message every WS_PERIOD s, reconnected when closed: each
    close counted with its code and whether the next handshake succeeded."""
    uri = f"ws://127.0.0.1:{port}/ws"
    closed: str | None = None  # the close code of the session before, awaiting its successor
    while not stop.is_set() or closed is not None:
        session = await open_session(uri, tally)
        if closed is not None:
            tally.sessions[f"{closed} {'reconnected' if session else 'not reconnected'}"] += 1
            closed = None
        if session is None:
            await asyncio.sleep(WS_PERIOD)
            continue
        try:
            number = 0
            while not stop.is_set():
                number += 1
                await session.send(str(number))
                async with asyncio.timeout(TIMEOUT):
                    await session.recv()
                await asyncio.sleep(WS_PERIOD)
            await session.close()
        except ConnectionClosed as ended:
            closed = str(ended.rcvd.code if ended.rcvd is not None else 1006)
        except TimeoutError:
            closed = "no echo"
            await session.close()


class Load:
    """The clients of every kind in kinds, on an event loop in a thread of its own."""

    def __init__(self, port: int, kinds: set[str]) -> None:
        self.port, self.kinds, self.tally = port, kinds, Tally()
        self._ready = threading.Event()
        self._failed: Exception | None = None
        # A daemon: a rehearsal stopped by a signal must not wait for its clients.
        self._thread = threading.Thread(target=self._main, name="load", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except Exception as error:  # noqa: BLE001 - a client's bug, raised again by stop()
            self._failed = error

    async def _run(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        port, stop, tally = self.port, self._stop, self.tally
        clients = [requests_loop("GET", port, stop, tally) for _ in range(GET_CONNECTIONS)]
        clients += [requests_loop("POST", port, stop, tally) for _ in range(POST_CONNECTIONS)]
        if "upload" in self.kinds:
            clients += [
                requests_loop("upload", port, stop, tally) for _ in range(UPLOAD_CONNECTIONS)
            ]
        if "stream" in self.kinds:
            clients += [stream_loop(port, stop, tally) for _ in range(STREAMS)]
        if "websocket" in self.kinds:
            clients += [websocket_loop(port, stop, tally) for _ in range(WEBSOCKETS)]
        self._ready.set()
        await asyncio.gather(*clients)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def stop(self) -> Tally:
        """Each client ends after its current exchange (a stream after its last event)."""
        with contextlib.suppress(RuntimeError):  # the loop already ended
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(TIMEOUT + 10)
        if self._failed is not None:
            raise RuntimeError(f"a client of the load failed: {self._failed!r}") from self._failed
        return self.tally
