"""What a running job shows: one line per run (its outcome and duration; a failure's
traceback), every line carrying the job id, task, attempt and the request id that queued it;
a span continuing that request's trace; its outcome, duration and attempt counted.
``observe`` is a procrastinate worker middleware (worker.py installs it)."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from procrastinate import JobContext
from procrastinate.exceptions import JobAborted
from prometheus_client import Counter, Histogram

from {{ cookiecutter.package_name }}.context import REQUEST_ID
from {{ cookiecutter.package_name }}.tracing import telemetry_config

from .defer import ORIGIN_KEY

# The running job's fields for every log line written while it runs (each job runs in an
# asyncio task of its own, so each sees its own).
JOB_FIELDS: ContextVar[dict[str, object] | None] = ContextVar("job_fields", default=None)

JOBS = Counter("jobs", "Job runs by task and outcome", ["task", "outcome"])
JOB_DURATION = Histogram(
    "job_duration_seconds",
    "Job run time by task",
    ["task"],
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 300, 900),
)
JOB_ATTEMPT = Histogram(
    "job_attempt", "The attempt each job run was, by task", ["task"], buckets=(1, 2, 3, 5, 10, 20)
)

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)


def configure_tracing() -> TracerProvider | None:
    """The worker's tracer provider, exporting over OTLP/HTTP, when the OTEL_* variables turn
    tracing on as they do for the web app (tracing.py); None, and spans cost nothing, else.
    The web app's FastAPI sets its own up; the worker has no FastAPI to do it."""
    if not telemetry_config()["tracing"]:
        return None
    provider = TracerProvider()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_*
    trace.set_tracer_provider(provider)
    return provider


class JobFields(logging.Filter):
    """Adds the running job's fields to each record that does not carry them already."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (JOB_FIELDS.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


async def observe(call_next: Callable[[], Awaitable[Any]], context: JobContext, _: Any) -> Any:
    """Run the job inside its log fields, its span and its measurements."""
    job = context.job
    # Not the task's argument: popped before the task is called (the row keeps it for retries).
    queued_by = job.task_kwargs.pop(ORIGIN_KEY, None)
    origin = {
        str(key): value
        for key, value in (queued_by.items() if isinstance(queued_by, dict) else ())
        if isinstance(value, str)
    }
    REQUEST_ID.set(origin.get("request_id"))
    attempt = job.attempts + 1
    JOB_FIELDS.set({"job_id": job.id, "task": job.task_name, "attempt": attempt})
    outcome, started = "failed", time.perf_counter()
    span_name = f"job {job.task_name}"
    parent = propagate.extract(origin)
    with tracer.start_as_current_span(span_name, parent, kind=trace.SpanKind.CONSUMER) as span:
        span.set_attributes({"job.id": str(job.id), "job.attempt": attempt})
        try:
            result = await call_next()
        except (asyncio.CancelledError, JobAborted):
            outcome = "aborted"
            logger.warning("job aborted", extra=took(started))
            raise
        except Exception:
            logger.warning("job failed", exc_info=True, extra=took(started))
            raise
        else:
            outcome = "succeeded"
            logger.info("job succeeded", extra=took(started))
            return result
        finally:
            JOBS.labels(job.task_name, outcome).inc()
            JOB_DURATION.labels(job.task_name).observe(time.perf_counter() - started)
            JOB_ATTEMPT.labels(job.task_name).observe(attempt)


def took(started: float) -> dict[str, float]:
    """The run's duration so far, as a log line's field."""
    return {"duration_ms": round((time.perf_counter() - started) * 1e3, 3)}
