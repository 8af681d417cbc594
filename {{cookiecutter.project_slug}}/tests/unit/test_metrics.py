"""Metrics middleware: each request observed once, under its route template, method and status."""

import asyncio
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.middleware.metrics import (
    MetricsMiddleware,
    RequestMetrics,
    buckets_for,
)
from {{ cookiecutter.package_name }}.settings import Settings

from .asgi import call, http_scope, ok_app

COUNT = "http_server_request_duration_seconds_count"


def count(app: FastAPI, **labels: str) -> float:
    """How many requests the app's histogram holds under these labels (0 when none)."""
    metrics: RequestMetrics = app.state.metrics
    return metrics.registry.get_sample_value(COUNT, labels) or 0.0


def series(app: FastAPI) -> list[dict[str, str]]:
    """The label sets of the request histogram's count samples."""
    metrics: RequestMetrics = app.state.metrics
    return [
        sample.labels
        for metric in metrics.registry.collect()
        for sample in metric.samples
        if sample.name == COUNT
    ]


def middleware_classes(app: FastAPI) -> list[object]:
    return [middleware.cls for middleware in app.user_middleware]


def test_route_template_not_raw_path(client: TestClient, app: FastAPI) -> None:
    """Requests to two ids no item has are one series labelled with the route template."""
    client.get("/items/900000001")
    client.get("/items/900000002")

    assert count(app, method="GET", route="/items/{item_id}", status="404") == 2
    assert not [labels for labels in series(app) if labels["route"].startswith("/items/9")]


def test_a_404_flood_adds_one_series(client: TestClient, app: FastAPI) -> None:
    """A thousand random paths, and a 9 KB one, all land in the one "unmatched" series."""
    for number in range(1000):
        client.get(f"/random/{number}")
    client.get("/" + "x" * 9000)

    assert count(app, method="GET", route="unmatched", status="404") == 1001
    assert len(series(app)) == 1


def test_invented_methods_share_one_label(client: TestClient, app: FastAPI) -> None:
    """Methods outside HTTP's registered set are counted as _OTHER, not one series each."""
    for method in ("FROB", "X" * 300, "PATCH"):
        client.request(method, "/livez")

    assert count(app, method="_OTHER", route="/livez", status="405") == 2
    assert count(app, method="PATCH", route="/livez", status="405") == 1


def test_the_status_the_client_got_is_counted(client: TestClient, app: FastAPI) -> None:
    """A validation error counts as 422, an exception as the error guard's 500."""

    async def boom() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/boom", boom)
    client.get("/items/!!")  # not an id by its shape: 422
    client.get("/boom")

    assert count(app, method="GET", route="/items/{item_id}", status="422") == 1
    assert count(app, method="GET", route="/boom", status="500") == 1


def test_the_deadline_is_the_last_bucket() -> None:
    """Buckets climb to the request deadline and stop there, whatever the deadline."""
    assert buckets_for(30.0)[-3:] == (10.0, 25.0, 30.0)
    assert buckets_for(0.5) == (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)
    assert buckets_for(0.001) == (0.001,)
    assert buckets_for(1000.0)[-2:] == (120.0, 1000.0)


def test_buckets_follow_the_request_timeout_setting() -> None:
    """REQUEST_TIMEOUT_SECONDS=2.5 gives a 2.5 s bucket and none above it."""
    app = create_app(Settings(request_timeout_seconds=2.5))
    with TestClient(app) as client:
        client.get("/livez")
    metrics: RequestMetrics = app.state.metrics
    bounds = {
        sample.labels["le"]
        for metric in metrics.registry.collect()
        for sample in metric.samples
        if sample.name.endswith("_bucket")
    }

    assert max((float(b) for b in bounds), key=lambda b: b if math.isfinite(b) else -1) == 2.5
    assert "+Inf" in bounds


def test_in_flight_gauge_rises_and_falls() -> None:
    """The gauge is 1 while a request is inside the app and 0 after, also when it raised."""
    metrics = RequestMetrics(deadline_seconds=30.0)
    seen: list[float | None] = []

    async def inside(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(metrics.registry.get_sample_value("http_server_active_requests"))
        if scope["path"] == "/raise":
            raise RuntimeError("boom")
        await ok_app(scope, receive, send)

    app = MetricsMiddleware(inside, metrics=metrics)
    asyncio.run(call(app, http_scope("/")))
    with pytest.raises(RuntimeError):
        asyncio.run(call(app, http_scope("/raise")))

    assert seen == [1.0, 1.0]
    assert metrics.registry.get_sample_value("http_server_active_requests") == 0
    # An exception that escapes is counted as the 500 the server will answer.
    labels = {"method": "GET", "route": "unmatched", "status": "500"}
    assert metrics.registry.get_sample_value(COUNT, labels) == 1


def test_other_scopes_pass_through_uncounted() -> None:
    """Lifespan and websocket scopes reach the app untouched and are not observed."""
    metrics = RequestMetrics(deadline_seconds=30.0)
    reached: list[str] = []

    async def inner(scope: Scope, _receive: Receive, _send: Send) -> None:
        reached.append(scope["type"])

    app = MetricsMiddleware(inner, metrics=metrics)
    asyncio.run(call(app, {"type": "lifespan"}))

    assert reached == ["lifespan"]
    assert not [s for m in metrics.registry.collect() for s in m.samples if s.name == COUNT]


def test_metrics_can_be_turned_off(app: FastAPI) -> None:
    """<PREFIX>_METRICS=false leaves the middleware out of the stack."""
    quiet = create_app(Settings(metrics=False))
    with TestClient(quiet) as client:
        client.get("/livez")

    assert count(quiet, method="GET", route="/livez", status="200") == 0
    assert MetricsMiddleware not in middleware_classes(quiet)
    assert MetricsMiddleware in middleware_classes(app)


# Run with PROMETHEUS_MULTIPROC_DIR set, as gunicorn's workers are (prometheus_client picks
# its multiprocess mode at import): requests before a fork (gunicorn's preload_app), in the
# forked worker, and in the parent after it.
FORKED_WORKERS = """
import asyncio, os
from {{ cookiecutter.package_name }}.middleware.metrics import MetricsMiddleware, RequestMetrics

async def endpoint(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})

async def discard(message):
    pass

app = MetricsMiddleware(endpoint, metrics=RequestMetrics(deadline_seconds=2.5))

async def serve(requests):
    for _ in range(requests):
        await app({"type": "http", "method": "GET", "path": "/"}, discard, discard)

asyncio.run(serve(3))
if os.fork() == 0:
    asyncio.run(serve(2))
    os._exit(0)
os.wait()
asyncio.run(serve(1))
"""


def test_every_request_is_counted_once_across_a_fork(tmp_path: Path) -> None:
    """In gunicorn's multiprocess mode, requests before a fork, in the forked worker and
    after it add up to one count each in the files the metrics listener reads."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", FORKED_WORKERS], env=env, check=True, timeout=60)
    registry = CollectorRegistry()
    # prometheus_client leaves this constructor unannotated.
    MultiProcessCollector(registry, path=str(tmp_path))  # type: ignore[no-untyped-call]

    labels = {"method": "GET", "route": "unmatched", "status": "200"}
    assert registry.get_sample_value(COUNT, labels) == 6
    assert registry.get_sample_value("http_server_active_requests") == 0
