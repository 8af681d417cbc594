"""Turn an unhandled exception into a JSON 500 that carries the request id, and log it.

Starlette's own 500 comes from outside every user middleware, without our headers; so this
guard answers itself. The traceback goes to the log and the span, never to the body unless
``debug`` (refused in production). request_id.py must run outside this."""

import logging
import traceback

from opentelemetry import trace
from starlette.types import ASGIApp, Receive, Scope, Send

from {{ cookiecutter.package_name }}.context import REQUEST_ID

from .response import send_json, tracker


class ErrorGuardMiddleware:
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
            # FastAPI's telemetry would never see it (this guard answers): record it here.
            trace.get_current_span().record_exception(exc)
            if response.status is not None:
                # Too late for a 500: the server aborts, the client sees a truncated response.
                raise
            payload = {"detail": "Internal Server Error", "request_id": REQUEST_ID.get()}
            if self.debug:
                payload["traceback"] = "".join(traceback.format_exception(exc))
            await send_json(response.send, 500, payload)
