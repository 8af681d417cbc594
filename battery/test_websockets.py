"""WebSockets through the live stack, against hostile and idle clients: handshakes a server must
refuse (as JSON, like every error), a frame claiming a gigabyte, a client that never reads, and
a thousand idle sessions (their memory, read from /proc, and ordinary requests beside them).
The app: the service's, plus /ws (echo) and /ws-flood (apps/streams_app.py)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import socket
import struct
import time
from typing import TYPE_CHECKING

import pytest
from websockets.asyncio.client import ClientConnection, connect

from harness import procfs
from harness.clients import get
from harness.ports import wait_for

from .conftest import Stacks, parse_json

if TYPE_CHECKING:
    from collections.abc import Iterator

    from harness.stack import RunningStack

    from .conftest import Identity

STREAMS_APP = "streams_app:app"
KEY = base64.b64encode(os.urandom(16)).decode()
HANDSHAKE = ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13"]


def handshake(
    port: int, path: str, *headers: str, source: str = "127.0.0.1"
) -> tuple[socket.socket, bytes]:
    """Send a handshake with these header lines from source; the open socket and the answer's
    head."""
    client = socket.create_connection(("127.0.0.1", port), 10, (source, 0))
    lines = "".join(f"{line}\r\n" for line in ["Host: localhost", *headers])
    client.sendall(f"GET {path} HTTP/1.1\r\n{lines}\r\n".encode("latin-1"))
    answer = b""
    while b"\r\n\r\n" not in answer:
        if not (chunk := client.recv(4096)):
            break
        answer += chunk
    return client, answer


@pytest.fixture(scope="module")
def ws_stack(nginx_bin: str, identity: Identity) -> Iterator[RunningStack]:
    """One stack serving streams_app.py, the default per-client WebSocket limits on."""
    started = Stacks(nginx_bin, identity)
    yield started.start(STREAMS_APP)
    started.stop_all()


HOSTILE = {
    "no Sec-WebSocket-Key": HANDSHAKE,
    "a key that is not 16 bytes": [*HANDSHAKE, "Sec-WebSocket-Key: c2hvcnQ="],
    "version 12": [*HANDSHAKE[:2], "Sec-WebSocket-Version: 12", f"Sec-WebSocket-Key: {KEY}"],
    "no version": [*HANDSHAKE[:2], f"Sec-WebSocket-Key: {KEY}"],
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_malformed_handshake_is_refused_as_json(ws_stack: RunningStack, case: str) -> None:
    """A handshake uvicorn refuses is a JSON 400 with the request id (nginx's error page, not
    uvicorn's plain text); a session on the same route still opens after it."""
    client, answer = handshake(ws_stack.port, "/ws", *HOSTILE[case])
    client.close()

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer[:300]
    request_id = re.search(rb"\r\nX-Request-ID: ([0-9a-f]{32})", head)
    assert request_id is not None, head
    assert parse_json(body.split(b"\n")[0])["request_id"] == request_id.group(1).decode()
    with SocketSession(ws_stack.port) as good:
        assert good.startswith(b"HTTP/1.1 101 "), good


class SocketSession:
    """A well-formed handshake on a raw socket; the answer's head inside the block."""

    def __init__(self, port: int, path: str = "/ws") -> None:
        self.client, self.head = handshake(port, path, *HANDSHAKE, f"Sec-WebSocket-Key: {KEY}")

    def __enter__(self) -> bytes:
        return self.head

    def __exit__(self, *_: object) -> None:
        self.client.close()


def test_an_unknown_route_or_a_missing_connection_header_opens_nothing(
    ws_stack: RunningStack,
) -> None:
    """A handshake to a path without a WebSocket route gets the app's 403; one whose Connection
    header does not ask for the upgrade is a plain GET (the app's JSON 404)."""
    with SocketSession(ws_stack.port, "/no-such-socket") as head:
        assert head.startswith(b"HTTP/1.1 403 "), head
    client, answer = handshake(
        ws_stack.port, "/ws", HANDSHAKE[0], HANDSHAKE[2], f"Sec-WebSocket-Key: {KEY}"
    )
    client.close()
    assert answer.startswith(b"HTTP/1.1 404 "), answer[:300]


def test_a_frame_claiming_a_gigabyte_closes_the_session_with_1009(ws_stack: RunningStack) -> None:
    """A frame header announcing 1 GiB (over WEBSOCKET_MAX_MESSAGE_BYTES) ends the session with
    a close frame 1009 (message too big) at once, without the server reading the rest; the
    worker answers the next request."""
    session = SocketSession(ws_stack.port)
    with session as head:
        assert head.startswith(b"HTTP/1.1 101 "), head
        # FIN + text, masked, 64-bit length (RFC 6455 5.2), a mask key, and no payload.
        session.client.sendall(struct.pack("!BBQ", 0x81, 0x80 | 127, 2**30) + os.urandom(4))
        frame = session.client.recv(64)

    assert frame[:1] == b"\x88", frame  # a close frame
    assert struct.unpack("!H", frame[2:4])[0] == 1009, frame
    assert get(ws_stack.port, "/livez")[0] == 200


def metric(stack: RunningStack, name: str) -> float:
    """A sample's value on the metrics port (0 when absent)."""
    page = get(stack.metrics_port, "/metrics")[2].decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", page, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_client_that_never_reads_is_closed_and_costs_the_others_nothing(
    stacks: Stacks,
) -> None:
    """A client that asks for a flood and never reads: ordinary requests keep answering, and
    nginx closes the session after send_timeout (shortened here to 3 s), ending the app's side
    too (its open-sessions gauge falls to 0)."""
    stack = stacks.start(STREAMS_APP, nginx_directives={"send_timeout": "3s"})
    session = SocketSession(stack.port, "/ws-flood")
    with session as head:
        assert head.startswith(b"HTTP/1.1 101 "), head
        session.client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        wait_for(lambda: metric(stack, "websocket_sessions_open") == 1, 10, "the session open")
        statuses = [get(stack.port, "/livez")[0] for _ in range(20)]
        # Closed by nginx: reading now drains what the kernel holds, then the end.
        wait_for(lambda: metric(stack, "websocket_sessions_open") == 0, 30, "the app's side closed")
        session.client.settimeout(10)  # a TimeoutError here: nginx never closed it
        with contextlib.suppress(ConnectionResetError):  # else the end, after what was buffered
            while session.client.recv(1 << 20):
                pass

    assert statuses == [200] * 20


def tree_pss(root: int) -> int:
    """The proportional set size of root and every process under it, KiB."""
    return procfs.pss_kib(proc.pid for proc in procfs.tree(root) if proc.alive)


IDLE_SESSIONS = 1000
ADDRESSES = 64  # 127.0.0.2-65: each under WEBSOCKETS_PER_CLIENT (32), as real clients are


def test_a_thousand_idle_websockets_cost_memory_not_requests(
    stacks: Stacks, record_property: pytest.RecordProperty
) -> None:
    """A thousand idle sessions (default limits, 64 client addresses) all open and still echo;
    ordinary requests beside them all answer. Their memory per session, nginx's and the app's,
    read from /proc, is recorded (`record_property`) and printed."""
    stack = stacks.start(STREAMS_APP)
    nginx, gunicorn = stack.child_pid("nginx"), stack.child_pid("gunicorn")

    def memory() -> tuple[int, int]:
        return tree_pss(nginx), tree_pss(gunicorn)

    before = memory()

    async def scenario() -> tuple[tuple[int, int], list[int], list[str]]:
        gate = asyncio.Semaphore(64)

        async def one(number: int) -> ClientConnection:
            address = f"127.0.0.{2 + number % ADDRESSES}"
            async with gate:
                return await connect(
                    f"ws://127.0.0.1:{stack.port}/ws", local_addr=(address, 0), open_timeout=60
                )

        sessions = await asyncio.gather(*(one(n) for n in range(IDLE_SESSIONS)))
        await asyncio.sleep(1)
        held = await asyncio.to_thread(memory)
        statuses = await asyncio.to_thread(
            lambda: [get(stack.port, "/livez")[0] for _ in range(50)]
        )
        echoes = []
        for session in sessions[:: IDLE_SESSIONS // 10]:
            await session.send("still here")
            echoes.append(str(await session.recv()))
        await asyncio.gather(*(session.close() for session in sessions))
        return held, statuses, echoes

    started = time.monotonic()
    held, statuses, echoes = asyncio.run(scenario())

    assert statuses == [200] * 50
    assert echoes == ["still here"] * 10
    per_session = {
        "nginx_kib_per_websocket": round((held[0] - before[0]) / IDLE_SESSIONS, 1),
        "app_kib_per_websocket": round((held[1] - before[1]) / IDLE_SESSIONS, 1),
    }
    for name, value in per_session.items():
        record_property(name, value)
    print(f"{IDLE_SESSIONS} idle WebSockets in {time.monotonic() - started:.1f} s: {per_session}")
    wait_for(lambda: metric(stack, "websocket_sessions_open") == 0, 30, "every session closed")
