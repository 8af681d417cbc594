"""Request id middleware: keep well-formed ids, replace the others, echo, expose to logs."""

import asyncio
import re

import pytest
from starlette.types import Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.context import REQUEST_ID
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .conftest import call, header, http_scope, ok_app


@pytest.mark.parametrize("kind", ["http", "websocket"])
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
    kind: str, incoming: bytes | None, *, kept: bool
) -> None:
    """A sane id comes back once, unchanged, on the answer (a WebSocket session's: on its
    accept, beside the app's own headers); a missing or log-forging one becomes 32 hex. The
    handler reads the id it carries, reset after."""
    seen: list[str | None] = []

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(REQUEST_ID.get())
        if kind == "http":
            await ok_app(scope, receive, send)
        else:
            await send({"type": "websocket.accept", "headers": [(b"x-other", b"1")]})
            await send({"type": "websocket.close", "code": 1000})

    headers = [] if incoming is None else [(b"x-request-id", incoming)]
    scope = {**http_scope(headers=headers), "type": kind}

    async def scenario() -> list[Message]:
        sent = await call(RequestIdMiddleware(endpoint), scope)
        seen.append(REQUEST_ID.get())  # reset once the request is done
        return sent

    [start, end] = asyncio.run(scenario())
    [value] = [v for k, v in start["headers"] if k == b"x-request-id"]  # exactly one
    assert value == incoming if kept else re.fullmatch(rb"[0-9a-f]{32}", value)
    assert seen == [value.decode(), None]
    if kind == "websocket":
        assert (header(start, b"x-other"), end) == (b"1", {"type": "websocket.close", "code": 1000})


def test_another_header_name_works_too_and_lifespan_gets_no_id() -> None:
    """X-Correlation-ID in, X-Correlation-ID out (no X-Request-ID); lifespan passes untouched."""
    app = RequestIdMiddleware(ok_app, header="X-Correlation-ID")
    sent = asyncio.run(call(app, http_scope(headers=[(b"x-correlation-id", b"corr-1")])))
    assert header(sent[0], b"x-correlation-id") == b"corr-1"
    assert header(sent[0], b"x-request-id") is None
    seen: list[str | None] = []

    async def lifespan(_scope: Scope, _receive: Receive, _send: Send) -> None:
        seen.append(REQUEST_ID.get())

    assert asyncio.run(call(RequestIdMiddleware(lifespan), {"type": "lifespan"})) == []
    assert seen == [None]
