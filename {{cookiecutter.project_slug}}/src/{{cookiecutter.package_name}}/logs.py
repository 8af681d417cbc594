"""The application's logging, configured in one place: JSON lines, or text for people.

Depends on request_context.py, tracing.py and ``{{ cookiecutter.package_name }}_stack.jsonlog`` (the
one JSON contract of the stack). Why the access record is built by hand: {{ "README.md" if cookiecutter.layout == "serving-only" else "docs/app.md" }}, Logs."""

import logging
import os
import sys
import time
from typing import Any, TextIO

from {{ cookiecutter.package_name }}_stack.jsonlog import AccessRecord, extra_fields
from {{ cookiecutter.package_name }}_stack.jsonlog import JsonFormatter as StackJsonFormatter

from .request_context import REQUEST_ID
from .tracing import current_trace_ids

# Per logger name, the attributes no request changes; cleared in a forked child (a new pid).
_access_templates: dict[str, dict[str, Any]] = {}
os.register_at_fork(after_in_child=_access_templates.clear)


def access_record(  # noqa: PLR0913, PLR0917 (six contract fields, positional: hot path)
    logger: str,
    method: str,
    path: str,
    status: int,
    duration_ms: float,
    request_id: str | None,
    client: str | None,
) -> AccessRecord:
    """Make the access record for one request, at INFO, timestamped now."""
    template = _access_templates.get(logger)
    if template is None:
        blank = logging.LogRecord(logger, logging.INFO, "", 0, "", (), None)
        template = _access_templates[logger] = {**blank.__dict__, "taskName": None}
    record = AccessRecord.__new__(AccessRecord)
    fields = record.__dict__
    fields.update(template)
    now = time.time()
    fields["created"] = now
    fields["msecs"] = (now - int(now)) * 1000.0
    fields["relativeCreated"] = template["relativeCreated"] + (now - template["created"]) * 1e3
    fields["msg"] = f"{method} {path} {status}"
    fields["request_id"] = request_id
    fields["method"] = method
    fields["path"] = path
    fields["status"] = status
    fields["duration_ms"] = duration_ms
    fields["client"] = client
    return record


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
