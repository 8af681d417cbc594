"""Deadline middleware: past the deadline the handler is cancelled and the client gets 504."""

import asyncio
import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.middleware import Middleware
from starlette.types import Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.deadline import DeadlineExceeded, DeadlineMiddleware
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .asgi import call, http_scope, never_receive, never_send, ok_app
from .logcapture import JsonLines

TIMEOUT = 0.2


def sleepy_app(cancelled: list[bool]) -> FastAPI:
    app = FastAPI(
        middleware=[
            Middleware(RequestIdMiddleware),
            Middleware(DeadlineMiddleware, timeout_seconds=TIMEOUT),
        ]
    )

    @app.get("/sleep/{seconds}")
    async def sleep(seconds: float) -> dict[str, float]:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return {"slept": seconds}

    @app.get("/blocking")
    def blocking() -> dict[str, str]:
        time.sleep(TIMEOUT * 3)
        return {"done": "late"}

    return app


def test_a_slow_request_gets_a_json_504_with_the_request_id() -> None:
    """Past the deadline the client gets 504, in JSON, naming the request id it was given."""
    cancelled: list[bool] = []
    with TestClient(sleepy_app(cancelled)) as client:
        started = time.monotonic()
        response = client.get("/sleep/5")
        elapsed = time.monotonic() - started
    assert response.status_code == 504
    assert response.headers["content-type"] == "application/json"
    assert response.json()["request_id"] == response.headers["x-request-id"]
    assert "deadline" in response.json()["detail"]
    # The deadline fires within one tick (a tenth of the timeout) of its time.
    assert TIMEOUT <= elapsed < TIMEOUT * 2.5
    assert cancelled == [True]


def test_a_fast_request_is_untouched() -> None:
    """Requests within the deadline answer as usual, many in a row."""
    with TestClient(sleepy_app([])) as client:
        for _ in range(5):
            response = client.get("/sleep/0")
            assert response.status_code == 200
            assert response.json() == {"slept": 0}


def test_only_the_slow_request_of_concurrent_ones_times_out() -> None:
    """Each request has its own deadline; a slow neighbour does not cut a fast one short."""

    async def by_path(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(float(scope["path"].strip("/")))
        await ok_app(scope, receive, send)

    async def scenario() -> list[int]:
        app = DeadlineMiddleware(by_path, timeout_seconds=TIMEOUT)
        results = await asyncio.gather(
            call(app, http_scope("/5")), call(app, http_scope("/0.05")), call(app, http_scope("/0"))
        )
        return [sent[0]["status"] for sent in results]

    assert asyncio.run(scenario()) == [504, 200, 200]


def test_the_timeout_is_logged(json_lines: JsonLines) -> None:
    """The 504 leaves a warning with the request id, path and the deadline."""
    with TestClient(sleepy_app([])) as client:
        response = client.get("/sleep/5")
    [line] = [line for line in json_lines.lines if line["message"] == "request deadline exceeded"]
    assert line["level"] == "warning"
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["path"] == "/sleep/5"
    assert line["timeout_seconds"] == TIMEOUT
    assert line["response_started"] is False


def test_a_blocking_endpoint_still_answers_on_time() -> None:
    """A sync endpoint's thread cannot be stopped, but its client is answered at the deadline."""
    with TestClient(sleepy_app([])) as client:
        started = time.monotonic()
        response = client.get("/blocking")
        elapsed = time.monotonic() - started
    assert response.status_code == 504
    assert elapsed < TIMEOUT * 2.5


def test_a_started_response_is_aborted() -> None:
    """A response already under way cannot become a 504: the error reaches the server."""

    async def stalls_mid_body(_scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        await asyncio.sleep(5)

    app = DeadlineMiddleware(stalls_mid_body, timeout_seconds=TIMEOUT)
    with pytest.raises(DeadlineExceeded, match="after its response had started"):
        asyncio.run(call(app, http_scope()))


def test_someone_elses_cancellation_propagates() -> None:
    """A server shutting down cancels the task: that is not a timeout and is not answered."""
    sent: list[object] = []

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


def test_the_sweeper_stops_when_idle() -> None:
    """No timer keeps waking the loop once no request is in flight."""

    async def scenario() -> bool:
        app = DeadlineMiddleware(ok_app, timeout_seconds=TIMEOUT)
        await call(app, http_scope())
        await asyncio.sleep(app.tick * 3)
        assert app._sweeper is not None
        return app._sweeper.handle is None and not app._sweeper.inflight

    assert asyncio.run(scenario())


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_the_timeout_must_be_positive(timeout: float) -> None:
    """A deadline of zero would answer 504 to everything: refuse it at start."""
    with pytest.raises(ValueError, match="positive"):
        DeadlineMiddleware(ok_app, timeout_seconds=timeout)


def test_other_scopes_have_no_deadline() -> None:
    """Lifespan runs as long as the server does, so it is never cancelled."""

    async def long_lifespan(_scope: Scope, _receive: Receive, _send: Send) -> None:
        await asyncio.sleep(TIMEOUT * 2)

    app = DeadlineMiddleware(long_lifespan, timeout_seconds=TIMEOUT)
    asyncio.run(app({"type": "lifespan"}, never_receive, never_send))
