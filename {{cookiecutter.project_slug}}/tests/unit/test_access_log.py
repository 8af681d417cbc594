"""Access log middleware: one record per request, with the contract's fields."""

import asyncio
import json
import logging
import os

import pytest
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.logs import JsonFormatter
from {{ cookiecutter.package_name }}.middleware.access_log import AccessLogMiddleware
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .asgi import call, header, http_scope, never_receive, never_send, ok_app

LOGGER = "tests.access"


def access_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_one_record_per_request_with_every_field(caplog: pytest.LogCaptureFixture) -> None:
    """method, path, status, duration_ms, request_id and client are on the record."""
    caplog.set_level(logging.INFO)
    app = RequestIdMiddleware(AccessLogMiddleware(ok_app, logger=LOGGER))
    sent = asyncio.run(call(app, http_scope("/items/7", method="POST")))
    [record] = access_records(caplog)
    fields = vars(record)
    assert record.getMessage() == "POST /items/7 200"
    assert fields["method"] == "POST"
    assert fields["path"] == "/items/7"
    assert fields["status"] == 200
    assert isinstance(fields["duration_ms"], float)
    assert fields["duration_ms"] >= 0
    assert fields["request_id"].encode() == header(sent[0], b"x-request-id")
    assert fields["client"] == "203.0.113.7"


def test_the_json_line_follows_the_contract(caplog: pytest.LogCaptureFixture) -> None:
    """Rendered as JSON, the fields follow the common keys in the contract's order."""
    caplog.set_level(logging.INFO)
    app = RequestIdMiddleware(AccessLogMiddleware(ok_app, logger=LOGGER))
    asyncio.run(call(app, http_scope()))
    [record] = access_records(caplog)
    line = json.loads(JsonFormatter().format(record))
    assert list(line) == [
        "time",
        "level",
        "logger",
        "message",
        "request_id",
        "method",
        "path",
        "status",
        "duration_ms",
        "client",
    ]


def test_the_query_string_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Tokens in query strings stay out of the logs."""
    caplog.set_level(logging.INFO)
    app = AccessLogMiddleware(ok_app, logger=LOGGER)
    asyncio.run(call(app, http_scope("/search", query_string=b"token=s3cret")))
    [record] = access_records(caplog)
    assert vars(record)["path"] == "/search"
    assert "s3cret" not in JsonFormatter().format(record)


def test_a_unix_socket_client_is_null(caplog: pytest.LogCaptureFixture) -> None:
    """Over a unix socket uvicorn has no client address: the field is None, not a crash."""
    caplog.set_level(logging.INFO)
    asyncio.run(call(AccessLogMiddleware(ok_app, logger=LOGGER), http_scope(client=None)))
    [record] = access_records(caplog)
    assert vars(record)["client"] is None


def test_a_crash_before_the_response_is_logged_as_500(caplog: pytest.LogCaptureFixture) -> None:
    """The line is written even when the exception escapes, with status 500."""
    caplog.set_level(logging.INFO)

    async def crash(_scope: Scope, _receive: Receive, _send: Send) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        asyncio.run(call(AccessLogMiddleware(crash, logger=LOGGER), http_scope()))
    [record] = access_records(caplog)
    assert vars(record)["status"] == 500


def test_the_duration_covers_the_whole_request(caplog: pytest.LogCaptureFixture) -> None:
    """duration_ms measures from the request's start to the end of the response."""
    caplog.set_level(logging.INFO)

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(0.05)
        await ok_app(scope, receive, send)

    asyncio.run(call(AccessLogMiddleware(slow, logger=LOGGER), http_scope()))
    [record] = access_records(caplog)
    assert vars(record)["duration_ms"] >= 50


def test_nothing_is_logged_above_info(caplog: pytest.LogCaptureFixture) -> None:
    """With the access logger at WARNING, requests cost no record at all."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    asyncio.run(call(AccessLogMiddleware(ok_app, logger=LOGGER), http_scope()))
    assert access_records(caplog) == []


def test_records_carry_the_current_time(caplog: pytest.LogCaptureFixture) -> None:
    """The per-process template never freezes the time of a record."""
    caplog.set_level(logging.INFO)
    app = AccessLogMiddleware(ok_app, logger=LOGGER)
    asyncio.run(call(app, http_scope()))
    asyncio.run(call(app, http_scope()))
    first, second = access_records(caplog)
    assert second.created >= first.created
    assert 0 <= second.msecs < 1000
    assert second.process == first.process == os.getpid()


def test_other_scopes_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Lifespan events pass through without an access line."""
    caplog.set_level(logging.INFO)
    calls: list[str] = []

    async def app(scope: Scope, _receive: Receive, _send: Send) -> None:
        calls.append(scope["type"])

    middleware = AccessLogMiddleware(app, logger=LOGGER)
    asyncio.run(middleware({"type": "lifespan"}, never_receive, never_send))
    assert calls == ["lifespan"]
    assert access_records(caplog) == []
