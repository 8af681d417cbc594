"""Access log middleware: one record per request, with the contract's fields.
Needs the middleware and logs.py's formatter (conftest.py's json_lines)."""

import asyncio
import json
import logging

import pytest
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.access_log import AccessLogMiddleware
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .conftest import JsonLines, call, header, http_scope, ok_app

LOGGER = "tests.access"


def test_one_line_per_request_with_the_contracts_fields(json_lines: JsonLines) -> None:
    """The contract's fields in order, no query string (tokens), the whole duration; INFO."""

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(0.05)
        await ok_app(scope, receive, send)

    app = RequestIdMiddleware(AccessLogMiddleware(slow, logger=LOGGER))
    sent = asyncio.run(call(app, {**http_scope("/items/7"), "query_string": b"token=s3cret"}))
    [line] = json_lines.from_logger(LOGGER)
    assert list(line)[3:] == [
        "message",
        "request_id",
        "method",
        "path",
        "status",
        "duration_ms",
        "client",
{%- if cookiecutter.auth == "oidc" %}
        "subject",  # a verified token's sub; None here: nothing verified one (test_auth.py)
{%- endif %}
    ]
    assert (line["level"], line["client"]) == ("info", "203.0.113.7")
    assert line["message"] == "GET /items/7 200"
    assert str(line["request_id"]).encode() == header(sent[0], b"x-request-id")
    assert 50 <= line["duration_ms"] < 5000
    assert "s3cret" not in json.dumps(line)
    logging.getLogger(LOGGER).setLevel(logging.WARNING)
    asyncio.run(call(app, http_scope()))
    logging.getLogger(LOGGER).setLevel(logging.NOTSET)
    assert len(json_lines.from_logger(LOGGER)) == 1


def test_a_crash_is_logged_as_500_and_a_socket_client_as_null(json_lines: JsonLines) -> None:
    """The line is written when the exception escapes; over a unix socket client is None."""

    async def crash(_scope: Scope, _receive: Receive, _send: Send) -> None:
        raise RuntimeError("boom")

    over_a_socket = {**http_scope(), "client": None}
    with pytest.raises(RuntimeError):
        asyncio.run(call(AccessLogMiddleware(crash, logger=LOGGER), over_a_socket))
    [line] = json_lines.from_logger(LOGGER)
    assert (line["status"], line["client"]) == (500, None)
