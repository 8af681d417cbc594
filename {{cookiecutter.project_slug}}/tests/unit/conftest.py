{% if cookiecutter.layout == "serving-only" -%}
"""Unit-test fixtures and helpers: the root logger restored after each test, JSON log capture,
middleware called as plain ASGI. No network and no server: apps run in process."""
{%- else -%}
"""Unit-test fixtures and helpers: each test without the shell's ``<PACKAGE>_*`` and ``OTEL_*``
variables (and in an empty directory: tests/conftest.py), its root logger restored after; JSON
log capture; the app and its clients, middleware called as plain ASGI. No network, no server."""
{%- endif %}

import json
import logging
{%- if cookiecutter.layout == "service" %}
import os
{%- endif %}
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
{%- if cookiecutter.layout == "service" %}
from fastapi import FastAPI
{%- endif %}
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.logs import JsonFormatter
{%- if cookiecutter.layout == "service" %}
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings
{%- endif %}
{%- if cookiecutter.auth == "oidc" %}

from token_issuer import AUDIENCE, ISSUER, SHARED, bearer, trusting
{%- endif %}

# tests/conftest.py's fixture: client_for(app) starts a client of app for this test.
ClientFor = Callable[[ASGIApp], TestClient]


def http_scope(path: str = "/", *, headers: list[tuple[bytes, bytes]] | None = None) -> Scope:
    """A GET scope as uvicorn builds it, from a TCP client."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers or [],
        "client": ("203.0.113.7", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def call(
    app: ASGIApp, scope: Scope, sent: list[Message] | None = None, *, inbox: Iterable[Message] = ()
) -> list[Message]:
    """Run ``app`` on ``scope`` (it receives ``inbox``, then empty bodies); what it sent."""
    sent = [] if sent is None else sent
    messages = iter(inbox)

    async def receive() -> Message:
        return next(messages, {"type": "http.request", "body": b"", "more_body": False})

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def ok_app(_scope: Scope, _receive: Receive, send: Send) -> None:
    """A tiny endpoint: 200 with a JSON body."""
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


def header(message: Message, name: bytes) -> bytes | None:
    """The value of header ``name`` in a response-start message, or None."""
    return next((value for key, value in message.get("headers", []) if key == name), None)


class JsonLines(logging.Handler):
    """Formats each record with the JSON formatter as it is emitted, inside the request."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))

    def from_logger(self, name: str) -> list[dict[str, Any]]:
        """The lines one logger wrote."""
        return [line for line in self.lines if line["logger"] == name]

{%- if cookiecutter.layout == "service" %}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        # OTEL_*: an exporter endpoint in the shell would make every test app export spans.
        if name.upper().startswith((ENV_PREFIX, "OTEL_")):
            monkeypatch.delenv(name)
{%- if cookiecutter.auth == "oidc" %}
    # Production refuses to start without them: the in-process issuer's (token_issuer.py).
    monkeypatch.setenv(f"{ENV_PREFIX}AUTH_ISSUER", ISSUER)
    monkeypatch.setenv(f"{ENV_PREFIX}AUTH_AUDIENCE", AUDIENCE)
{%- endif %}
{%- endif %}


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


{%- if cookiecutter.layout == "service" %}


# A route a test adds to the app goes under /_tests/: a route the app has at the same path (a
# team's /ws, say) came first and would answer instead (test_main.py checks it cannot).
@pytest.fixture
def app() -> FastAPI:
{%- if cookiecutter.auth == "oidc" %}
    """The application as production builds it, from default settings, trusting the tests'
    issuer (token_issuer.py)."""
    return trusting(create_app(Settings()))


@pytest.fixture
def client(app: FastAPI, client_for: ClientFor) -> TestClient:
    """A running client of ``app``, sending a token with the scope items:write."""
    client = client_for(app)
    client.headers.update(bearer(SHARED.token()))
    return client
{%- else %}
    """The application as production builds it, from default settings."""
    return create_app(Settings())


@pytest.fixture
def client(app: FastAPI, client_for: ClientFor) -> TestClient:
    """A running client of ``app``."""
    return client_for(app)
{%- endif %}
{%- endif %}


@pytest.fixture
def json_lines() -> JsonLines:
    """Every record from now on, as the JSON the service would write (request id included);
    _restore_logging removes the handler after the test."""
    handler = JsonLines()
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    return handler
