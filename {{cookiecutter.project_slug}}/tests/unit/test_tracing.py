"""Traces (tracing.py): on only with an OTLP endpoint, spans linked from log lines. Each app
gets its own provider and the SDK's in-memory exporter: no global provider, no network."""

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from {{ cookiecutter.package_name }}.main import ACCESS_LOGGER, create_app
from {{ cookiecutter.package_name }}.settings import Settings
from {{ cookiecutter.package_name }}.tracing import telemetry_config

from .conftest import ClientFor, JsonLines


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "   "}, False),
        ({"OTEL_SERVICE_NAME": "svc"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
    ],
)
def test_only_an_otlp_endpoint_turns_tracing_on(env: dict[str, str], *, on: bool) -> None:
    """Tracing and export follow the standard variables; FastAPI's own metrics stay off."""
    config = telemetry_config(env)
    assert (config["tracing"], config["auto_configure"], config["logs"]) == (on, on, on)
    assert config["metrics"] is False


def test_a_traced_request_links_its_span_and_its_log_lines(
    client_for: ClientFor, json_lines: JsonLines
) -> None:
    """Spans are named by route, the guard's 500 is an ERROR span, access lines carry the
    span's ids (live: the battery's test_observability.py); no endpoint, nothing traced."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(
        Settings(access_log=True), telemetry={"tracer_provider": provider, "tracing": True}
    )

    @app.get("/_tests/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    client = client_for(app)
    client.get("/items/900000001")
    assert client.get("/_tests/boom").status_code == 500
    spans = exporter.get_finished_spans()
    routed, failed = [span for span in spans if span.kind is SpanKind.SERVER]
    assert (routed.name, routed.status.status_code) == ("GET /items/{item_id}", StatusCode.UNSET)
    line = json_lines.from_logger(ACCESS_LOGGER)[0]
    assert line["trace_id"] == format(routed.context.trace_id, "032x")
    assert failed.status.status_code is StatusCode.ERROR
    [event] = [event for event in failed.events if event.name == "exception"]
    assert (event.attributes or {})["exception.message"] == "boom"
    # Without an OTLP endpoint (the default): no provider installed, no trace id logged.
    client_for(create_app(Settings(access_log=True))).get("/livez")
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    assert "trace_id" not in json_lines.from_logger(ACCESS_LOGGER)[-1]
