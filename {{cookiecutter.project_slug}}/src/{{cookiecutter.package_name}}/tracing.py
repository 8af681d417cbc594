"""OpenTelemetry traces through FastAPI's native telemetry, configured by OTEL_* variables only.

Inputs: the standard OpenTelemetry environment variables, read by FastAPI and the SDK at the
application's start (in each gunicorn worker, after the fork): ``OTEL_EXPORTER_OTLP_ENDPOINT``
or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (unset: nothing is exported, and nothing is
traced), ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_SDK_DISABLED``. Depends on fastapi >= 0.165 and, to export, on
``fastapi[opentelemetry]`` (the SDK and the OTLP/HTTP exporter).

With no endpoint FastAPI's telemetry is switched off outright: left on, it asks the
OpenTelemetry API for three global providers on every request only to find none, about 27k
instructions per request, 7 % of GET /livez (docs/observability.md, "What it costs"). A
``traceparent`` header continues the caller's trace: nginx forwards it only from the load
balancers in TRUSTED_PROXIES (deploy/nginx.conf), so an outside client cannot pick trace ids.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from opentelemetry import trace

if TYPE_CHECKING:
    from collections.abc import Mapping

    from fastapi.telemetry import TelemetryConfig

# Any of these set (and the SDK not disabled) turns tracing on; FastAPI's auto-configuration
# then adds an OTLP/HTTP exporter per signal whose endpoint is set.
ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)


def exporting(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for OTLP export."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def telemetry_config(environ: Mapping[str, str] = os.environ) -> TelemetryConfig:
    """FastAPI's telemetry options for this service, from the OTEL_* variables."""
    on = exporting(environ)
    return {
        # Add the OTLP exporters from the standard endpoint variables, without FastAPI's
        # own FASTAPI_OTEL_AUTO_CONFIGURE switch: OTEL_* variables alone decide.
        "auto_configure": on,
        "tracing": on,
        # Unhandled exceptions and validation failures as OpenTelemetry log records.
        "logs": on,
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
