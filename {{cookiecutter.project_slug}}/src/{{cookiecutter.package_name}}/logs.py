"""The application's logging, configured in one place: JSON lines, or text for people.

Depends on context.py, tracing.py and ``serving_stack.JsonFormatter`` (the
one JSON contract of the stack). Why: {{ "README.md" if cookiecutter.layout == "serving-only" else "docs/app.md" }}, Logs."""

import logging
import sys
import time
from typing import TextIO

from serving_stack import JsonFormatter as StackJsonFormatter
from serving_stack import extra_fields

from .context import REQUEST_ID
from .middleware.deadline import DeadlineExceeded
from .tracing import current_trace_ids


class JsonFormatter(StackJsonFormatter):
    """The stack's one JSON formatter, reading the app's request id and trace ids per record."""

    def __init__(self) -> None:
        super().__init__(request_id=REQUEST_ID, trace_ids=current_trace_ids)


class HumanFormatter(logging.Formatter):
    """``12:00:00.123 INFO  logger: message key=value ...`` for a developer's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{clock}.{int(record.msecs):03d} {record.levelname:<5} {record.name}: "
        line += record.getMessage()
        fields = extra_fields(record)
        request_id = fields.pop("request_id", None) or REQUEST_ID.get()
        if request_id is not None:
            fields["request_id"] = request_id
        if fields:
            line += " " + " ".join(f"{key}={value}" for key, value in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class CutStreamFilter(logging.Filter):
    """Drops the server's error record (a traceback) of a stream the deadline cut on purpose:
    raising is how a stream is aborted, and the deadline said why in one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], DeadlineExceeded))


class _Handler(logging.StreamHandler[TextIO]):
    """The one handler this module installs, recognisable so a second call replaces it. Its
    emit writes a line in one write, then flushes: several workers' lines never interleave."""


def configure_logging(level: str = "info", *, human: bool = False) -> None:
    """Send every record at ``level`` or above to standard output, as JSON or as text. Safe to
    call again: the handler is replaced, never stacked. The server's loggers keep its own."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
        old.close()
    handler = _Handler(sys.stdout)
    handler.setFormatter(HumanFormatter() if human else JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    server = logging.getLogger("uvicorn.error")  # uvicorn's "Exception in ASGI application"
    if not any(isinstance(each, CutStreamFilter) for each in server.filters):
        server.addFilter(CutStreamFilter())
