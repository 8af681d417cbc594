"""The worker's guard around any app: an exception raised after the whole response was sent
is logged, not passed on to uvicorn, which would close a connection nginx has already pooled
(a 502 for the next request: README.md's design notes). One before the response ends still
goes to uvicorn: it answers 500 with `Connection: close`, or cuts the started response."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# uvicorn's own logger for the app's exceptions (the stack's JSON lines, as gunicorn's).
logger = logging.getLogger("uvicorn.error")


class ResponseGuard:
    """Pure ASGI: HTTP responses tracked to their last body message; other scopes untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        complete = False

        async def send_tracked(message: Message) -> None:
            nonlocal complete
            await send(message)
            body = message["type"] == "http.response.body"
            complete = complete or (body and not message.get("more_body", False))

        try:
            await self.app(scope, receive, send_tracked)
        except Exception:
            if not complete:
                raise
            logger.exception("Exception in ASGI application after its response was sent")
