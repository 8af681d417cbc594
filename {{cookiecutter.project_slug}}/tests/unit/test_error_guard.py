"""Error guard: an unhandled exception becomes a JSON 500 with the request id, and a log.
Needs the middleware and FastAPI only: a small app of its own, run by TestClient."""

import asyncio

import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.middleware import Middleware
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.error_guard import ErrorGuardMiddleware
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .conftest import ClientFor, JsonLines, call, http_scope


def failing_app(*, debug: bool = False) -> FastAPI:
    middleware = [Middleware(RequestIdMiddleware), Middleware(ErrorGuardMiddleware, debug=debug)]
    app = FastAPI(middleware=middleware)

    @app.get("/boom")
    async def boom() -> None:
        raise ValueError("secret internals")

    @app.get("/missing")
    async def missing() -> None:
        raise HTTPException(404, "nope")

    async def never_used(_request: Request, _exc: Exception) -> JSONResponse:
        return JSONResponse({"handled": True}, status_code=418)

    # Starlette runs Exception handlers outside all middleware: the guard must answer first.
    app.add_exception_handler(Exception, never_used)
    return app


def test_an_exception_is_a_json_500_with_the_id_and_a_logged_traceback(
    client_for: ClientFor, json_lines: JsonLines
) -> None:
    """Only the request id in the body, the traceback in the log (and with debug, the body)."""
    client = client_for(failing_app())
    response = client.get("/boom")
    assert (response.status_code, response.headers["content-type"]) == (500, "application/json")
    request_id = response.headers["x-request-id"]
    assert response.json() == {"detail": "Internal Server Error", "request_id": request_id}
    [line] = [line for line in json_lines.lines if "exception" in line]
    assert (line["level"], line["request_id"], line["path"]) == ("error", request_id, "/boom")
    assert "ValueError: secret internals" in line["exception"]
    assert client.get("/missing").json() == {"detail": "nope"}
    debug_body = client_for(failing_app(debug=True)).get("/boom").json()
    assert "ValueError: secret internals" in debug_body["traceback"]


def test_too_late_for_a_500_the_error_propagates() -> None:
    """A started response must be aborted, a failed lifespan stop the start: no 500 for them."""

    async def half_then_crash(scope: Scope, _receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("too late")

    guard = ErrorGuardMiddleware(half_then_crash)
    for scope in (http_scope(), {**http_scope(), "type": "lifespan"}):
        with pytest.raises(RuntimeError, match="too late"):
            asyncio.run(call(guard, scope))
