"""Request id middleware: accept well-formed ids, make the others, echo, expose to logs."""

import asyncio
import re

import pytest
from starlette.types import Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.request_id import (
    REQUEST_ID,
    RequestIdMiddleware,
    new_request_id,
)

from .asgi import call, header, http_scope, never_receive, never_send, ok_app

NGINX_ID = re.compile(rb"[0-9a-f]{32}")


def run(scope: Scope) -> list[Message]:
    return asyncio.run(call(RequestIdMiddleware(ok_app), scope))


def test_new_ids_look_like_nginx_ids() -> None:
    """Generated ids are 32 hex characters, like nginx's ``$request_id``, and differ."""
    first, second = new_request_id(), new_request_id()
    assert NGINX_ID.fullmatch(first.encode())
    assert first != second


def test_a_missing_id_is_generated_and_echoed() -> None:
    """Without an incoming id, the response carries a fresh one."""
    start = run(http_scope())[0]
    value = header(start, b"x-request-id")
    assert value is not None
    assert NGINX_ID.fullmatch(value)


@pytest.mark.parametrize(
    "incoming",
    [b"0123456789abcdef0123456789abcdef", b"3f2c7c1e-9c1a-4e8b-a1d2-7d1f1a2b3c4d", b"a.b_c-D"],
)
def test_a_well_formed_id_is_kept(incoming: bytes) -> None:
    """nginx's id, a UUID or a tracing id comes back unchanged."""
    start = run(http_scope(headers=[(b"x-request-id", incoming)]))[0]
    assert header(start, b"x-request-id") == incoming


@pytest.mark.parametrize(
    "incoming",
    [b"", b"a" * 129, b"has space", b'quote"', b"new\nline", b"caf\xc3\xa9", b"semi;colon"],
)
def test_a_malformed_id_is_replaced(incoming: bytes) -> None:
    """Ids that could forge or bloat log lines are replaced by a generated one."""
    start = run(http_scope(headers=[(b"x-request-id", incoming)]))[0]
    value = header(start, b"x-request-id")
    assert value != incoming
    assert value is not None
    assert NGINX_ID.fullmatch(value)


def test_the_response_carries_exactly_one_id() -> None:
    """The header is added once, alongside the endpoint's own headers."""
    start = run(http_scope())[0]
    names = [name for name, _ in start["headers"]]
    assert names.count(b"x-request-id") == 1
    assert b"content-type" in names


def test_the_endpoint_sees_the_id_in_the_context_variable() -> None:
    """Handlers (and their log lines) read the same id the response carries."""
    seen: list[str | None] = []

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(REQUEST_ID.get())
        await ok_app(scope, receive, send)

    sent = asyncio.run(call(RequestIdMiddleware(endpoint), http_scope()))
    assert seen[0] is not None
    assert header(sent[0], b"x-request-id") == seen[0].encode()


def test_the_context_variable_is_reset_after_the_request() -> None:
    """No id leaks into whatever the task does after the request."""

    async def scenario() -> str | None:
        await call(RequestIdMiddleware(ok_app), http_scope())
        return REQUEST_ID.get()

    assert asyncio.run(scenario()) is None


def test_the_header_name_is_configurable() -> None:
    """Another header name (for example a tracing header) is read and written instead."""
    app = RequestIdMiddleware(ok_app, header="X-Correlation-ID")
    sent = asyncio.run(call(app, http_scope(headers=[(b"x-correlation-id", b"corr-1")])))
    assert header(sent[0], b"x-correlation-id") == b"corr-1"
    assert header(sent[0], b"x-request-id") is None


def test_other_scopes_pass_through_untouched() -> None:
    """Lifespan and websocket scopes reach the app as they came, without an id."""
    seen: list[tuple[str, str | None]] = []

    async def app(scope: Scope, _receive: Receive, _send: Send) -> None:
        seen.append((scope["type"], REQUEST_ID.get()))

    asyncio.run(RequestIdMiddleware(app)({"type": "lifespan"}, never_receive, never_send))
    assert seen == [("lifespan", None)]
