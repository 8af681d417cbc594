"""The one send wrapper of a request, shared by every middleware that watches the response,
and ``send_json``, the whole-response answer of the error guard and the deadline. A wrapper
per middleware cost ~4,000 instructions a request ({{ "README.md" if cookiecutter.layout == "serving-only" else "docs/app.md" }}, One send wrapper)."""

import json
from collections.abc import Awaitable, Iterable, Mapping
from time import monotonic

from starlette.types import Message, Send

# On every server-sent event stream: nginx's proxy buffering held a 64 KiB event back until the
# next one came (measured live); routes need not say it{% if cookiecutter.layout == "service" %} (docs/streaming.md){% endif %}.
_UNBUFFERED = (b"x-accel-buffering", b"no")


class ResponseTracker:
    """Records the response's status and times, adds ``headers`` to its start (and, to a
    server-sent event stream's, ``X-Accel-Buffering: no``); ``send`` is the wrapper.
    Made by ``tracker(send)``; no ``__init__`` and no ``__call__``, as both cost more."""

    inner: Send
    # None until http.response.start has gone through: the response has not started.
    status: int | None = None
    # Appended to the response's own headers (the request id). Replace, never mutate: shared.
    headers: tuple[tuple[bytes, bytes], ...] = ()
    # monotonic() when the response last sent a chunk with more to come (0.0: none yet): what
    # bounds a response past its deadline (a stream) is the gap between them (deadline.py).
    sent_at: float = 0.0

    def send(self, message: Message) -> Awaitable[None]:
        # Returns the inner send's awaitable: no coroutine of its own halves a wrapper's cost.
        if message["type"] == "http.response.start":
            self.status = message["status"]
            headers = message.get("headers", ())
            # A new list: the one in the message may belong to the response object. Only a
            # response without a length first (Starlette's fixed ones start with it) may be
            # an event stream: the common case costs one comparison.
            if headers and headers[0][0] != b"content-length" and _event_stream(headers):
                message["headers"] = [*headers, *self.headers, _UNBUFFERED]
            elif self.headers:
                message["headers"] = [*headers, *self.headers]
        elif message.get("more_body"):
            self.sent_at = monotonic()
        return self.inner(message)


def _event_stream(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"content-type":
            return value.startswith(b"text/event-stream")
    return False


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
    body = json.dumps(payload).encode()
    length = str(len(body)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", length)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
