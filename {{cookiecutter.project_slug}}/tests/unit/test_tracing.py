"""Traces (tracing.py): a server span per request, named by route template, errors marked,
a caller's trace continued, ids in the log lines; on only with an OTLP endpoint.

The application gets its own tracer provider through ``create_app(telemetry=...)`` and the
SDK's in-memory exporter, so no test touches the process-wide provider or the network.
"""

from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from {{ cookiecutter.package_name }}.main import ACCESS_LOGGER, create_app
from {{ cookiecutter.package_name }}.settings import Settings
from {{ cookiecutter.package_name }}.tracing import telemetry_config

from .asgi import ClientFor
from .logcapture import JsonLines

if TYPE_CHECKING:
    from fastapi.telemetry import TelemetryConfig

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(exporter: InMemorySpanExporter, client_for: ClientFor) -> TestClient:
    """A client of the app with tracing on and its spans kept in ``exporter``; GET /boom raises."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry: TelemetryConfig = {"tracer_provider": provider, "tracing": True}
    app = create_app(Settings(access_log=True), telemetry=telemetry)

    async def boom() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/boom", boom)
    return client_for(app)


def server_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.kind is SpanKind.SERVER]


def test_a_span_per_request_named_by_route_and_errors_marked(
    traced: TestClient, exporter: InMemorySpanExporter
) -> None:
    """A 404 of /items/{item_id} keeps the status unset (the client's error); an exception,
    answered 500 by the error guard, gives an ERROR span with the exception recorded."""
    traced.get("/items/900000001")
    assert traced.get("/boom").status_code == 500
    found, failed = server_spans(exporter)
    assert (found.name, failed.name) == ("GET /items/{item_id}", "GET /boom")
    attributes = found.attributes or {}
    assert (attributes["http.route"], attributes["http.response.status_code"]) == (
        "/items/{item_id}", 404,
    )  # fmt: skip
    assert (found.status.status_code, failed.status.status_code) == (
        StatusCode.UNSET, StatusCode.ERROR,
    )  # fmt: skip
    [event] = [event for event in failed.events if event.name == "exception"]
    event_attributes = event.attributes or {}
    assert (event_attributes["exception.type"], event_attributes["exception.message"]) == (
        "RuntimeError", "boom",
    )  # fmt: skip
    assert "raise RuntimeError" in str(event_attributes["exception.stacktrace"])


def test_a_traceparent_is_continued_and_a_hostile_one_ignored(
    traced: TestClient, exporter: InMemorySpanExporter
) -> None:
    """A W3C traceparent's trace and parent are joined; a malformed one (wrong shape,
    all-zero ids, 10 KB) starts a new trace, never an error."""
    hostile = ["garbage", f"00-{'0' * 32}-{PARENT_SPAN_ID}-01", "00-" + "f" * 10_000]
    for value in [f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01", *hostile]:
        assert traced.get("/livez", headers={"traceparent": value}).status_code == 200
    joined, *fresh = server_spans(exporter)
    assert format(joined.context.trace_id, "032x") == TRACE_ID
    assert joined.parent is not None
    assert format(joined.parent.span_id, "016x") == PARENT_SPAN_ID
    assert [span.parent for span in fresh] == [None] * 3


def test_log_lines_carry_request_id_and_trace_id_together(
    traced: TestClient, exporter: InMemorySpanExporter, json_lines: JsonLines
) -> None:
    """The access line of a traced request has its request id, trace id and span id."""
    response = traced.get("/livez")
    [span] = server_spans(exporter)
    [line] = json_lines.from_logger(ACCESS_LOGGER)
    assert list(line)[4:7] == ["request_id", "trace_id", "span_id"]
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["trace_id"] == format(span.context.trace_id, "032x")
    assert len(line["span_id"]) == 16


def test_without_an_endpoint_nothing_is_traced(
    client_for: ClientFor, json_lines: JsonLines
) -> None:
    """No OTEL_EXPORTER_OTLP_*ENDPOINT: no provider installed, no line with a trace id."""
    app = create_app(Settings(access_log=True))
    client_for(app).get("/livez")
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    assert not app._native_telemetry.enabled()
    [line] = json_lines.from_logger(ACCESS_LOGGER)
    assert ("trace_id" in line, "request_id" in line) == (False, True)


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "   "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_SERVICE_NAME": "svc"}, False),
    ],
)
def test_only_an_otlp_endpoint_turns_tracing_on(env: dict[str, str], *, on: bool) -> None:
    """Tracing and export follow the standard variables; off, FastAPI's telemetry is off."""
    config = telemetry_config(env)
    assert (config["tracing"], config["auto_configure"], config["logs"]) == (on, on, on)
    assert config["metrics"] is False
