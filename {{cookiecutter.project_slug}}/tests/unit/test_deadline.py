"""Deadline middleware: past the deadline the handler is cancelled and the client gets 504.

Needs the middleware and FastAPI only; real sleeps of a few tenths of a second.
"""

import asyncio
import time

import pytest
from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.types import Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.deadline import DeadlineExceeded, DeadlineMiddleware
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .asgi import ClientFor, call, http_scope, never_receive, never_send, ok_app
from .logcapture import JsonLines

TIMEOUT = 0.2


def sleepy_app(cancelled: list[bool]) -> FastAPI:
    deadline = Middleware(DeadlineMiddleware, timeout_seconds=TIMEOUT)
    app = FastAPI(middleware=[Middleware(RequestIdMiddleware), deadline])

    @app.get("/sleep")
    async def sleep() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    @app.get("/blocking")
    def blocking() -> None:
        time.sleep(TIMEOUT * 3)

    return app


@pytest.mark.parametrize("path", ["/sleep", "/blocking"])
def test_a_slow_request_gets_a_json_504_on_time(
    client_for: ClientFor, json_lines: JsonLines, path: str
) -> None:
    """Within one tick of the deadline: a JSON 504 naming the request id, a warning logged,
    an async handler cancelled (a sync one's thread runs on, but its client is answered)."""
    cancelled: list[bool] = []
    client = client_for(sleepy_app(cancelled))
    started = time.monotonic()
    response = client.get(path)
    assert TIMEOUT <= time.monotonic() - started < TIMEOUT * 2.5
    assert (response.status_code, response.headers["content-type"]) == (504, "application/json")
    assert response.json()["request_id"] == response.headers["x-request-id"]
    assert "deadline" in response.json()["detail"]
    assert cancelled == ([True] if path == "/sleep" else [])
    [line] = [line for line in json_lines.lines if line["message"] == "request deadline exceeded"]
    assert (line["level"], line["path"], line["timeout_seconds"]) == ("warning", path, TIMEOUT)
    assert line["request_id"] == response.headers["x-request-id"]


def test_each_request_has_its_own_deadline() -> None:
    """Of concurrent requests only the slow one times out; the fast ones answer as usual."""

    async def by_path(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(float(scope["path"].strip("/")))
        await ok_app(scope, receive, send)

    async def scenario() -> list[int]:
        app = DeadlineMiddleware(by_path, timeout_seconds=TIMEOUT)
        paths = ["/5", "/0.05", "/0", "/0"]
        results = await asyncio.gather(*(call(app, http_scope(path)) for path in paths))
        return [sent[0]["status"] for sent in results]

    assert asyncio.run(scenario()) == [504, 200, 200, 200]


def test_a_started_response_is_aborted() -> None:
    """A response already under way cannot become a 504: the error reaches the server."""

    async def stalls_mid_body(_scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        await asyncio.sleep(5)

    app = DeadlineMiddleware(stalls_mid_body, timeout_seconds=TIMEOUT)
    with pytest.raises(DeadlineExceeded, match="after its response had started"):
        asyncio.run(call(app, http_scope()))


def test_someone_elses_cancellation_propagates_unanswered() -> None:
    """A server shutting down cancels the task: that is no timeout, and nothing is sent."""
    sent: list[Message] = []

    async def forever(_scope: Scope, _receive: Receive, _send: Send) -> None:
        await asyncio.sleep(5)

    async def scenario() -> None:
        async def record(message: Message) -> None:
            sent.append(message)

        app = DeadlineMiddleware(forever, timeout_seconds=30)
        task = asyncio.ensure_future(app(http_scope(), never_receive, record))
        await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario())
    assert sent == []


def test_the_sweeper_stops_when_idle_and_lifespan_has_no_deadline() -> None:
    """No timer wakes the loop once no request is in flight; lifespan is never cancelled."""

    async def long_lifespan(_scope: Scope, _receive: Receive, _send: Send) -> None:
        await asyncio.sleep(TIMEOUT * 2)

    async def scenario() -> bool:
        app = DeadlineMiddleware(ok_app, timeout_seconds=TIMEOUT)
        await call(app, http_scope())
        await asyncio.sleep(app.tick * 3)
        assert app._sweeper is not None
        return app._sweeper.handle is None and not app._sweeper.inflight

    assert asyncio.run(scenario())
    lifespan = DeadlineMiddleware(long_lifespan, timeout_seconds=TIMEOUT)
    asyncio.run(lifespan({"type": "lifespan"}, never_receive, never_send))


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_the_timeout_must_be_positive(timeout: float) -> None:
    """A deadline of zero would answer 504 to everything: refused at start."""
    with pytest.raises(ValueError, match="positive"):
        DeadlineMiddleware(ok_app, timeout_seconds=timeout)
