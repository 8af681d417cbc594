"""Give every HTTP request an id, echo it in the response, and expose it to logs.

Input: the ``X-Request-ID`` request header (nginx sends ``$request_id``, 32 hex characters).
Depends on Starlette's ASGI types only. Other modules read the id through ``REQUEST_ID``.

An incoming id is kept only when it is well-formed, so a client cannot inject quotes, line
breaks or megabytes into every log line; otherwise a fresh id in nginx's format is made.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

# Re-exported (`as`): the middleware inside read the id from here.
from {{ cookiecutter.package_name }}.request_context import REQUEST_ID as REQUEST_ID  # noqa: PLC0414

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Letters, digits and "._-" only: covers nginx's hex ids, UUIDs and most tracing ids.
_WELL_FORMED = re.compile(rb"[A-Za-z0-9._-]{1,128}")


def new_request_id() -> str:
    """Make an id in nginx's ``$request_id`` format: 32 random hex characters."""
    return os.urandom(16).hex()


class RequestIdMiddleware:
    """Set ``REQUEST_ID`` for each request and add it to the response headers."""

    def __init__(self, app: ASGIApp, *, header: str = "x-request-id") -> None:
        self.app = app
        # ASGI header names arrive lowercased as bytes: compare with what we precompute here.
        self.header = header.lower().encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        request_id = None
        for name, value in scope["headers"]:
            if name == self.header:
                if _WELL_FORMED.fullmatch(value):
                    request_id = value.decode("latin-1")
                break
        if request_id is None:
            request_id = new_request_id()
        header = (self.header, request_id.encode("latin-1"))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                # A new list: the one in the message may belong to the response object.
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
