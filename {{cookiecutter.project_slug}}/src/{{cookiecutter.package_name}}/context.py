"""The current request's id: middleware/request_id.py sets it, logs and errors read it. Standard
library only and importing nothing of this package, so logging never depends on middleware."""

from contextvars import ContextVar

# None outside a request; set for the whole request, so every line of it carries the same id.
REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
