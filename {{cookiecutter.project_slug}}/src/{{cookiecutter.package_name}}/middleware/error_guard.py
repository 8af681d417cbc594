"""Turn an unhandled exception into a JSON 500 that carries the request id, and log it.

Depends on Starlette's ASGI types, response.py (the shared send wrapper, which tells whether
the response has started) and ``REQUEST_ID`` from request_id.py, which must run outside this
middleware (so does the access log, which then records the 500).

Starlette's own last-resort handler sits outside every user middleware, so its 500 would
lack the headers our middleware add (the request id). This guard answers itself instead. The
traceback goes to the log with the request id; the body never holds it, unless ``debug`` is
on, which settings.py refuses in production.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import TYPE_CHECKING

from .request_id import REQUEST_ID
from .response import ResponseTracker, tracker

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

_HEADERS = [(b"content-type", b"application/json")]


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

        # The outer middleware's tracker when there is one (the default stack); inline rather
        # than tracker(send), since this runs on every request.
        response = getattr(send, "__self__", None)
        if type(response) is not ResponseTracker:
            response = tracker(send)
        try:
            await self.app(scope, receive, response.send)
        except Exception as exc:
            self.logger.exception(
                "unhandled exception", extra={"method": scope["method"], "path": scope["path"]}
            )
            if response.status is not None:
                # Too late for a 500: re-raise so the server closes the connection and the
                # client sees a truncated response rather than a complete-looking one.
                raise
            await self._answer(response.send, exc)

    async def _answer(self, send: Send, exc: Exception) -> None:
        payload = {"detail": "Internal Server Error", "request_id": REQUEST_ID.get()}
        if self.debug:
            payload["traceback"] = "".join(traceback.format_exception(exc))
        body = json.dumps(payload).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [*_HEADERS, (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
