"""Prometheus metrics: each HTTP request's duration by method, route and status; in flight;
WebSocket sessions open and their durations by close code. The metrics and their cost:
{{ "README.md, Metrics and traces" if cookiecutter.layout == "serving-only" else "docs/observability.md" }}. Values change through prometheus_client's public API only."""

from time import perf_counter

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .response import tracker

# The route of requests no route matched (no template starts without "/").
UNMATCHED = "unmatched"
# Methods outside these share one label value, as in OpenTelemetry's HTTP conventions.
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "QUERY"}
)
OTHER_METHOD = "_OTHER"
# Buckets below the deadline, then it: ``le="<deadline>"`` counts the requests in time.
_LADDER = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0)
SESSION_BUCKETS = (1.0, 10.0, 60.0, 300.0, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
# Close codes as labels: RFC 6455's registered ones; any other (an app's 4000-4999) is "other".
CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012})
OTHER_CODE = "other"


def buckets_for(deadline_seconds: float) -> tuple[float, ...]:
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
        self.websockets_open = Gauge(
            "websocket_sessions_open",
            "WebSocket sessions the app's workers hold open now.",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.websocket_duration = Histogram(
            "websocket_session_duration_seconds",
            "Time from a WebSocket's accept to its close, by close code (whoever closed).",
            ("code",),
            buckets=SESSION_BUCKETS,
            registry=self.registry,
        )
        # What sessions carry: a session's bounds are the stack's (its README), this is the load.
        self.websocket_messages = Counter(
            "websocket_messages",
            "WebSocket messages the app received and sent, by direction.",
            ("direction",),
            registry=self.registry,
        )
        self.websocket_bytes = Counter(
            "websocket_message_bytes",
            "Their payload bytes (text as UTF-8), by direction.",
            ("direction",),
            registry=self.registry,
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
        # A WebSocket's messages and bytes by direction, looked up once, not per message.
        self._messages = {
            direction: (
                metrics.websocket_messages.labels(direction),
                metrics.websocket_bytes.labels(direction),
            )
            for direction in ("received", "sent")
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await self._websocket(scope, receive, send)
            else:
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

    def _count_message(self, direction: str, message: Message) -> None:
        text = message.get("text")
        size = len(text.encode()) if text is not None else len(message.get("bytes") or b"")
        messages, payload_bytes = self._messages[direction]
        messages.inc()
        payload_bytes.inc(size)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Open from its accept; its duration under the closing code (the app's, else the
        client's; 1006 when neither said one); its messages and their bytes each way."""
        accepted: list[float] = []  # perf_counter() at the accept, once accepted
        codes: list[int] = []

        async def watch_send(message: Message) -> None:
            if message["type"] == "websocket.send":
                self._count_message("sent", message)
            elif message["type"] == "websocket.accept":
                accepted.append(perf_counter())
                self.metrics.websockets_open.inc()
            elif message["type"] == "websocket.close":
                codes.append(message.get("code", 1000))
            await send(message)

        async def watch_receive() -> Message:
            message = await receive()
            if message["type"] == "websocket.receive":
                self._count_message("received", message)
            elif message["type"] == "websocket.disconnect":
                codes.append(message.get("code", 1005))
            return message

        try:
            await self.app(scope, watch_receive, watch_send)
        finally:
            if accepted:
                self.metrics.websockets_open.dec()
                code = codes[0] if codes else 1006
                label = str(code) if code in CLOSE_CODES else OTHER_CODE
                self.metrics.websocket_duration.labels(label).observe(perf_counter() - accepted[0])
