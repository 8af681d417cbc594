"""The shipped middlewares rewritten as BaseHTTPMiddleware: the anti-pattern, measured.

BaseHTTPMiddleware is what `@app.middleware("http")` builds and what FastAPI's docs show. It
runs the rest of the app in a separate task and re-wraps every response in a streaming
response, which costs throughput (the seed measured -54 % with one pass-through) and breaks
contextvars propagation from inner to outer code. Generated projects ban the import (ruff
TID251); it lives here, in the template's experiments, because measuring that cost is its
purpose.

Each class does the work of its twin in the baked package's `middleware` the way people
write it with `call_next`, in main.py's order, on the same app (lab/apps.py), so
the difference in the benchmark is the middleware style. The baked package is named by
$EXPERIMENTS_PACKAGE (experiments/__main__.py sets it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from typing import TYPE_CHECKING

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import JSONResponse, Response

from experiments.package import package_module

ACCESS_LOGGER = package_module("main").ACCESS_LOGGER
_request_id = package_module("middleware.request_id")
REQUEST_ID = _request_id.REQUEST_ID

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.requests import Request
    from starlette.types import ASGIApp


# The same rule as request_id.py: letters, digits and "._-", at most 128.
_WELL_FORMED = re.compile(r"[A-Za-z0-9._-]{1,128}")


class RequestIdBaseHTTP(BaseHTTPMiddleware):
    """Keep a well-formed X-Request-ID or make one, expose it to logs, echo it."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        incoming = request.headers.get("x-request-id", "")
        well_formed = incoming and _WELL_FORMED.fullmatch(incoming)
        # A new id as request_id.py makes one: nginx's $request_id format.
        request_id = incoming if well_formed else os.urandom(16).hex()
        token = REQUEST_ID.set(request_id)
        try:
            response = await call_next(request)
        finally:
            REQUEST_ID.reset(token)
        response.headers["x-request-id"] = request_id
        return response


class AccessLogBaseHTTP(BaseHTTPMiddleware):
    """The access-log contract's line per request, through the logger's public API."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self.logger = logging.getLogger(ACCESS_LOGGER)

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        if self.logger.isEnabledFor(logging.INFO):
            method, path, status = request.method, request.url.path, response.status_code
            fields = {
                "request_id": REQUEST_ID.get(),
                "method": method,
                "path": path,
                "status": status,
                "duration_ms": round((time.perf_counter() - start) * 1000.0, 2),
                "client": request.client.host if request.client else None,
            }
            self.logger.info("%s %s %s", method, path, status, extra=fields)
        return response


class DeadlineBaseHTTP(BaseHTTPMiddleware):
    """Answer 504 past the deadline: a timer per request, as `call_next` code does it."""

    def __init__(self, app: ASGIApp, *, timeout_seconds: float) -> None:
        super().__init__(app)
        self.timeout_seconds = timeout_seconds

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        try:
            async with asyncio.timeout(self.timeout_seconds):
                return await call_next(request)
        except TimeoutError:
            return JSONResponse({"detail": "Gateway Timeout", "request_id": REQUEST_ID.get()}, 504)


class ErrorGuardBaseHTTP(BaseHTTPMiddleware):
    """Turn an exception into a JSON 500 with the request id, and log it."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        try:
            return await call_next(request)
        except Exception:
            logging.getLogger(__name__).exception("unhandled exception")
            detail = {"detail": "Internal Server Error", "request_id": REQUEST_ID.get()}
            return JSONResponse(detail, 500)


class PassthroughBaseHTTP(BaseHTTPMiddleware):
    """Does nothing but call the app: the seed's experiment (its -54 %)."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        return await call_next(request)


def add_passthrough(application: FastAPI) -> None:
    application.add_middleware(PassthroughBaseHTTP)


def add_twins(application: FastAPI) -> None:
    """Give a middleware-less copy of the shipped app the twins, in main.py's order."""
    settings = application.state.settings
    # add_middleware puts each new one outside the previous: add the innermost first.
    application.add_middleware(ErrorGuardBaseHTTP)
    application.add_middleware(DeadlineBaseHTTP, timeout_seconds=settings.request_timeout_seconds)
    if settings.access_log:
        application.add_middleware(AccessLogBaseHTTP)
    application.add_middleware(RequestIdBaseHTTP)
