"""The one send wrapper of a request, shared by every middleware that watches the response,
and ``send_json``, the whole-response answer of the error guard and the deadline.

Depends on Starlette's ASGI types and json only. The request id, access log, deadline and
error guard all need something from the response on its way out: a header added, its status,
whether it has started. Each wrapping ``send`` on its own cost about 4,000 instructions per
request (two coroutines per response, measured by the template's cost gate, valgrind's
cachegrind), more than all the rest of its work. So the outermost of them wraps ``send`` once
in a ``ResponseTracker`` and passes it inward; the inner ones find it as their ``send`` and
use it instead of wrapping again (``tracker(send)``). Used alone, each makes its own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from starlette.types import Message, Send


class ResponseTracker:
    """Records the response's status and adds ``headers`` to its start; ``send`` is the wrapper.

    Make one with ``tracker(send)`` and pass its bound ``send`` inward. No ``__init__``: the
    class attributes are the defaults, which makes creating one, once per request, cheaper.
    A bound method rather than ``__call__``: calling an instance costs more than calling a
    method (measured, about 1,000 instructions per message).
    """

    inner: Send
    # None until http.response.start has gone through: the response has not started.
    status: int | None = None
    # Appended to the response's own headers, e.g. the request id. Replace, never mutate:
    # this default is shared.
    headers: tuple[tuple[bytes, bytes], ...] = ()

    def send(self, message: Message) -> Awaitable[None]:
        # A plain method returning the inner send's awaitable: no coroutine of its own, which
        # halves what a wrapper costs per message.
        if message["type"] == "http.response.start":
            self.status = message["status"]
            if self.headers:
                # A new list: the one in the message may belong to the response object.
                message["headers"] = [*message.get("headers", ()), *self.headers]
        return self.inner(message)


def tracker(send: Send) -> ResponseTracker:
    """The request's tracker: the one ``send`` belongs to when an outer middleware made it,
    else a new one.

    Only a tracker met directly is reused: behind another middleware's own send wrapper the
    tracker would miss what that wrapper sends, so a new one is made below it.
    """
    owner = getattr(send, "__self__", None)
    if type(owner) is ResponseTracker:
        return owner
    made = ResponseTracker()
    made.inner = send
    return made


async def send_json(send: Send, status: int, payload: dict[str, object]) -> None:
    """Answer with ``payload`` as the whole JSON response (the error guard's 500, the 504)."""
    body = json.dumps(payload).encode()
    length = str(len(body)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", length)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
