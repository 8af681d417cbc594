"""Lines the supervisor relays from processes that do not log through Python's logging, as the
stack's JSON lines (jsonlog): nginx's error and access logs, and what a child writes to stderr
outside its logging. Bytes that are not UTF-8 stay visible as \\xff (README.md, design notes)."""

from __future__ import annotations

import calendar
import re
import time
from json.encoder import encode_basestring_ascii as _quote

from .jsonlog import json_line, redact

# nginx's error log: "2026/01/02 03:04:05 [error] 12#12: *3 text, client: ..., request: ...".
_NGINX_ERROR = re.compile(
    rb"(?P<time>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(?P<level>\w+)\] (?P<pid>\d+)#\d+: "
    rb"(?:\*(?P<connection>\d+) )?(?P<text>.*)"
)
# Before its error_log is open (a bad config, say), nginx writes "nginx: [emerg] text".
_NGINX_EARLY = re.compile(rb"nginx: \[(?P<level>\w+)\] (?P<text>.*)")
# The context nginx appends to a message: ", client: 1.2.3.4, server: _, request: "GET / ..."".
_NGINX_CONTEXT = re.compile(r", (?=(?:client|server|request|upstream|host|referrer): )")
# The order nginx writes them in (ngx_http_log_error_handler); client and server always.
_NGINX_CONTEXT_ORDER = ("client", "server", "request", "upstream", "host", "referrer")
_NGINX_LEVELS = {"emerg": "critical", "alert": "critical", "crit": "critical", "error": "error"}
_NGINX_LEVELS |= {"warn": "warning", "notice": "info", "info": "info", "debug": "debug"}
# Invalid UTF-8 kept by surrogateescape (C's fast path: README.md's design notes), each byte
# then written as the \xff that backslashreplace writes.
_BYTE_ESCAPES = {0xDC00 + byte: f"\\x{byte:02x}" for byte in range(0x80, 0x100)}
# In a line json escaped: a high surrogate's escape, and an invalid byte's (surrogateescape's
# U+DC80-U+DCFF) not after one.
_HIGH_SURROGATE = re.compile(r"\\ud[89ab]")
_INVALID_BYTE = re.compile(r"(?<!\\ud[89ab][0-9a-f]{2})\\udc([89a-f][0-9a-f])")


# ANSI escape sequences (colours, cursor moves) a terminal would interpret.
_COLOURS = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
# Python logging's and uvicorn's default text format: "INFO:     Started server process".
_LEVEL_PREFIX = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")


def _text(raw: bytes) -> str:
    # Whatever bytes a client sent stay visible: invalid UTF-8 as \xff (never a lone
    # surrogate, which strict JSON readers refuse); the formatter escapes the rest to ASCII.
    text = raw.decode("utf-8", "surrogateescape")
    return text if text.isascii() else text.translate(_BYTE_ESCAPES)


def nginx_error_line(raw: bytes) -> str:
    """One line of nginx's error log (stderr) as the stack's JSON line, logger nginx.error."""
    raw = raw.rstrip(b"\r\n")
    match = _NGINX_ERROR.fullmatch(raw)
    fields: dict[str, object] = {}
    created = None
    if match:
        stamp = time.strptime(match["time"].decode("ascii"), "%Y/%m/%d %H:%M:%S")
        created = float(calendar.timegm(stamp))  # nginx runs with TZ=UTC
        fields["pid"] = int(match["pid"])
        if match["connection"]:
            fields["connection"] = int(match["connection"])
    else:
        match = _NGINX_EARLY.fullmatch(raw)
    if match is None:
        return json_line("nginx.error", "error", redact(_text(raw)))
    # The request line, referrer and upstream URL name a query: its secrets redacted.
    message, *context = _NGINX_CONTEXT.split(redact(_text(match["text"])))
    fields |= _nginx_context(context)
    level = _NGINX_LEVELS.get(match["level"].decode("ascii"), "error")
    return json_line("nginx.error", level, message, created, **fields)


def _nginx_context(items: list[str]) -> dict[str, str]:
    """The context nginx appends, in its order: a key out of that order (or again) is a client's
    text imitating it (a Referer's `", client: `), kept inside the field before it."""
    raw: dict[str, str] = {}
    last = -1
    for item in items:
        key, _, value = item.partition(": ")
        if key in _NGINX_CONTEXT_ORDER and _NGINX_CONTEXT_ORDER.index(key) > last:
            raw[key], last = value, _NGINX_CONTEXT_ORDER.index(key)
        elif raw:
            previous = _NGINX_CONTEXT_ORDER[last]
            raw[previous] += ", " + item
    return {
        key: value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value
        for key, value in raw.items()
    }


def stderr_line(logger: str, raw: bytes) -> str:
    """A line a process wrote to stderr outside its logging (a warning, a traceback) as JSON:
    at a level its own "LEVEL:" prefix names (an adopted app's text logging), else warning,
    terminal colour codes removed."""
    text = _text(_COLOURS.sub(b"", raw.rstrip(b"\r\n")))
    if match := _LEVEL_PREFIX.match(text):
        return json_line(logger, match[1].lower(), text[match.end() :])
    return json_line(logger, "warning", text)


def access_lines(block: bytes) -> bytes:
    """Lines of nginx's JSON access log (no final newline) as printable ASCII JSON lines:
    ``escape=json`` passes DEL and bytes over 0x7f through, re-encoded here as ``\\uXXXX``
    (text) or ``\\xff`` (other bytes), never lone surrogates."""
    if block.isascii() and b"\x7f" not in block:
        return block + b"\n"
    return b"".join(_access_line(line) for line in block.split(b"\n") if line.strip())


def _access_line(raw: bytes) -> bytes:
    if not raw.startswith(b"{"):  # an edited log_format's text: a JSON line of its own
        return (stderr_line("nginx.access", raw) + "\n").encode("ascii")
    # A few passes in C over the line, never a step per byte: 0xFF costs a client's line little
    # more than letters (README.md's design notes). nginx's escaped backslashes are \u005c
    # meanwhile, so a \udc is an invalid byte's (surrogateescape's U+DCxx) or, after a \ud8-\udb,
    # the second half of a character past U+FFFF, never a client's.
    text = raw.replace(b"\\\\", b"\\u005c").decode("utf-8", "surrogateescape")
    # The line as one JSON string (non-ASCII and DEL as \uXXXX), its own escapes undone.
    line = _quote(text)[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    line = _bytes_escaped(line).replace("\\u005c", "\\\\")
    return line.encode("ascii") + b"\n"


def _bytes_escaped(line: str) -> str:
    """Each invalid byte's \\udcXX as \\\\xXX; a character past U+FFFF is a pair of escapes
    whose second may be a \\udcXX too, and keeps it (a rare line: a regex, not a replace)."""
    if _HIGH_SURROGATE.search(line) is None:
        return line.replace("\\udc", "\\\\x")
    return _INVALID_BYTE.sub(r"\\\\x\1", line)
