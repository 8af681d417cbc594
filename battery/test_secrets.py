"""No token reaches any line (issue 50, item 3): a query parameter that carries a secret is
redacted wherever a request line or path is logged, by every process of the stack: nginx's
error lines (a 413's request line, a Referer), uvicorn's access line (on here) and its
WebSocket line. The app: the service's, plus /ws (apps/streams_app.py)."""

from __future__ import annotations

import socket
import uuid
from typing import TYPE_CHECKING

import pytest

from harness.clients import get

from .conftest import wait_for_line
from .test_websockets import HANDSHAKE, KEY, STREAMS_APP, handshake

if TYPE_CHECKING:
    from .conftest import Stacks

pytestmark = pytest.mark.live

SECRET = f"SECRET{uuid.uuid4().hex}"


def too_large(port: int, target: str) -> bytes:
    """POST a body over the 1 MiB limit (its head, then a first part); nginx's answer's head."""
    with socket.create_connection(("127.0.0.1", port), 10) as client:
        head = (
            f"POST {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Referer: https://example.com/callback?code={SECRET}&state=1\r\n"
            f"Content-Length: {2 << 20}\r\n\r\n"
        )
        client.sendall(head.encode("ascii") + b"x" * 65536)
        return client.recv(4096).partition(b"\r\n")[0]


def test_no_line_of_any_process_carries_a_secret_parameter(stacks: Stacks) -> None:
    """A 413, a 404, a WebSocket handshake and uvicorn's access lines carry secret query
    parameters: no line of the stack's whole output contains one."""
    stack = stacks.start(STREAMS_APP, GUNICORN_CMD_ARGS="--access-logfile=-")
    assert b" 413 " in too_large(stack.port, f"/items?access_token={SECRET}&page=2")
    assert b" 413 " in too_large(stack.port, f"/items?ACCESS%5FTOKEN={SECRET}")
    assert get(stack.port, f"/nope?token={SECRET}&id_token={SECRET}")[0] == 404
    key = f"Sec-WebSocket-Key: {KEY}"
    client, answer = handshake(stack.port, f"/ws?a=1&access_token={SECRET}", *HANDSHAKE, key)
    client.close()
    assert answer.startswith(b"HTTP/1.1 101 ")
    # Each request was logged (its line names the route) before the whole output is read.
    for needle in ("client intended to send too large body", "WebSocket /ws", "/nope?"):
        wait_for_line(stack, lambda line, n=needle: n in str(line), f"a line with {needle}")

    text = stack.log_text()
    assert [line for line in text.splitlines() if SECRET in line] == []
    assert text.count("REDACTED") >= 5
