"""The bounded WebSocket protocol in a real uvicorn server, with real clients: a message in too
many fragments and messages past the rate close the session; a client that sends pings and
never reads the pongs stops being read instead of growing the server."""

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from functools import partial
from logging.handlers import BufferingHandler
from typing import TYPE_CHECKING, Any, cast

import pytest
import uvicorn
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from serving_stack.websocket_protocol import BoundedWebSocketProtocol, SessionBounds

if TYPE_CHECKING:
    import asyncio


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echo each text message until the client goes; /denied is refused with a 401."""
    if scope["type"] != "websocket":
        return
    if scope["path"] == "/denied":
        await send({"type": "websocket.http.response.start", "status": 401, "headers": []})
        await send({"type": "websocket.http.response.body", "body": b"no token"})
        return
    while (message := await receive())["type"] != "websocket.disconnect":
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        else:
            await send({"type": "websocket.send", "text": message.get("text") or ""})


class Served:
    """A uvicorn server on a loopback port, in a thread, with the bounded protocol."""

    def __init__(self, bounds: SessionBounds) -> None:
        # uvicorn calls it as it calls a protocol class (config=, server_state=, app_state=).
        protocol = cast("type[asyncio.Protocol]", partial(BoundedWebSocketProtocol, bounds=bounds))
        config = uvicorn.Config(echo, ws=protocol, lifespan="off", log_level="warning")
        self.server = uvicorn.Server(config)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"ws://127.0.0.1:{self.listener.getsockname()[1]}/"
        self.thread = threading.Thread(target=self.server.run, args=([self.listener],))

    def __enter__(self) -> "Served":
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.listener.close()

    def sessions(self) -> list[BoundedWebSocketProtocol]:
        found = self.server.server_state.connections
        return [c for c in found if isinstance(c, BoundedWebSocketProtocol)]


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    with Served(request.param) as running:
        yield running


def close_code(session: ClientConnection) -> int | None:
    """The server's close code, read next."""
    with pytest.raises(ConnectionClosedError) as closed:
        session.recv(timeout=10)
    return closed.value.rcvd.code if closed.value.rcvd else None


@pytest.mark.parametrize("served", [SessionBounds(8, 0)], indirect=True)
def test_a_message_in_more_fragments_than_allowed_closes_with_1009(served: Served) -> None:
    """Eight frames pass (echoed whole); a ninth closes the session with 1009. The client sends
    a message's pieces, then an empty final frame."""
    with connect(served.url) as session:
        session.send(iter(["ab"] * 7))
        assert session.recv(timeout=10) == "ab" * 7
        session.send(iter(["ab"] * 8))
        assert close_code(session) == 1009


def opened(served: Served) -> socket.socket:
    """A raw client socket after a WebSocket handshake with the server."""
    client = socket.create_connection(served.listener.getsockname(), timeout=10)
    client.sendall(
        b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: x3JJHMbDL1EzLkh9GBhXDw==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += client.recv(1)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return client


def frame(opcode: int, payload: bytes) -> bytes:
    """A final client frame (masked with zeros: the payload as is), under 126 bytes."""
    return struct.pack("!BB", 0x80 | opcode, 0x80 | len(payload)) + bytes(4) + payload


def answers(client: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """The server's next count frames (unmasked, each under 126 bytes): opcode, payload."""
    found = []
    for _ in range(count):
        opcode, length = client.recv(2, socket.MSG_WAITALL)
        payload = client.recv(length, socket.MSG_WAITALL) if length else b""
        found.append((opcode & 0x0F, payload))
    return found


@pytest.mark.parametrize("served", [SessionBounds(8, 20)], indirect=True)
def test_messages_and_pings_past_the_rate_close_with_1008(served: Served) -> None:
    """A second's worth (20 messages and pings) at once is answered; 21 at once, a second
    later: their pings answered, then the close 1008 before any echo. Each burst is one write,
    read at once: a server closing with unread data would reset, losing its close."""
    burst = (frame(0x1, b"hi") + frame(0x9, b"p")) * 10
    with opened(served) as client:
        client.sendall(burst)
        assert sorted(answers(client, 20)) == [(0x1, b"hi")] * 10 + [(0xA, b"p")] * 10
        time.sleep(1.1)  # the bucket full again
        client.sendall(burst + frame(0x1, b"one too many"))
        *pongs, (opcode, payload) = answers(client, 11)
    assert pongs == [(0xA, b"p")] * 10
    assert (opcode, payload[:2]) == (0x8, struct.pack("!H", 1008))


PING = frame(0x9, bytes(125))  # the largest control frame


@pytest.mark.parametrize("served", [SessionBounds(8, 0)], indirect=True)
def test_a_client_that_pings_and_never_reads_stops_being_read(served: Served) -> None:
    """Pings sent for 2 s by a client that reads nothing: the server's pending pongs stay under
    1 MiB (uvicorn alone: each ping answered into an unbounded buffer)."""
    with opened(served) as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.settimeout(0.2)
        burst, sent, until = PING * 512, 0, time.monotonic() + 2
        while time.monotonic() < until:
            try:
                sent += client.send(burst)
            except TimeoutError:  # the server stopped reading: the kernel's buffers are full
                continue
        (session,) = served.sessions()
        pending = session.transport.get_write_buffer_size()

    assert pending < 1 << 20, f"{pending} bytes of pongs pending after {sent} bytes of pings"


@pytest.mark.parametrize("served", [SessionBounds(8, 0)], indirect=True)
def test_a_handshake_refused_with_an_http_answer_logs_no_error(served: Served) -> None:
    """A 401 before the handshake (an app's auth, the denial response extension) is what the
    client gets, and no ERROR line: uvicorn's own protocol logged one for every refusal."""
    errors = BufferingHandler(capacity=100)
    errors.setLevel(logging.ERROR)
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(errors)
    try:
        with pytest.raises(InvalidStatus) as refused:
            connect(served.url + "denied", open_timeout=10)
        assert refused.value.response.status_code == 401
        with connect(served.url, open_timeout=10) as session:  # the server still serves
            session.send("after")
            assert session.recv(timeout=10) == "after"
    finally:
        logger.removeHandler(errors)
    assert [record.getMessage() for record in errors.buffer] == []
