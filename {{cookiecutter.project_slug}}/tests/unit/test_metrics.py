"""Metrics middleware: each request observed once, under its route template, method and status
(across forked workers: stack/tests/test_metrics_files.py)."""

import asyncio

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from starlette.types import Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.middleware.metrics import (
    MetricsMiddleware,
    RequestMetrics,
    buckets_for,
)
from {{ cookiecutter.package_name }}.settings import Settings

from .conftest import call, http_scope, ok_app

COUNT = "http_server_request_duration_seconds_count"


def counts(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    """The request counts by (method, route, status)."""
    return {
        (sample.labels["method"], sample.labels["route"], sample.labels["status"]): sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == COUNT
    }


def test_labels_are_bounded_and_name_what_the_client_got(app: FastAPI, client: TestClient) -> None:
    """Route templates, one "unmatched" for any path, _OTHER for invented methods; as sent."""

    async def boom() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/_tests/boom", boom)
    for target in [
        "/items/900000001",
        "/items/900000002",
        "/items/!!",
        "/_tests/boom",
        "/" + "x" * 9000,
    ]:
        client.get(target)

    async def unmatched() -> None:  # in one event loop: the client's thread hops take seconds
        await asyncio.gather(*(call(app, http_scope(f"/random/{n}")) for n in range(300)))

    asyncio.run(unmatched())
    for method in ("FROB", "X" * 300, "PATCH"):
        client.request(method, "/livez")
    assert counts(app.state.metrics.registry) == {
        ("GET", "/items/{item_id}", "404"): 2,
        ("GET", "/items/{item_id}", "422"): 1,
        ("GET", "/_tests/boom", "500"): 1,
        ("GET", "unmatched", "404"): 301,
        ("_OTHER", "/livez", "405"): 2,
        ("PATCH", "/livez", "405"): 1,
    }


def test_the_deadline_setting_is_the_last_bucket_and_metrics_can_be_turned_off() -> None:
    """Buckets climb to the request deadline and stop there; REQUEST_TIMEOUT_SECONDS sets it.
    <PREFIX>_METRICS=false leaves the middleware out of the stack."""
    assert buckets_for(30.0)[-3:] == (10.0, 25.0, 30.0)
    assert buckets_for(0.5) == (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)
    assert (buckets_for(0.001), buckets_for(1000.0)[-2:]) == ((0.001,), (120.0, 1000.0))
    app = create_app(Settings(request_timeout_seconds=2.5))
    with TestClient(app) as client:
        client.get("/livez")
    registry = app.state.metrics.registry
    bounds = {s.labels["le"] for m in registry.collect() for s in m.samples if "le" in s.labels}
    assert max(float(bound) for bound in bounds - {"+Inf"}) == 2.5
    off: list[object] = [layer.cls for layer in create_app(Settings(metrics=False)).user_middleware]
    assert MetricsMiddleware not in off


def test_in_flight_rises_and_falls_and_other_scopes_pass_uncounted() -> None:
    """The gauge is 1 inside, 0 after (a raise is the server's 500); lifespan is not observed."""
    metrics = RequestMetrics(deadline_seconds=30.0)
    seen: list[object] = []

    async def inside(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(metrics.registry.get_sample_value("http_server_active_requests"))
        if scope["type"] == "lifespan":
            return
        if scope["path"] == "/raise":
            raise RuntimeError("boom")
        await ok_app(scope, receive, send)

    app = MetricsMiddleware(inside, metrics=metrics)
    asyncio.run(call(app, http_scope("/")))
    with pytest.raises(RuntimeError):
        asyncio.run(call(app, http_scope("/raise")))
    asyncio.run(call(app, {"type": "lifespan"}))
    assert seen == [1.0, 1.0, 0.0]
    assert counts(metrics.registry) == {
        ("GET", "unmatched", "200"): 1,
        ("GET", "unmatched", "500"): 1,
    }


def test_websocket_sessions_are_counted_open_and_by_close_code() -> None:
    """Open from its accept to its end, then counted once under its closing code (unregistered:
    "other"); one refused before its accept is neither."""
    metrics = RequestMetrics(deadline_seconds=30.0)
    open_inside: list[float | None] = []

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    async def session(scope: Scope, receive: Receive, send: Send) -> None:
        code = int(scope["path"].strip("/"))
        await receive()  # websocket.connect
        if code == 403:  # refused: closed before the accept
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "websocket.accept"})
        open_inside.append(value("websocket_sessions_open"))
        if code == 0:  # the client leaves
            await receive()
        else:
            await send({"type": "websocket.close", "code": code})

    app = MetricsMiddleware(session, metrics=metrics)
    connect: Message = {"type": "websocket.connect"}
    leave: Message = {"type": "websocket.disconnect", "code": 1001}
    for path in ("/1000", "/4001", "/0", "/403"):
        asyncio.run(call(app, {"type": "websocket", "path": path}, inbox=[connect, leave]))

    assert open_inside == [1.0, 1.0, 1.0]
    assert value("websocket_sessions_open") == 0.0
    counted = {
        code: value("websocket_session_duration_seconds_count", code=code)
        for code in ("1000", "other", "1001", "1008")
    }
    assert counted == {"1000": 1.0, "other": 1.0, "1001": 1.0, "1008": None}


def test_websocket_messages_and_their_bytes_are_counted_each_way() -> None:
    """Each message received and sent counts once, with its payload's bytes (text as UTF-8)."""
    metrics = RequestMetrics(deadline_seconds=30.0)

    async def echo(_scope: Scope, receive: Receive, send: Send) -> None:
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while (message := await receive())["type"] == "websocket.receive":
            await send({**message, "type": "websocket.send"})

    inbox: list[Message] = [
        {"type": "websocket.connect"},
        {"type": "websocket.receive", "text": "h\u00e9"},  # 3 bytes in UTF-8
        {"type": "websocket.receive", "bytes": bytes(5)},
        {"type": "websocket.disconnect", "code": 1000},
    ]
    asyncio.run(call(MetricsMiddleware(echo, metrics=metrics), {"type": "websocket"}, inbox=inbox))

    sample = metrics.registry.get_sample_value
    for direction in ("received", "sent"):
        labels = {"direction": direction}
        assert sample("websocket_messages_total", labels) == 2.0
        assert sample("websocket_message_bytes_total", labels) == 8.0
