"""Write one structured log line per HTTP request, after the response is done.

Fields (the project's access-log contract): ``method``, ``path``, ``status``,
``duration_ms``, ``request_id``, ``client``. Depends on Starlette's ASGI types and on
``REQUEST_ID`` from request_id.py, which must run outside this middleware.

The path is logged without the query string, which often carries tokens. This runs on
every request, so the record is cheap to make: ``Logger.info`` would walk the stack for the
caller and ``LogRecord()`` would look up the thread and process names each time (together
about as much as the rest of the middleware stack), so a template made once per process is
copied and the per-request values are set on the copy. Handlers, filters and levels apply
as to any record; only ``logging.setLogRecordFactory`` is not consulted.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from .request_id import REQUEST_ID

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The process id of the current process, kept up to date across fork (gunicorn forks its
# workers) without a system call per request.
_pid = os.getpid()


def _after_fork() -> None:
    global _pid  # noqa: PLW0603 (one value per process, updated by the fork hook)
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)


class AccessLogMiddleware:
    """Log method, path, status, duration, request id and client of each request."""

    def __init__(self, app: ASGIApp, *, logger: str = "access") -> None:
        self.app = app
        self.logger = logging.getLogger(logger)
        self._template: dict[str, Any] = {}
        self._template_pid = -1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        start = time.perf_counter()
        # A one-item list so the closure can set it; 500 if the app dies before answering.
        status = [500]

        async def send_with_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            # isEnabledFor is cached by the logging module: cheap when the level hides us.
            if self.logger.isEnabledFor(logging.INFO):
                duration_ms = round((time.perf_counter() - start) * 1000.0, 2)
                self.logger.handle(self._record(scope, status[0], duration_ms))

    def _record(self, scope: Scope, status: int, duration_ms: float) -> logging.LogRecord:
        if self._template_pid != _pid:
            # Once per process: a record with everything that does not change per request.
            self._template = logging.LogRecord(
                self.logger.name, logging.INFO, "", 0, "", (), None
            ).__dict__
            self._template["taskName"] = None
            self._template_pid = _pid
        template = self._template
        record: logging.LogRecord = logging.LogRecord.__new__(logging.LogRecord)
        fields = record.__dict__
        fields.update(template)
        now = time.time()
        method = scope["method"]
        path = scope["path"]
        client = scope.get("client")
        fields["created"] = now
        fields["msecs"] = (now - int(now)) * 1000.0
        fields["relativeCreated"] = template["relativeCreated"] + (now - template["created"]) * 1e3
        fields["msg"] = f"{method} {path} {status}"
        # The same attributes ``extra=`` would set, in the contract's order.
        fields["request_id"] = REQUEST_ID.get()
        fields["method"] = method
        fields["path"] = path
        fields["status"] = status
        fields["duration_ms"] = duration_ms
        # None over a unix socket unless the server trusts X-Forwarded-For from the proxy.
        fields["client"] = client[0] if client else None
        return record
