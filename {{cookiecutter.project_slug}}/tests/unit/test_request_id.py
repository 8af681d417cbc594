"""Request id middleware: keep well-formed ids, replace the others, echo, expose to logs.

Needs nothing but the middleware: it runs on plain ASGI scopes (asgi.py).
"""

import asyncio
import re

import pytest
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.request_id import REQUEST_ID, RequestIdMiddleware

from .asgi import call, header, http_scope, never_receive, never_send, ok_app

NGINX_ID = re.compile(rb"[0-9a-f]{32}")


def answered_id(incoming: bytes | None) -> bytes | None:
    """The id the response carries when the request carried ``incoming`` (None: no header)."""
    headers = [] if incoming is None else [(b"x-request-id", incoming)]
    [start, _] = asyncio.run(call(RequestIdMiddleware(ok_app), http_scope(headers=headers)))
    assert [name for name, _ in start["headers"]].count(b"x-request-id") == 1
    return header(start, b"x-request-id")


@pytest.mark.parametrize(
    "incoming",
    [b"0123456789abcdef0123456789abcdef", b"3f2c7c1e-9c1a-4e8b-a1d2-7d1f1a2b3c4d", b"a.b_c-D"],
)
def test_a_well_formed_id_is_kept(incoming: bytes) -> None:
    """nginx's id, a UUID or a tracing id comes back unchanged, once."""
    assert answered_id(incoming) == incoming


@pytest.mark.parametrize(
    "incoming",
    [None, b"", b"a" * 129, b"has space", b'quote"', b"new\nline", b"caf\xc3\xa9", b"semi;colon"],
)
def test_a_missing_or_malformed_id_is_replaced_by_a_new_one(incoming: bytes | None) -> None:
    """Ids that could forge or bloat log lines give way to 32 hex characters, like nginx's."""
    value = answered_id(incoming)
    assert value is not None
    assert NGINX_ID.fullmatch(value)
    assert answered_id(incoming) != value


def test_the_endpoint_sees_the_id_and_it_is_reset_after() -> None:
    """Handlers (and their logs) read the id the response carries; nothing leaks after."""
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


def test_the_header_name_is_configurable() -> None:
    """Another header name (for example a tracing header) is read and written instead."""
    app = RequestIdMiddleware(ok_app, header="X-Correlation-ID")
    sent = asyncio.run(call(app, http_scope(headers=[(b"x-correlation-id", b"corr-1")])))
    assert header(sent[0], b"x-correlation-id") == b"corr-1"
    assert header(sent[0], b"x-request-id") is None


def test_other_scopes_pass_through_untouched() -> None:
    """Lifespan scopes reach the app as they came, without an id."""
    seen: list[tuple[str, str | None]] = []

    async def app(scope: Scope, _receive: Receive, _send: Send) -> None:
        seen.append((scope["type"], REQUEST_ID.get()))

    asyncio.run(RequestIdMiddleware(app)({"type": "lifespan"}, never_receive, never_send))
    assert seen == [("lifespan", None)]
