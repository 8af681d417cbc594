"""Give every HTTP request an id, echo it in the response, and expose it to logs.

Input: ``X-Request-ID`` (nginx sends ``$request_id``), kept only when well-formed, so a client
cannot inject quotes, line breaks or megabytes into every log line; else a fresh id."""

import os
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from {{ cookiecutter.package_name }}.context import REQUEST_ID

from .response import tracker

# Letters, digits and "._-" only: covers nginx's hex ids, UUIDs and most tracing ids.
_MAX_LENGTH = 128
_WELL_FORMED = re.compile(rb"[A-Za-z0-9._-]{1,128}")


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp, *, header: str = "x-request-id") -> None:
        self.app = app
        # ASGI header names arrive lowercased as bytes: compare with what we precompute here.
        self.header = header.lower().encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await self._websocket(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return

        value = None
        wanted = self.header
        for name, incoming in scope["headers"]:
            if name == wanted:
                # isalnum() first: a C check that passes nginx's hex ids at a third of the
                # regular expression's cost; UUIDs and tracing ids fall through to it.
                if len(incoming) <= _MAX_LENGTH and (
                    incoming.isalnum() or _WELL_FORMED.fullmatch(incoming)
                ):
                    value = incoming
                break
        if value is None:
            request_id = os.urandom(16).hex()  # nginx's $request_id format
            value = request_id.encode("latin-1")
        else:
            request_id = value.decode("latin-1")
        response = tracker(send)  # the outer middleware's, when there is one
        response.headers += ((wanted, value),)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, response.send)
        finally:
            REQUEST_ID.reset(token)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket session: its handshake's id in the logs and on the accept, as for HTTP."""
        value = _well_formed(scope, self.header)
        if value is None:
            value = os.urandom(16).hex().encode("latin-1")

        async def send_with_id(message: Message) -> None:
            if message["type"] == "websocket.accept":
                message["headers"] = [*message.get("headers", ()), (self.header, value)]
            await send(message)

        token = REQUEST_ID.set(value.decode("latin-1"))
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)


def _well_formed(scope: Scope, wanted: bytes) -> bytes | None:
    """The incoming id when well-formed (the HTTP path inlines this: it costs a call less)."""
    for name, incoming in scope["headers"]:
        if name == wanted:
            if len(incoming) <= _MAX_LENGTH and _WELL_FORMED.fullmatch(incoming):
                return bytes(incoming)
            return None
    return None
