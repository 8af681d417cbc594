"""The one send wrapper of a request, shared by every middleware that watches the response,
and ``send_json``, the whole-response answer of the error guard and the deadline. A wrapper
per middleware cost ~4,000 instructions a request ({{ "README.md" if cookiecutter.layout == "serving-only" else "docs/app.md" }}, One send wrapper)."""

import json
from collections.abc import Awaitable, Mapping

from starlette.types import Message, Send


class ResponseTracker:
    """Records the response's status and adds ``headers`` to its start; ``send`` is the wrapper.
    Made by ``tracker(send)``; no ``__init__`` and no ``__call__``, as both cost more."""

    inner: Send
    # None until http.response.start has gone through: the response has not started.
    status: int | None = None
    # Appended to the response's own headers (the request id). Replace, never mutate: shared.
    headers: tuple[tuple[bytes, bytes], ...] = ()

    def send(self, message: Message) -> Awaitable[None]:
        # Returns the inner send's awaitable: no coroutine of its own halves a wrapper's cost.
        if message["type"] == "http.response.start":
            self.status = message["status"]
            if self.headers:
                # A new list: the one in the message may belong to the response object.
                message["headers"] = [*message.get("headers", ()), *self.headers]
        return self.inner(message)


def tracker(send: Send) -> ResponseTracker:
    """The tracker ``send`` belongs to, else a new one. Only one met directly is reused: behind
    another middleware's wrapper it would miss what that wrapper sends."""
    owner = getattr(send, "__self__", None)
    if type(owner) is ResponseTracker:
        return owner
    made = ResponseTracker()
    made.inner = send
    return made


async def send_json(send: Send, status: int, payload: Mapping[str, object]) -> None:
    """Answer with ``payload`` as the whole JSON response (the error guard's 500, the 504)."""
    body = json.dumps(payload).encode()
    length = str(len(body)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", length)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
