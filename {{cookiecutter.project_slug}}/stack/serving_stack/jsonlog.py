"""The one JSON log-line formatter of every process (the app, gunicorn, uvicorn, the supervisor;
nginx's lines through child_lines.py): one printable-ASCII JSON object a line, keys in the
contract's order (CONTRACT_KEYS, extras before ``exception``). Standard library only."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from itertools import islice
from json.encoder import encode_basestring_ascii as _quote
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from contextvars import ContextVar

_BLANK_RECORD = logging.LogRecord("", 0, "", 0, "", (), None)
# LogRecord.__init__ sets these first, in this order; ``extra=`` attributes follow.
_RECORD_ATTRS = len(_BLANK_RECORD.__dict__)
# Set later by formatters (ours never do; others, pytest's for one, do), and uvicorn's
# ANSI-coloured duplicate of the message.
_STANDARD = frozenset({*_BLANK_RECORD.__dict__, "message", "asctime", "taskName", "color_message"})
# Extra fields with these names would repeat a key of the contract: they get a prefix.
CONTRACT_KEYS = frozenset(
    {"time", "level", "logger", "message", "request_id", "trace_id", "span_id", "exception"}
)
LEVELS = {getattr(logging, n.upper()): n for n in ("debug", "info", "warning", "error", "critical")}
# ".000Z" to ".999Z": an index instead of formatting milliseconds on every record.
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))
# NaN and Infinity refused (the fallback quotes them: json would write invalid JSON), any
# other object as its str(). Strings, as _quote: printable ASCII (DEL escaped too).
_encode = json.JSONEncoder(separators=(",", ":"), default=str, allow_nan=False).encode
# Query parameters whose values are secrets: no process logs one (README.md's design notes).
SECRET_PARAMETERS = (
    "access_token",
    "token",
    "code",
    "id_token",
    "refresh_token",
    "client_secret",
    "password",
    "api_key",
)
# One of them in a query, each character in either case or percent-encoded (access%5Ftoken):
# its value ends where a request line, a quoted URL or the query does.
_SECRET = re.compile(
    r"(?i)([?&](?:"
    + "|".join(
        "".join(f"(?:{c}|%{ord(c):02x}|%{ord(c.upper()):02x})" for c in name)
        for name in SECRET_PARAMETERS
    )
    + r"))=[^&#\s\"]*"
)


def _tail(record: logging.LogRecord) -> Iterable[tuple[str, Any]]:
    """The record's attributes, past those LogRecord.__init__ sets first when it can tell."""
    items = record.__dict__.items()
    return islice(items, _RECORD_ATTRS, None) if type(record) is logging.LogRecord else items


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """Return what the caller passed in ``extra=``, in the order it was given."""
    return {k: v for k, v in _tail(record) if k not in _STANDARD}


def render_value(value: object) -> str:
    """``value`` as JSON; what JSON cannot hold becomes a string, never invalid JSON."""
    try:
        return _encode(value)
    except Exception:  # noqa: BLE001 - NaN, a cycle, a key JSON refuses, a broken __str__
        try:
            return _quote(repr(value))
        except Exception:  # noqa: BLE001 - even repr() may raise: name the type instead
            return _quote(f"<unprintable {type(value).__name__}>")


def redact(text: str) -> str:
    """text with the value of each secret query parameter (SECRET_PARAMETERS) as REDACTED,
    its name matched case-insensitively and percent-decoded (``access%5Ftoken``)."""
    # A function, not the template "\\1=REDACTED": re 3.11 expands that in Python, slower.
    return _SECRET.sub(lambda found: found[1] + "=REDACTED", text) if "?" in text else text


class JsonFormatter(logging.Formatter):
    """One JSON object per record. ``request_id``: the context variable of the current
    request's id (a record's own ``request_id`` wins); ``trace_ids``: gives the current span's
    (trace id, span id) in hex, or None (the app passes its own of both)."""

    def __init__(
        self,
        request_id: ContextVar[str | None] | None = None,
        trace_ids: Callable[[], tuple[str, str] | None] | None = None,
    ) -> None:
        super().__init__()
        self._request_id = request_id
        self._trace_ids = trace_ids
        # ('{"time":"2026-01-01T00:00:00', that second), replaced whole: thread-safe.
        self._second: tuple[str, int] = ("", -1)

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        head, cached = self._second
        if second != cached:
            head = '{"time":"' + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (head, second)
        level = LEVELS.get(record.levelno) or str(record.levelname).lower()
        request_id = record.__dict__.get("request_id")
        if request_id is None and self._request_id is not None:
            request_id = self._request_id.get()
        parts = [head, _MILLIS[int(record.msecs)], '","level":', _quote(level), ',"logger":']
        parts += (_quote(str(record.name)), ',"message":', _quote(_message(record)))
        if request_id is not None:
            parts += (',"request_id":', render_value(request_id))
        # Run in the caller's context: inside a request, its span. Hex digits: no escaping.
        ids = None if self._trace_ids is None else self._trace_ids()
        if ids is not None:
            parts.append(f',"trace_id":"{ids[0]}","span_id":"{ids[1]}"')
        for key, value in _tail(record):
            if key in _STANDARD or key == "request_id":
                continue
            name = "extra_" + key if key in CONTRACT_KEYS else str(key)
            parts += (",", _quote(name), ":", render_value(value))
        if record.exc_info:
            parts += (',"exception":', _quote(self.formatException(record.exc_info)))
        elif record.exc_text:
            parts += (',"exception":', _quote(str(record.exc_text)))
        parts.append("}")
        return "".join(parts)


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # noqa: BLE001 - a bad %-format must not lose the line
        return f"{record.msg!s} {record.args!r}"


# --- lines of processes that do not log through Python: the supervisor relays them ---
LEVEL_NUMBERS = {name: number for number, name in LEVELS.items()}
_FORMATTER = JsonFormatter()


def json_line(
    logger: str, level: str, message: str, created: float | None = None, /, **fields: object
) -> str:
    """One formatted line, no newline; a field named like a record attribute becomes extra_*."""
    number = LEVEL_NUMBERS.get(level, logging.INFO)
    record = logging.LogRecord(logger, number, "", 0, message, None, None)
    if created is not None:
        record.created, record.msecs = created, (created - int(created)) * 1000.0
    for key, value in fields.items():
        record.__dict__["extra_" + key if key in _STANDARD else key] = value
    return _FORMATTER.format(record)


def write_line(logger: str, level: str, message: str, /, **fields: object) -> None:
    """Write one formatted line to stdout at once (the supervisor, the metrics listener)."""
    sys.stdout.write(json_line(logger, level, message, **fields) + "\n")
    sys.stdout.flush()
