"""Traces (tracing.py): on only with an OTLP endpoint; then a server span per request named
by route, errors recorded by the error guard, a caller's trace continued, ids in the logs.

The app gets its own tracer provider (``create_app(telemetry=...)``) and the SDK's in-memory
exporter: no test touches the process-wide provider or the network.
"""

from typing import TYPE_CHECKING

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
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

TRACE_ID, PARENT_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("env", "on"),
    [({}, False), ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
     ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
     ({"OTEL_EXPORTER_OTLP_ENDPOINT": "   "}, False), ({"OTEL_SERVICE_NAME": "svc"}, False),
     ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, False)],
)  # fmt: skip
def test_only_an_otlp_endpoint_turns_tracing_on(env: dict[str, str], *, on: bool) -> None:
    """Tracing and export follow the standard variables; FastAPI's own metrics stay off."""
    config = telemetry_config(env)
    assert (config["tracing"], config["auto_configure"], config["logs"]) == (on, on, on)
    assert config["metrics"] is False


def test_spans_are_named_by_route_join_the_caller_and_record_errors(
    client_for: ClientFor, json_lines: JsonLines
) -> None:
    """A 404 of /items/{item_id} continues the traceparent's trace, status unset (the
    client's error), its access line carrying request, trace and span ids; a hostile
    traceparent starts a new trace; an exception (the guard's 500) gives an ERROR span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry: TelemetryConfig = {"tracer_provider": provider, "tracing": True}
    app = create_app(Settings(access_log=True), telemetry=telemetry)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    client = client_for(app)
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    found = client.get("/items/900000001", headers={"traceparent": traceparent})
    for hostile in ["garbage", f"00-{'0' * 32}-{PARENT_ID}-01", "00-" + "f" * 10_000]:
        assert client.get("/livez", headers={"traceparent": hostile}).status_code == 200
    assert client.get("/boom").status_code == 500
    spans = [span for span in exporter.get_finished_spans() if span.kind is SpanKind.SERVER]
    joined, *fresh, failed = spans
    assert joined.name == "GET /items/{item_id}"
    assert format(joined.context.trace_id, "032x") == TRACE_ID
    assert joined.parent is not None
    assert format(joined.parent.span_id, "016x") == PARENT_ID
    assert joined.status.status_code is StatusCode.UNSET
    assert [span.parent for span in fresh] == [None] * 3
    line = json_lines.from_logger(ACCESS_LOGGER)[0]
    assert list(line)[4:7] == ["request_id", "trace_id", "span_id"]
    assert (line["request_id"], line["trace_id"]) == (found.headers["x-request-id"], TRACE_ID)
    assert failed.status.status_code is StatusCode.ERROR
    [event] = [event for event in failed.events if event.name == "exception"]
    assert (event.attributes or {})["exception.message"] == "boom"


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
