"""The application's logging, configured in one place: JSON lines, or text for people.

Inputs: the level and the format, passed by the application at start (main.py reads them
from settings). Output: standard output, one line per record. Depends on the standard
library and on ``REQUEST_ID`` (middleware/request_id.py). Named ``logs`` so it never shadows
the standard library's ``logging``.

The JSON contract (shared with gunicorn's and the process runner's logs): keys in the order
``time`` (UTC, RFC 3339 with milliseconds and ``Z``), ``level`` (lowercase), ``logger``,
``message``, ``request_id`` when known, ``trace_id`` and ``span_id`` inside a traced request
(tracing.py), then the record's extra fields, then ``exception``.

The access log writes a record per request, so its record is on the hot path: it was a
fifth of a small request's instructions with ``LogRecord()`` and a generic JSON formatter
(measured). So ``access_record()`` copies a template made once per process, and the JSON
formatter renders an ``AccessRecord`` with one %-format of C-escaped strings. Other records
take the generic path: strings escaped in C, the timestamp's seconds formatted once per
second, and only the record's tail searched for extra fields.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from itertools import islice
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, TextIO

from .middleware.request_id import REQUEST_ID
from .tracing import current_trace_ids

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

_BLANK_RECORD = logging.LogRecord("", 0, "", 0, "", (), None)
# LogRecord.__init__ sets these first, always in this order; ``extra=`` attributes follow.
_RECORD_ATTRS = len(_BLANK_RECORD.__dict__)
# Set later by formatters (ours never do; others, pytest's for one, do).
_STANDARD = frozenset({*_BLANK_RECORD.__dict__, "message", "asctime", "taskName"})
# Extra fields with these names would repeat a key of the contract: they get a prefix.
_CONTRACT_KEYS = frozenset(
    {"time", "level", "logger", "message", "request_id", "trace_id", "span_id", "exception"}
)
_LEVELS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}

# JSON string with everything outside printable ASCII escaped: safe for any log pipeline.
_quote = encode_basestring_ascii
# ".000Z" to ".999Z": an index instead of formatting milliseconds on every record.
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))
# Field names are few in practice; the bound keeps generated names from growing the cache.
_MAX_CACHED_KEYS = 256


# One access line. Literal text between the %s is JSON already; each value is escaped in C.
_ACCESS_LINE = (
    '%s%s","level":"%s","logger":%s,"message":%s%s,'
    '"method":%s,"path":%s,"status":%d,"duration_ms":%r,"client":%s}'
)


class AccessRecord(logging.LogRecord):
    """A request's access-log record: every LogRecord attribute, plus the access fields.

    ``method``, ``path``, ``status``, ``duration_ms``, ``request_id`` and ``client``; any
    handler or formatter can use it like any record. Make one with ``access_record()``.
    """


# Per logger name, the attributes that do not change from one request to the next. Cleared
# in a forked child (gunicorn forks workers), where the process id differs.
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


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """Return what the caller passed in ``extra=``, in the order it was given."""
    items: Iterable[tuple[str, Any]] = record.__dict__.items()
    if type(record) is logging.LogRecord:
        items = islice(items, _RECORD_ATTRS, None)
    return {k: v for k, v in items if k not in _STANDARD}


def _bool(value: bool) -> str:  # noqa: FBT001 (a renderer, called with the value alone)
    return "true" if value else "false"


def _null(_: None) -> str:
    return "null"


def _trace_ids() -> str:
    # Inside a traced request: the ids that find this line's trace in the tracing backend.
    # Formatters run in the caller's context, so the current span is the request's.
    ids = current_trace_ids()
    return "" if ids is None else f',"trace_id":"{ids[0]}","span_id":"{ids[1]}"'


class JsonFormatter(logging.Formatter):
    """One JSON object per record, keys in the contract's order."""

    def __init__(self) -> None:
        super().__init__()
        # For values that are not plain str/int/float/bool/None; default=str never raises.
        self._encode = json.JSONEncoder(separators=(",", ":"), default=str).encode
        # Exact types only: subclasses (enums, say) go through the encoder, as json would.
        self._render: dict[type, Callable[[Any], str]] = {
            str: _quote,
            int: int.__repr__,
            float: self._float,
            bool: _bool,
            type(None): _null,
        }
        # Key prefixes ``,"name":`` rendered once per field name.
        self._keys: dict[str, str] = {}
        # ('{"time":"2026-01-01T00:00:00', that second): one strftime per second, one
        # tuple replaced whole so threads never pair a second with another's text.
        self._second: tuple[str, int] = ("", -1)

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        head, cached = self._second
        if second != cached:
            head = '{"time":"' + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (head, second)
        fields = record.__dict__
        if type(record) is AccessRecord:
            request_id = fields["request_id"]
            client = fields["client"]
            return _ACCESS_LINE % (
                head,
                _MILLIS[int(record.msecs)],
                _LEVELS.get(record.levelno) or record.levelname.lower(),
                _quote(record.name),
                _quote(record.getMessage()),
                ("" if request_id is None else ',"request_id":' + _quote(request_id))
                + _trace_ids(),
                _quote(fields["method"]),
                _quote(fields["path"]),
                fields["status"],
                fields["duration_ms"],
                "null" if client is None else _quote(client),
            )
        request_id = fields.get("request_id") or REQUEST_ID.get()
        parts = [
            head,
            _MILLIS[int(record.msecs)],
            '","level":"',
            _LEVELS.get(record.levelno) or record.levelname.lower(),
            '","logger":',
            _quote(record.name),
            ',"message":',
            _quote(record.getMessage()),
        ]
        if request_id is not None:
            parts += (',"request_id":', self._value(request_id))
        parts.append(_trace_ids())
        items: Iterable[tuple[str, Any]] = fields.items()
        if type(record) is logging.LogRecord:
            # LogRecord.__init__ sets its attributes first: extras are the tail.
            items = islice(items, _RECORD_ATTRS, None)
        for key, value in items:
            if key in _STANDARD or key == "request_id":
                continue
            parts += (self._keys.get(key) or self._key(key), self._value(value))
        if record.exc_info:
            parts += (',"exception":', _quote(self.formatException(record.exc_info)))
        elif record.exc_text:
            parts += (',"exception":', _quote(record.exc_text))
        parts.append("}")
        return "".join(parts)

    def _value(self, value: object) -> str:
        render = self._render.get(type(value))
        return render(value) if render is not None else self._encode(value)

    def _float(self, value: float) -> str:
        # json writes NaN and Infinity, which are not JSON; the encoder's default=str
        # path is no better, so quote them.
        return float.__repr__(value) if math.isfinite(value) else _quote(repr(value))

    def _key(self, key: str) -> str:
        # Extras named like a contract key would repeat it: prefix them instead.
        name = "extra_" + key if key in _CONTRACT_KEYS else key
        rendered = "," + _quote(name) + ":"
        if len(self._keys) < _MAX_CACHED_KEYS:
            self._keys[key] = rendered
        return rendered


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
    """The one handler this module installs, recognisable so a second call replaces it."""

    def emit(self, record: logging.LogRecord) -> None:
        # StreamHandler.emit, minus a second lock round-trip for the flush: one write and
        # one flush per line, so lines from several workers never interleave in a pipe.
        try:
            self.stream.write(self.format(record) + "\n")
            self.stream.flush()
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 (logging's own contract: report, never raise)
            self.handleError(record)


def configure_logging(level: str = "info", *, human: bool = False) -> None:
    """Send every record at ``level`` or above to standard output, as JSON or as text.

    Safe to call again (tests build many applications): the previous handler is replaced,
    never stacked, so each record is written once. The server's own loggers (gunicorn's,
    uvicorn's) keep the handlers the server gave them and do not propagate here, so the
    server's configuration (deploy/gunicorn.conf.py, or uvicorn's) decides their format.
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
        old.close()
    handler = _Handler(sys.stdout)
    handler.setFormatter(HumanFormatter() if human else JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
