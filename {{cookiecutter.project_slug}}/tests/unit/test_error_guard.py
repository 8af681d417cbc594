"""Error guard: an unhandled exception becomes a JSON 500 with the request id, and a log."""

import asyncio
import json

import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from starlette.middleware import Middleware
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.error_guard import ErrorGuardMiddleware
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .asgi import call, http_scope, never_receive, never_send
from .logcapture import JsonLines


def failing_app(*, debug: bool = False) -> FastAPI:
    app = FastAPI(
        middleware=[Middleware(RequestIdMiddleware), Middleware(ErrorGuardMiddleware, debug=debug)]
    )

    @app.get("/boom")
    async def boom() -> None:
        raise ValueError("secret internals")

    @app.get("/missing")
    async def missing() -> None:
        raise HTTPException(404, "nope")

    return app


def test_an_exception_becomes_a_json_500_with_the_request_id() -> None:
    """The body is JSON, names the request id, and the header carries the same id."""
    with TestClient(failing_app(), raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["detail"] == "Internal Server Error"
    assert body["request_id"] == response.headers["x-request-id"]


def test_the_body_holds_no_stack_trace() -> None:
    """Neither the traceback nor the exception's message reach the client."""
    with TestClient(failing_app(), raise_server_exceptions=False) as client:
        text = client.get("/boom").text
    assert "Traceback" not in text
    assert "secret internals" not in text
    assert set(json.loads(text)) == {"detail", "request_id"}


def test_the_traceback_is_logged_with_the_request_id(json_lines: JsonLines) -> None:
    """Operators find the traceback in the log under the id the client saw."""
    with TestClient(failing_app(), raise_server_exceptions=False) as client:
        response = client.get("/boom")
    [line] = [line for line in json_lines.lines if "exception" in line]
    assert line["level"] == "error"
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["path"] == "/boom"
    assert "ValueError: secret internals" in line["exception"]


def test_debug_puts_the_traceback_in_the_body() -> None:
    """With debug on (refused in production by settings) the body helps the developer."""
    with TestClient(failing_app(debug=True), raise_server_exceptions=False) as client:
        body = client.get("/boom").json()
    assert "ValueError: secret internals" in body["traceback"]


def test_http_exceptions_keep_their_status() -> None:
    """Exceptions FastAPI handles (404, 422) never reach the guard."""
    with TestClient(failing_app(), raise_server_exceptions=False) as client:
        response = client.get("/missing")
    assert response.status_code == 404
    assert response.json() == {"detail": "nope"}


def test_an_exception_after_the_response_started_is_re_raised() -> None:
    """Too late for a 500: the server must abort the connection, so the error propagates."""

    async def half_then_crash(_scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("mid-stream")

    with pytest.raises(RuntimeError, match="mid-stream"):
        asyncio.run(call(ErrorGuardMiddleware(half_then_crash), http_scope()))


def test_other_scopes_are_not_guarded() -> None:
    """A lifespan failure propagates: the server must see that start-up failed."""

    async def failing_lifespan(_scope: Scope, _receive: Receive, _send: Send) -> None:
        raise RuntimeError("cannot start")

    guard = ErrorGuardMiddleware(failing_lifespan)
    with pytest.raises(RuntimeError, match="cannot start"):
        asyncio.run(guard({"type": "lifespan"}, never_receive, never_send))


def test_a_handler_for_exception_itself_is_preempted() -> None:
    """Starlette runs ``Exception`` handlers outside all middleware: the guard answers first."""
    app = failing_app()

    async def never_used(_request: Request, _exc: Exception) -> JSONResponse:
        return JSONResponse({"handled": True}, status_code=418)

    app.add_exception_handler(Exception, never_used)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert "request_id" in response.json()
