"""Deadline middleware: past the deadline the handler is cancelled and the client gets 504."""

import asyncio
import threading
import time

import pytest
from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.types import Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.middleware.deadline import (
    DeadlineExceeded,
    DeadlineMiddleware,
)
from {{ cookiecutter.package_name }}.middleware.request_id import RequestIdMiddleware

from .conftest import ClientFor, JsonLines, call, http_scope, ok_app

TIMEOUT = 0.2


@pytest.mark.parametrize("path", ["/sleep", "/blocking"])
def test_a_slow_request_gets_a_json_504_on_time(
    client_for: ClientFor, json_lines: JsonLines, path: str
) -> None:
    """A JSON 504 with the request id and a warning, before the handler is done: an async
    handler is cancelled, a blocking one answered for while its thread still runs."""
    deadline = Middleware(DeadlineMiddleware, timeout_seconds=TIMEOUT)
    app = FastAPI(middleware=[Middleware(RequestIdMiddleware), deadline])
    cancelled: list[bool] = []
    release = threading.Event()  # set once the 504 is in: no clock decides the order

    @app.get("/sleep")
    async def sleep() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    @app.get("/blocking")
    def blocking() -> None:
        release.wait(30)

    started = time.monotonic()
    response = client_for(app).get(path)
    release.set()
    assert time.monotonic() - started >= TIMEOUT  # not before the deadline (no upper bound)
    assert (response.status_code, response.headers["content-type"]) == (504, "application/json")
    assert response.json()["request_id"] == response.headers["x-request-id"]
    assert cancelled == ([True] if path == "/sleep" else [])
    [line] = [line for line in json_lines.lines if line["message"] == "request deadline exceeded"]
    assert (line["level"], line["path"], line["timeout_seconds"]) == ("warning", path, TIMEOUT)


def test_each_request_has_its_own_deadline_and_the_sweeper_then_sleeps() -> None:
    """Only the slow request times out; an idle sweeper sleeps; lifespan has no deadline."""

    async def by_path(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(float(scope["path"].strip("/")))
        if scope["type"] == "http":
            await ok_app(scope, receive, send)

    async def scenario() -> list[int]:
        app = DeadlineMiddleware(by_path, timeout_seconds=TIMEOUT)
        paths = ["/5", "/0.05", "/0", "/0"]
        results = await asyncio.gather(*(call(app, http_scope(path)) for path in paths))
        await asyncio.sleep(app.tick * 3)
        assert app._sweeper is not None
        assert app._sweeper.handle is None
        assert not app._sweeper.inflight
        assert await call(app, {**http_scope(f"/{TIMEOUT * 2}"), "type": "lifespan"}) == []
        return [sent[0]["status"] for sent in results]

    assert asyncio.run(scenario()) == [504, 200, 200, 200]
    with pytest.raises(ValueError, match="positive"):
        DeadlineMiddleware(ok_app, timeout_seconds=0)


def test_a_started_response_is_aborted_and_a_server_cancel_is_not_answered(
    json_lines: JsonLines,
) -> None:
    """A started response silent for the idle time is aborted with one warning, not a 504; a
    server's cancel is not answered."""

    async def stalls_mid_body(_scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(5)

    aborting = DeadlineMiddleware(stalls_mid_body, timeout_seconds=TIMEOUT)
    with pytest.raises(DeadlineExceeded, match="response stream cut, silent too long"):
        asyncio.run(call(aborting, http_scope()))
    [line] = [line for line in json_lines.lines if line["logger"].endswith("deadline")]
    assert (line["level"], line["message"]) == ("warning", "response stream cut: silent too long")
    assert line["stream_idle_seconds"] == TIMEOUT
    sent: list[Message] = []
    app = DeadlineMiddleware(stalls_mid_body, timeout_seconds=30)
    with pytest.raises(TimeoutError):  # wait_for cancels it, as a server's shutdown would
        asyncio.run(asyncio.wait_for(call(app, http_scope(), sent), 0.01))
    assert [message["type"] for message in sent] == ["http.response.start"]


def test_a_stream_outlives_the_deadline_while_it_sends_and_stops_at_its_longest() -> None:
    """A response sending a chunk each half-deadline runs past the deadline to its end;
    stream_max_seconds cuts it; wrong bounds are refused. The idle bound is long here: a busy
    machine's late chunk must not decide it (the test above proves that bound)."""

    async def chunks(_scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(6):
            await asyncio.sleep(TIMEOUT / 2)
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    streaming = DeadlineMiddleware(chunks, timeout_seconds=TIMEOUT, stream_idle_seconds=30)
    sent = asyncio.run(call(streaming, http_scope()))
    assert len(sent) == 8
    assert "more_body" not in sent[-1]
    capped = DeadlineMiddleware(
        chunks, timeout_seconds=TIMEOUT, stream_idle_seconds=30, stream_max_seconds=TIMEOUT * 2
    )
    with pytest.raises(DeadlineExceeded, match="cut, too long"):
        asyncio.run(call(capped, http_scope()))
    with pytest.raises(ValueError, match="stream_idle_seconds must be positive"):
        DeadlineMiddleware(ok_app, timeout_seconds=1, stream_idle_seconds=0)
    with pytest.raises(ValueError, match="stream_max_seconds must be positive"):
        DeadlineMiddleware(ok_app, timeout_seconds=1, stream_max_seconds=-1)
