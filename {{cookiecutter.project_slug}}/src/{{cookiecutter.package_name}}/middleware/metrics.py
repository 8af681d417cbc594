"""Count every HTTP request for Prometheus: duration by method, route and status; in flight.

Outputs: ``http_server_request_duration_seconds`` (a histogram; its ``_count`` is the
request counter) labelled ``method``, ``route``, ``status``, and
``http_server_active_requests``; ``readiness_check_passing`` by ``check`` (the readiness
checks' last outcomes). Depends on prometheus_client's public API, Starlette's ASGI types
and response.py (the request's one send wrapper, shared with the other middleware).

Under gunicorn, deploy/gunicorn.conf.py sets ``PROMETHEUS_MULTIPROC_DIR`` before the workers
import this module: each worker writes its values to memory-mapped files there, and the
stack's metrics listener adds up every worker's files, dead ones included. Without the
variable (tests, ``make run``) the values live in this process.

The route label is the route's template (``/items/{item_id}``), never the raw path: a flood
of 404s to random paths adds no series. Per request, the label children come from a dict of
our own after their first ``labels()`` call (which validates and locks each time). Values
change through prometheus_client's own ``inc``/``dec``/``observe``: under gunicorn about
26,000 instructions more per request than writing its files directly, which the template's
lab measured and left out of generated code (a private-API contract with a dependency).
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge, Histogram

from .response import tracker

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

# Requests that matched no route (404, or a 405 on no route at all) share one label value;
# route templates start with "/", so it cannot collide with one.
UNMATCHED = "unmatched"
# Methods outside this set share one label value, so an invented method adds no series
# (OpenTelemetry's HTTP conventions do the same).
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "QUERY"}
)
OTHER_METHOD = "_OTHER"
# Latency buckets below the request deadline; the deadline itself is always a bucket, so
# ``le="<deadline>"`` counts the requests that finished in time and ``+Inf`` minus it the
# ones the deadline cut (they end just past it).
_LADDER = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0)


def buckets_for(deadline_seconds: float) -> tuple[float, ...]:
    """The histogram's upper bounds for a request deadline: the ladder below it, then it."""
    return (*(bound for bound in _LADDER if bound < deadline_seconds), deadline_seconds)


class RequestMetrics:
    """The instruments, made once per application; ``registry`` lets a test read them."""

    def __init__(
        self, *, deadline_seconds: float, registry: CollectorRegistry | None = None
    ) -> None:
        # A registry of the app's own by default: the process-wide one would refuse a second
        # application in the same process (tests build many). Under gunicorn no registry is
        # read at all: the listener reads the workers' files.
        self.registry = CollectorRegistry() if registry is None else registry
        self.duration = Histogram(
            "http_server_request_duration_seconds",
            "Time from the request's arrival in the app to the end of its response.",
            ("method", "route", "status"),
            buckets=buckets_for(deadline_seconds),
            registry=self.registry,
        )
        # livesum: the listener adds up live workers only (it drops a dead worker's gauge
        # file, metrics_archive.py), so a killed worker's requests stop counting.
        self.active = Gauge(
            "http_server_active_requests",
            "Requests the app's workers are handling now.",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        # Each readiness check's last outcome (api/readiness.py), 1 passing, 0 not: the database
        # while /readyz, by default, does not depend on it. livemostrecent: the newest value any
        # live worker wrote, as each worker sees only the probes that reach it.
        self.readiness = Gauge(
            "readiness_check_passing",
            "1 when the readiness check passed at its last run, else 0.",
            ("check",),
            registry=self.registry,
            multiprocess_mode="livemostrecent",
        )

    def readiness_outcome(self, check: str, outcome: str) -> None:
        """Record a readiness check's outcome (ReadinessChecks' ``on_outcome``)."""
        self.readiness.labels(check).set(1 if outcome == "ok" else 0)


class MetricsMiddleware:
    """Observe each request's duration under its route template, and count it in flight."""

    def __init__(self, app: ASGIApp, *, metrics: RequestMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self._active = metrics.active
        # (method, route, status) -> that label set's histogram child. Bounded: known methods,
        # the app's routes, the status codes (__call__ folds the rest first).
        self._children: dict[tuple[str, str, int], Histogram] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        tracked = tracker(send)
        start = perf_counter()
        self._active.inc()
        try:
            await self.app(scope, receive, tracked.send)
        finally:
            self._active.dec()
            # The router stores the matched route in the scope it shares with us.
            route = scope.get("route")
            method = scope["method"]
            if method not in KNOWN_METHODS:
                method = OTHER_METHOD
            # No status: the app raised before answering; the server will answer 500.
            key = (method, getattr(route, "path", None) or UNMATCHED, tracked.status or 500)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self.metrics.duration.labels(*key[:2], str(key[2]))
            child.observe(perf_counter() - start)
