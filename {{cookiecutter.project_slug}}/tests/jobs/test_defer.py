"""Queueing in the request's transaction: a job commits or rolls back with its rows and no
worker starts it before the commit; the example route queues its job, the worker delivers it
at least once with the same idempotency key; the owned insert matches the locked library."""

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import procrastinate
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import live.conftest as live
from {{ cookiecutter.package_name }}.jobs.defer import DEFER_JOB, ORIGIN_KEY, defer
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import Settings

from database.tables import fetch
{%- if cookiecutter.auth == "oidc" %}
from token_issuer import SHARED, bearer, trusting
{%- endif %}

from .conftest import WorkerProcess, jobs, runs
from .trial_tasks import trial_sleep


def test_a_job_commits_and_rolls_back_with_its_transaction(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Rolled back: no row, no job. Committed: the job runs, and not while its transaction was
    still open (the worker was running and listening all along)."""
    start_worker()

    async def scenario() -> list[Any]:
        engine = create_async_engine(queue_url)
        sessions = async_sessionmaker(engine)
        async with sessions() as session:
            await defer(session, trial_sleep, key="rolled back", seconds=0)
            await session.rollback()
        async with sessions() as session:
            await defer(session, trial_sleep, key="committed", seconds=0)
            await asyncio.sleep(1.5)  # three beats: the worker polls at each
            before_commit = await asyncio.to_thread(runs, queue_url)
            await session.commit()
        await engine.dispose()
        return before_commit

    assert asyncio.run(scenario()) == []
    live.wait_for(lambda: len(runs(queue_url, "committed")) == 2, 10, "the committed job running")
    assert runs(queue_url, "rolled back") == []
    assert jobs(queue_url) == []  # the one committed succeeded and was deleted


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver: answers its first POST 503, the next ones 204; keeps what came."""

    received: list[tuple[str | None, dict[str, Any]]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.headers["Idempotency-Key"], body))
        self.send_response(503 if len(self.received) == 1 else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:  # quiet
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str | None, dict[str, Any]]]]]:
    """A receiver on a free loopback port: its URL and what it received."""
    received: list[tuple[str | None, dict[str, Any]]] = []
    handler = type("Handler", (Receiver,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/items", received
    server.shutdown()
    server.server_close()


def test_creating_an_item_queues_its_announcement_delivered_at_least_once(
    queue_url: str,
    start_worker: Callable[..., WorkerProcess],
    client_for: Callable[[FastAPI], TestClient],
    receiver: tuple[str, list[tuple[str | None, dict[str, Any]]]],
) -> None:
    """POST /items queues announce_item with the item, its idempotency key and the request's
    id; the worker POSTs it to the webhook, a 503 makes it retry, and both deliveries carry the
    same key (the receiver keeps one). The worker's lines carry the job and the request id, one
    per run says its outcome, and none the job's data."""
{%- if cookiecutter.auth == "oidc" %}
    client = client_for(trusting(create_app(Settings(database_url=SecretStr(queue_url)))))
    client.headers.update(bearer(SHARED.token()))  # a writer's
{%- else %}
    client = client_for(create_app(Settings(database_url=SecretStr(queue_url))))
{%- endif %}
    response = client.post("/items", json={"name": "lamp", "price_cents": 1999, "tags": []})
    assert response.status_code == 201
    item, request_id = response.json(), response.headers["x-request-id"]
    [(job_id, task, status, attempts, args)] = jobs(queue_url)
    assert (task, status, attempts) == ("announce_item", "todo", 0)
    assert args["item"] == item
    assert args["idempotency_key"] == f"item-{item['id']}"
    assert args[ORIGIN_KEY]["request_id"] == request_id

    url, received = receiver
    worker = start_worker(item_webhook_url=url)
    live.wait_for(lambda: len(received) == 2, 15, "the retried delivery")
    assert received == [(f"item-{item['id']}", item)] * 2
    live.wait_for(lambda: jobs(queue_url) == [], 5, "the delivered job deleted")
    lines = [line for line in worker.lines() if line.get("task") == "announce_item"]
    assert {(line["job_id"], line["request_id"]) for line in lines} == {(job_id, request_id)}
    assert {line["attempt"] for line in lines} == {1, 2}
    assert [line["message"] for line in lines if line["message"].startswith("job ")] == [
        "job failed",
        "job succeeded",
    ]
    assert "lamp" not in worker.log.read_text(encoding="utf-8")  # a job's data is not logged


def test_the_owned_insert_is_the_locked_library_s(queue_url: str) -> None:
    """defer.py calls the function procrastinate's own defer calls, with a row of exactly the
    composite type's fields: a library release that changes either fails here."""
    library_query = procrastinate.sql.queries["defer_jobs"]
    for name in ("procrastinate_defer_jobs_v1", "procrastinate_job_to_defer_v1"):
        assert name in library_query
        assert name in str(DEFER_JOB)
    query = "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:type AS regclass)"
    type_name = "procrastinate_job_to_defer_v1"
    fields = fetch(queue_url, f"{query} AND attnum > 0 ORDER BY attnum", type=type_name)
    expected = ["queue_name", "task_name", "priority", "lock", "queueing_lock", "args"]
    assert [name for (name,) in fields] == [*expected, "scheduled_at"]
    assert procrastinate.types.JobToDefer._fields == (*expected, "scheduled_at")


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps the spans of each export it is sent."""

    spans: list[Any]

    def do_POST(self) -> None:
        export = ExportTraceServiceRequest()
        export.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:  # quiet
        return


def test_a_job_runs_in_a_span_continuing_the_trace_that_queued_it(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Queued inside a traced request's span, the job's span (exported over OTLP by the
    worker) has that span's trace id and that span as its parent."""
    spans: list[Any] = []
    collector = ThreadingHTTPServer(("127.0.0.1", 0), type("C", (Collector,), {"spans": spans}))
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    requested = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))

    async def queue_in_the_request_span() -> None:
        engine = create_async_engine(queue_url)
        async with async_sessionmaker(engine)() as session:
            with trace.use_span(NonRecordingSpan(requested)):
                await defer(session, trial_sleep, key="traced", seconds=0)
            await session.commit()
        await engine.dispose()

    try:
        endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
        worker = start_worker(otel={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
        asyncio.run(queue_in_the_request_span())
        live.wait_for(lambda: len(runs(queue_url, "traced")) == 2, 10, "the traced job running")
        assert worker.stop()[0] == 0  # the provider's shutdown exports what is left
    finally:
        collector.shutdown()
        collector.server_close()
    [span] = [span for span in spans if span.name == "job trial_sleep"]
    assert int.from_bytes(span.trace_id, "big") == requested.trace_id
    assert int.from_bytes(span.parent_span_id, "big") == requested.span_id
