"""OpenTelemetry traces through FastAPI's native telemetry, configured by OTEL_* variables only.

Inputs: the standard OpenTelemetry environment variables, read by FastAPI and the SDK at the
application's start (in each gunicorn worker, after the fork): ``OTEL_EXPORTER_OTLP_ENDPOINT``
or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (unset: nothing is exported, and nothing is
traced), ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_SDK_DISABLED``. Depends on fastapi >= 0.165 and, to export, on
``fastapi[opentelemetry]`` (the SDK and the OTLP/HTTP exporter).

With no endpoint no tracer provider is installed, and FastAPI then skips its telemetry on
each request after one check (docs/observability.md has the measured cost). A
``traceparent`` header continues the caller's trace: nginx forwards it only from the load
balancers in TRUSTED_PROXIES (deploy/nginx.conf), so an outside client cannot pick trace ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry import trace

if TYPE_CHECKING:
    from fastapi.telemetry import TelemetryConfig


def telemetry_config() -> TelemetryConfig:
    """FastAPI's telemetry options for this service."""
    return {
        # Add the OTLP exporters when the standard endpoint variables are set, without
        # FastAPI's own FASTAPI_OTEL_AUTO_CONFIGURE switch: OTEL_* variables alone decide.
        "auto_configure": True,
        # Prometheus already measures each request (middleware/metrics.py): a second
        # histogram per request would double that cost for the same numbers.
        "metrics": False,
    }


def current_trace_ids() -> tuple[str, str] | None:
    """The current span's (trace id, span id) in W3C hex, or None outside a recorded span."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
