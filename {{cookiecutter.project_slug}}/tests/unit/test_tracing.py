"""Traces: a server span per request, named by route template, in the SDK's in-memory exporter.

The application gets its own tracer provider through ``create_app(telemetry=...)`` (with
tracing on, as an OTLP endpoint would turn it), so no test touches the process-wide provider.
"""

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import Settings
from {{ cookiecutter.package_name }}.tracing import telemetry_config

from .logcapture import JsonLines

if TYPE_CHECKING:
    from fastapi.telemetry import TelemetryConfig

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"
ACCESS_LOGGER = "{{ cookiecutter.package_name }}.access"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(exporter: InMemorySpanExporter) -> Iterator[tuple[FastAPI, TestClient]]:
    """The application with a tracer provider that keeps spans in memory, and a client."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry: TelemetryConfig = {"tracer_provider": provider, "tracing": True}
    app = create_app(Settings(access_log=True), telemetry=telemetry)

    async def boom() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield app, client
    provider.shutdown()


def server_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.kind is SpanKind.SERVER]


def test_one_server_span_per_request_named_by_route(
    traced: tuple[FastAPI, TestClient], exporter: InMemorySpanExporter
) -> None:
    """GETs of two ids no item has make two spans, both named "GET /items/{item_id}"."""
    _, client = traced
    client.get("/items/900000001")
    client.get("/items/900000002")

    spans = server_spans(exporter)
    assert [span.name for span in spans] == ["GET /items/{item_id}"] * 2
    attributes = spans[0].attributes or {}
    assert attributes["http.route"] == "/items/{item_id}"
    assert attributes["http.response.status_code"] == 404
    # A 4xx is the client's error, not the server's: the span's status stays unset.
    assert spans[0].status.status_code is StatusCode.UNSET


def test_an_exception_marks_the_span_as_an_error(
    traced: tuple[FastAPI, TestClient], exporter: InMemorySpanExporter
) -> None:
    """An unhandled exception, answered 500 by the error guard, gives an ERROR span."""
    _, client = traced
    assert client.get("/boom").status_code == 500

    [span] = server_spans(exporter)
    assert span.name == "GET /boom"
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["http.response.status_code"] == 500
    # The error guard records the exception on the request's span: type, message, stack.
    [event] = [event for event in span.events if event.name == "exception"]
    event_attributes = event.attributes or {}
    assert event_attributes["exception.type"] == "RuntimeError"
    assert event_attributes["exception.message"] == "boom"
    assert "raise RuntimeError" in str(event_attributes["exception.stacktrace"])


def test_a_traceparent_continues_the_callers_trace(
    traced: tuple[FastAPI, TestClient], exporter: InMemorySpanExporter
) -> None:
    """The span joins the trace and parent a W3C traceparent header names."""
    _, client = traced
    client.get("/livez", headers={"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"})

    [span] = server_spans(exporter)
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == PARENT_SPAN_ID


def test_a_malformed_traceparent_starts_a_new_trace(
    traced: tuple[FastAPI, TestClient], exporter: InMemorySpanExporter
) -> None:
    """A hostile traceparent (wrong shape, all-zero ids, 10 KB) is ignored, never an error."""
    _, client = traced
    for value in ("garbage", f"00-{'0' * 32}-{PARENT_SPAN_ID}-01", "00-" + "f" * 10_000):
        assert client.get("/livez", headers={"traceparent": value}).status_code == 200

    spans = server_spans(exporter)
    assert len(spans) == 3
    assert all(span.parent is None for span in spans)


def test_log_lines_carry_request_id_and_trace_id_together(
    traced: tuple[FastAPI, TestClient], exporter: InMemorySpanExporter, json_lines: JsonLines
) -> None:
    """The access line of a traced request has its request id, trace id and span id."""
    _, client = traced
    response = client.get("/livez")

    [span] = server_spans(exporter)
    [line] = json_lines.from_logger(ACCESS_LOGGER)
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["trace_id"] == format(span.context.trace_id, "032x")
    assert len(line["span_id"]) == 16
    assert list(line)[4:7] == ["request_id", "trace_id", "span_id"]


def test_without_an_endpoint_nothing_is_traced(json_lines: JsonLines) -> None:
    """No OTEL_EXPORTER_OTLP_*ENDPOINT: no provider is installed and no line has a trace id."""
    app = create_app(Settings(access_log=True))
    with TestClient(app) as client:
        client.get("/livez")

    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    assert not app._native_telemetry.enabled()
    [line] = json_lines.from_logger(ACCESS_LOGGER)
    assert "trace_id" not in line
    assert "request_id" in line


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

    assert config["tracing"] is on
    assert config["auto_configure"] is on
    assert config["logs"] is on
    assert config["metrics"] is False
