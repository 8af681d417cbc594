"""OpenTelemetry traces through FastAPI's native telemetry, configured by OTEL_* variables only.

Read at each worker's start; no endpoint set: telemetry off outright, which saves 7 % of a
small request ({{ "README.md, Metrics and traces" if cookiecutter.layout == "serving-only" else "docs/observability.md" }}). Depends on fastapi >= 0.165
and, to export, ``fastapi[opentelemetry]``."""

import os
from collections.abc import Mapping

from fastapi.telemetry import TelemetryConfig
from opentelemetry import trace

# Any of these set (and the SDK not disabled) turns tracing on, exporting over OTLP/HTTP.
ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)


def telemetry_config(environ: Mapping[str, str] = os.environ) -> TelemetryConfig:
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    on = not disabled and any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)
    return {
        "auto_configure": on,  # OTEL_* alone decide, not FASTAPI_OTEL_AUTO_CONFIGURE
        "tracing": on,
        "logs": on,  # unhandled exceptions and validation failures as log records
        "metrics": False,  # Prometheus measures each request already (middleware/metrics.py)
    }


def current_trace_ids() -> tuple[str, str] | None:
    """The current span's (trace id, span id) in W3C hex, or None outside a recorded span."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
