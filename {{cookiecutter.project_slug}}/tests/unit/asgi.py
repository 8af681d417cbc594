"""Plain ASGI helpers: call a middleware directly, without a server or a test client."""

from collections.abc import Callable, Iterable

from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The conftest.py fixture's type: client_for(app) starts a client of app for this test.
ClientFor = Callable[[ASGIApp], TestClient]


def http_scope(
    path: str = "/",
    *,
    method: str = "GET",
    headers: Iterable[tuple[bytes, bytes]] = (),
    query_string: bytes = b"",
    client: tuple[str, int] | None = ("203.0.113.7", 50000),
) -> Scope:
    """An HTTP scope as uvicorn builds it."""
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query_string,
        "root_path": "", "headers": list(headers), "client": client,
        "server": ("127.0.0.1", 8000), "state": {},
    }  # fmt: skip


async def call(app: ASGIApp, scope: Scope) -> list[Message]:
    """Run ``app`` on ``scope`` with an empty body and return what it sent."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def ok_app(_scope: Scope, _receive: Receive, send: Send) -> None:
    """A tiny endpoint: 200 with a JSON body."""
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


async def never_receive() -> Message:
    """A receive channel for scopes that must not read one."""
    raise AssertionError("receive() was called")


async def never_send(message: Message) -> None:
    """A send channel for scopes that must not answer."""
    raise AssertionError(f"send() was called with {message!r}")


def header(message: Message, name: bytes) -> bytes | None:
    """The value of header ``name`` in a response-start message, or None."""
    return next((value for key, value in message.get("headers", []) if key == name), None)
