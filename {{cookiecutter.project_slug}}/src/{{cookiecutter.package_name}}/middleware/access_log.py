"""Write one structured log line per HTTP request, after the response is done.

Fields (the project's access-log contract): ``method``, ``path``, ``status``,
``duration_ms``, ``request_id``, ``client``. Depends on Starlette's ASGI types, on
``access_record()`` from logs.py, on response.py (the shared send wrapper, which records the
status) and on ``REQUEST_ID`` from request_id.py, which must run outside this middleware.

The path is logged without the query string, which often carries tokens. This runs on
every request, so the record comes from ``access_record()``, which skips what ``Logger.info``
and ``LogRecord()`` would redo each time (the caller's stack frame, thread and process
names); handlers, filters and levels apply as to any record.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from {{ cookiecutter.package_name }}.logs import access_record

from .request_id import REQUEST_ID
from .response import tracker

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send


class AccessLogMiddleware:
    """Log method, path, status, duration, request id and client of each request."""

    def __init__(self, app: ASGIApp, *, logger: str = "access") -> None:
        self.app = app
        self.logger = logging.getLogger(logger)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        start = time.perf_counter()
        response = tracker(send)  # the outer middleware's, when there is one
        try:
            await self.app(scope, receive, response.send)
        finally:
            logger = self.logger
            # isEnabledFor is cached by the logging module: cheap when the level hides us.
            if logger.isEnabledFor(logging.INFO):
                client = scope.get("client")
                logger.handle(
                    access_record(
                        logger.name,
                        scope["method"],
                        scope["path"],
                        # 500 if the app died before answering.
                        500 if response.status is None else response.status,
                        round((time.perf_counter() - start) * 1000.0, 2),
                        REQUEST_ID.get(),
                        # None over a unix socket unless the server trusts X-Forwarded-For.
                        client[0] if client else None,
                    )
                )
