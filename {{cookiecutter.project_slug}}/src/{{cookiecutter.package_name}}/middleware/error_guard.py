"""Turn an unhandled exception into a JSON 500 that carries the request id, and log it.

Depends on Starlette's ASGI types, response.py (the shared send wrapper, which tells whether
the response has started) and ``REQUEST_ID`` from request_id.py, which must run outside this
middleware (so does the access log, which then records the 500).

Starlette's own last-resort handler sits outside every user middleware, so its 500 would
lack the headers our middleware add (the request id). This guard answers itself instead. The
traceback goes to the log with the request id, and to the request's span when tracing is on
(tracing.py; without it the call does nothing); the body never holds it, unless ``debug`` is
on, which settings.py refuses in production.
"""

from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING

from opentelemetry import trace

from .request_id import REQUEST_ID
from .response import send_json, tracker

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send


class ErrorGuardMiddleware:
    """Answer 500 in JSON for any exception the application lets escape."""

    def __init__(self, app: ASGIApp, *, debug: bool = False, logger: str = __name__) -> None:
        self.app = app
        self.debug = debug
        self.logger = logging.getLogger(logger)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        response = tracker(send)  # the outer middleware's, when there is one
        try:
            await self.app(scope, receive, response.send)
        except Exception as exc:
            self.logger.exception(
                "unhandled exception", extra={"method": scope["method"], "path": scope["path"]}
            )
            # FastAPI's telemetry sees exceptions only outside all user middleware, where this
            # guard has already answered: the span gets the exception (type, stack) from here.
            trace.get_current_span().record_exception(exc)
            if response.status is not None:
                # Too late for a 500: re-raise so the server closes the connection and the
                # client sees a truncated response rather than a complete-looking one.
                raise
            payload: dict[str, object] = {"detail": "Internal Server Error"}
            payload["request_id"] = REQUEST_ID.get()
            if self.debug:
                payload["traceback"] = "".join(traceback.format_exception(exc))
            await send_json(response.send, 500, payload)
