"""Request id middleware: keep well-formed ids, replace the others, echo, expose to logs."""

import asyncio
import re

import pytest
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.context import REQUEST_ID
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .conftest import call, header, http_scope, ok_app


@pytest.mark.parametrize(
    ("incoming", "kept"),
    [
        (b"0123456789abcdef0123456789abcdef", True),
        (b"3f2c7c1e-9c1a-4e8b-a1d2-7d1f1a2b3c4d", True),
        (b"a.b_c-D", True),
        (None, False),
        (b"", False),
        (b"a" * 129, False),
        (b"has space", False),
        (b'quote"', False),
        (b"new\nline", False),
        (b"caf\xc3\xa9", False),
        (b"semi;colon", False),
    ],
)
def test_well_formed_ids_are_kept_and_others_replaced(
    incoming: bytes | None, *, kept: bool
) -> None:
    """A sane id comes back once, unchanged; a missing or log-forging one becomes 32 hex."""
    headers = [] if incoming is None else [(b"x-request-id", incoming)]
    [start, _] = asyncio.run(call(RequestIdMiddleware(ok_app), http_scope(headers=headers)))
    [value] = [v for k, v in start["headers"] if k == b"x-request-id"]  # exactly one
    assert value == incoming if kept else re.fullmatch(rb"[0-9a-f]{32}", value)


def test_the_endpoint_sees_the_id_and_nothing_leaks_after() -> None:
    """Handlers read the id the response carries, reset after; another header name works too."""
    seen: list[str | None] = []

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(REQUEST_ID.get())
        await ok_app(scope, receive, send)

    async def scenario() -> bytes | None:
        sent = await call(RequestIdMiddleware(endpoint), http_scope())
        seen.append(REQUEST_ID.get())
        return header(sent[0], b"x-request-id")

    value = asyncio.run(scenario())
    assert seen[0] is not None
    assert (seen[0].encode(), seen[1]) == (value, None)
    app = RequestIdMiddleware(ok_app, header="X-Correlation-ID")
    sent = asyncio.run(call(app, http_scope(headers=[(b"x-correlation-id", b"corr-1")])))
    assert header(sent[0], b"x-correlation-id") == b"corr-1"
    assert header(sent[0], b"x-request-id") is None


@pytest.mark.parametrize(
    ("incoming", "kept"), [(b"3f2c7c1e-9c1a-4e8b", True), (None, False), (b"new\nline", False)]
)
def test_a_websocket_session_gets_the_id_in_its_logs_and_on_its_accept(
    incoming: bytes | None, *, kept: bool
) -> None:
    """A handshake's id (or a fresh one) is the session's and comes back on the accept;
    lifespan passes through untouched."""
    seen: list[str | None] = []

    async def session(scope: Scope, _receive: Receive, send: Send) -> None:
        seen.append(REQUEST_ID.get())
        if scope["type"] == "websocket":
            await send({"type": "websocket.accept", "headers": [(b"x-other", b"1")]})
            await send({"type": "websocket.close", "code": 1000})

    headers = [] if incoming is None else [(b"x-request-id", incoming)]
    scope = {"type": "websocket", "path": "/ws", "headers": headers}
    sent = asyncio.run(call(RequestIdMiddleware(session), scope))
    assert asyncio.run(call(RequestIdMiddleware(session), {"type": "lifespan"})) == []

    accept_headers = dict(sent[0]["headers"])
    assert accept_headers[b"x-other"] == b"1"
    echoed = accept_headers[b"x-request-id"]
    assert echoed == incoming if kept else re.fullmatch(rb"[0-9a-f]{32}", echoed)
    assert seen == [echoed.decode(), None]
    assert sent[1] == {"type": "websocket.close", "code": 1000}
