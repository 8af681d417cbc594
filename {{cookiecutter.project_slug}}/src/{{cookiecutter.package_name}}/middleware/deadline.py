"""Bound each HTTP request's time until its response starts: past the deadline, cancel it and
answer 504. A started response (a stream) runs on while it sends at least every
``stream_idle_seconds`` and, if set, until ``stream_max_seconds``; past either it is cut (no
clean end) with one warning line. One sweeper per event loop checks every ``tick``
({{ "README.md" if cookiecutter.layout == "serving-only" else "docs/app.md" }}, Deadline). request_id.py must run outside this."""

import asyncio
import logging
from asyncio import CancelledError, current_task, get_running_loop
from time import monotonic
from typing import NoReturn

from starlette.types import ASGIApp, Receive, Scope, Send

from {{ cookiecutter.package_name }}.context import REQUEST_ID

from .response import ResponseTracker, send_json, tracker


class DeadlineExceeded(Exception):  # noqa: N818 (names what happened, like TimeoutError)
    """A started response was cut and must be aborted; logs.py drops the server's traceback of
    it (the middleware said it in one warning line)."""


class _Sweeper:
    """The in-flight requests of one event loop, and the one timer that expires them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, bounds: "DeadlineMiddleware") -> None:
        self.loop = loop
        self.bounds = bounds  # the middleware: its tick and timeouts
        # task -> (monotonic() deadline, its response): insertion order is deadline order (one
        # timeout for all); started responses stay at the front, visited each tick.
        self.inflight: dict[asyncio.Task[object], tuple[float, ResponseTracker]] = {}
        self.expired: set[asyncio.Task[object]] = set()
        self.handle: asyncio.TimerHandle | None = None

    def sweep(self) -> None:
        now = monotonic()
        for task, (deadline, response) in self.inflight.items():
            if deadline > now:
                break
            # A task someone else is already cancelling (a server shutdown) is theirs.
            if task in self.expired or task.cancelling():
                continue
            if response.status is not None and not self._stream_over(response, deadline, now):
                continue  # started: the deadline bounded its first byte, the gaps bound the rest
            self.expired.add(task)
            task.cancel()
        self.handle = self.loop.call_later(self.bounds.tick, self.sweep) if self.inflight else None

    def _stream_over(self, response: ResponseTracker, deadline: float, now: float) -> bool:
        bounds = self.bounds
        if not response.sent_at:  # no chunk since its start: silent from the deadline on
            response.sent_at = now
        if now - response.sent_at > bounds.stream_idle_seconds:
            return True
        arrived = deadline - bounds.timeout_seconds
        return bounds.stream_max_seconds is not None and now - arrived > bounds.stream_max_seconds


class DeadlineMiddleware:
    """``timeout_seconds`` until the response starts; then ``stream_idle_seconds`` (default: the
    same) between two of its messages and, when set, ``stream_max_seconds`` in all."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        timeout_seconds: float,
        stream_idle_seconds: float | None = None,
        stream_max_seconds: float | None = None,
        logger: str = __name__,
    ) -> None:
        if stream_idle_seconds is None:
            stream_idle_seconds = timeout_seconds
        for name, value in [
            ("timeout_seconds", timeout_seconds),
            ("stream_idle_seconds", stream_idle_seconds),
            ("stream_max_seconds", stream_max_seconds),
        ]:
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, not {value}")
        self.app = app
        self.timeout_seconds = timeout_seconds
        self.stream_idle_seconds = stream_idle_seconds
        self.stream_max_seconds = stream_max_seconds
        self.tick = min(0.1, timeout_seconds / 10, stream_idle_seconds / 10)
        self.logger = logging.getLogger(logger)
        self._sweeper: _Sweeper | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        response = tracker(send)  # the outer middleware's, when there is one
        loop = get_running_loop()
        sweeper = self._sweeper
        if sweeper is None or sweeper.loop is not loop:
            # One per event loop: tests run each client in a loop of its own.
            sweeper = self._sweeper = _Sweeper(loop, self)
        task: asyncio.Task[object] = current_task(loop)  # type: ignore[assignment]
        inflight, expired = sweeper.inflight, sweeper.expired
        arrived = monotonic()
        inflight[task] = (arrived + self.timeout_seconds, response)
        if sweeper.handle is None:
            sweeper.handle = loop.call_later(self.tick, sweeper.sweep)
        try:
            await self.app(scope, receive, response.send)
        except CancelledError:
            # Ours only if we cancelled it and nobody else did since (a server shutdown, say).
            if task not in expired or task.uncancel():
                raise
        else:
            if not expired or task not in expired:
                return
            # The app swallowed our cancellation: rebalance it for asyncio.timeout() above.
            task.uncancel()
            if response.status is None:
                return
        finally:
            del inflight[task]
            if expired:
                expired.discard(task)
        method, path = scope["method"], scope["path"]
        if response.status is not None:
            self._cut(response, monotonic() - arrived, method, path)
        extra = {"method": method, "path": path, "timeout_seconds": self.timeout_seconds}
        self.logger.warning("request deadline exceeded", extra=extra)
        detail = "Gateway Timeout: request deadline exceeded"
        await send_json(response.send, 504, {"detail": detail, "request_id": REQUEST_ID.get()})

    def _cut(self, response: ResponseTracker, seconds: float, method: str, path: str) -> NoReturn:
        extra: dict[str, object] = {"method": method, "path": path, "status": response.status}
        extra["seconds"] = round(seconds, 3)
        if monotonic() - response.sent_at > self.stream_idle_seconds:
            reason, extra["stream_idle_seconds"] = "silent too long", self.stream_idle_seconds
        else:
            reason, extra["stream_max_seconds"] = "too long", self.stream_max_seconds
        self.logger.warning("response stream cut: %s", reason, extra=extra)
        raise DeadlineExceeded(f"{method} {path}: response stream cut, {reason}")
