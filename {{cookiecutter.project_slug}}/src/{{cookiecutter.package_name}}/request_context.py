"""The current request's id, for anything that runs inside a request: logs, errors, answers.

Standard library only, and importing nothing of this package: the request id middleware sets
it (middleware/request_id.py), the log formatter (logs.py) and the middleware inside read it,
so imports point one way and logging never depends on the middleware.
"""

from contextvars import ContextVar

# None outside a request. Set for the whole request, so log lines from handlers, the access
# log and the error guard all carry the same id.
REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
