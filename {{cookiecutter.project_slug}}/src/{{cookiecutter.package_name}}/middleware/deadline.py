"""Bound each HTTP request's total time: past the deadline, cancel it and answer 504.

Nothing else bounds an async request (gunicorn's ``timeout`` watches a blocked loop only). One
sweeper per event loop, not a timer per request, checks every ``tick``: a request ends between
``timeout_seconds`` and ``timeout_seconds + tick`` ({{ "README.md" if cookiecutter.layout == "serving-only" else "docs/app.md" }}, Deadline, also on threads
and started responses). request_id.py must run outside this."""

import asyncio
import logging
from asyncio import CancelledError, current_task, get_running_loop
from time import monotonic

from starlette.types import ASGIApp, Receive, Scope, Send

from .request_id import REQUEST_ID
from .response import send_json, tracker


class DeadlineExceeded(Exception):  # noqa: N818 (names what happened, like TimeoutError)
    """The deadline passed after the response had started: the response must be aborted."""


class _Sweeper:
    """The in-flight requests of one event loop, and the one timer that expires them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float) -> None:
        self.loop = loop
        self.tick = tick
        # task -> monotonic() deadline (a C call, unlike loop.time()); insertion order is
        # deadline order, as every request has the same timeout.
        self.inflight: dict[asyncio.Task[object], float] = {}
        # The tasks this sweeper cancelled, until their request ends (rare: usually empty).
        self.expired: set[asyncio.Task[object]] = set()
        self.handle: asyncio.TimerHandle | None = None

    def sweep(self) -> None:
        now = monotonic()
        for task, deadline in self.inflight.items():
            if deadline > now:
                break
            # A task someone else is already cancelling (a server shutdown) is theirs.
            if task not in self.expired and not task.cancelling():
                self.expired.add(task)
                task.cancel()
        self.handle = self.loop.call_later(self.tick, self.sweep) if self.inflight else None


class DeadlineMiddleware:
    def __init__(self, app: ASGIApp, *, timeout_seconds: float, logger: str = __name__) -> None:
        if timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, not {timeout_seconds}")
        self.app = app
        self.timeout_seconds = timeout_seconds
        self.tick = min(0.1, timeout_seconds / 10)
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
            sweeper = self._sweeper = _Sweeper(loop, self.tick)
        task: asyncio.Task[object] = current_task(loop)  # type: ignore[assignment]
        inflight, expired = sweeper.inflight, sweeper.expired
        inflight[task] = monotonic() + self.timeout_seconds
        if sweeper.handle is None:
            sweeper.handle = loop.call_later(self.tick, sweeper.sweep)
        try:
            await self.app(scope, receive, response.send)
        except CancelledError:
            # Ours only if we cancelled it and nobody else did since (a server shutdown, say).
            if task not in expired or task.uncancel():
                raise
        else:
            if expired and task in expired:
                # The app swallowed our cancellation: rebalance it for asyncio.timeout() above.
                task.uncancel()
            return
        finally:
            del inflight[task]
            if expired:
                expired.discard(task)
        started = response.status is not None
        method, path = scope["method"], scope["path"]
        extra = {"method": method, "path": path, "timeout_seconds": self.timeout_seconds}
        extra["response_started"] = started
        self.logger.warning("request deadline exceeded", extra=extra)
        if started:
            raise DeadlineExceeded(
                f"{method} {path} ran past {self.timeout_seconds} s after its response had started"
            )
        detail = "Gateway Timeout: request deadline exceeded"
        await send_json(response.send, 504, {"detail": detail, "request_id": REQUEST_ID.get()})
