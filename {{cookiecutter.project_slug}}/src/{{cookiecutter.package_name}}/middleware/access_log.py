"""Write one structured log line per HTTP request, after the response is done.

Fields: ``method``, ``path`` (no query string: it often carries tokens), ``status``,
``duration_ms``, ``request_id`` (request_id.py must run outside this), ``client``
{%- if cookiecutter.auth == "oidc" %},
``subject`` (a verified token's ``sub``, which auth/dependencies.py leaves in the request's
state; never the token){% endif %}."""

import logging
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from {{ cookiecutter.package_name }}.context import REQUEST_ID

from .response import tracker


class AccessLogMiddleware:
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
            # isEnabledFor is cached by logging: no fields are built when the level hides us.
            if self.logger.isEnabledFor(logging.INFO):
                status = 500 if response.status is None else response.status
                client = scope.get("client")
                extra = {
                    "request_id": REQUEST_ID.get(),
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": round((time.perf_counter() - start) * 1000.0, 2),
                    # None over a unix socket unless the server trusts X-Forwarded-For.
                    "client": client[0] if client else None,
{%- if cookiecutter.auth == "oidc" %}
                    "subject": scope.get("state", {}).get("subject"),
{%- endif %}
                }
                self.logger.info("%s %s %d", scope["method"], scope["path"], status, extra=extra)
