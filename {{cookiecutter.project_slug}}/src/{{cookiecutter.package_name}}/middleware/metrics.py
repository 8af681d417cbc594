"""Count every HTTP request for Prometheus: duration by method, route and status; in flight.

The metrics, their labels, how gunicorn's workers add up and what it costs:
{{ "README.md, Metrics and traces" if cookiecutter.layout == "serving-only" else "docs/observability.md" }}. Values change through prometheus_client's public API only."""

from time import perf_counter

from prometheus_client import CollectorRegistry, Gauge, Histogram
from starlette.types import ASGIApp, Receive, Scope, Send

from .response import tracker

# The route of requests no route matched (no template starts without "/").
UNMATCHED = "unmatched"
# Methods outside these share one label value, as in OpenTelemetry's HTTP conventions.
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "QUERY"}
)
OTHER_METHOD = "_OTHER"
# Latency buckets below the request deadline, then the deadline: ``le="<deadline>"`` counts
# the requests that finished in time.
_LADDER = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0)


def buckets_for(deadline_seconds: float) -> tuple[float, ...]:
    """The histogram's upper bounds for a request deadline: the ladder below it, then it."""
    return (*(bound for bound in _LADDER if bound < deadline_seconds), deadline_seconds)


class RequestMetrics:
    """The instruments, made once per application; ``registry`` lets a test read them."""

    def __init__(
        self, *, deadline_seconds: float, registry: CollectorRegistry | None = None
    ) -> None:
        # The app's own: the process-wide one refuses a second app (tests build many).
        self.registry = CollectorRegistry() if registry is None else registry
        self.duration = Histogram(
            "http_server_request_duration_seconds",
            "Time from the request's arrival in the app to the end of its response.",
            ("method", "route", "status"),
            buckets=buckets_for(deadline_seconds),
            registry=self.registry,
        )
        # livesum: a dead worker's requests stop counting (the listener drops its file).
        self.active = Gauge(
            "http_server_active_requests",
            "Requests the app's workers are handling now.",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        # livemostrecent: each worker sees only the probes that reach it; the newest wins.
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
    def __init__(self, app: ASGIApp, *, metrics: RequestMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self._active = metrics.active
        # (method, route, status) -> histogram child, skipping labels()' checks and lock.
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
