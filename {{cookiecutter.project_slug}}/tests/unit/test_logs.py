"""Logging: the JSON line contract, the development format, and configuring once."""

import json
import logging
import os
import re
import sys

import pytest
from {{ cookiecutter.package_name }}_stack import jsonlog as stack_log

from {{ cookiecutter.package_name }} import logs
from {{ cookiecutter.package_name }}.logs import (
    HumanFormatter,
    JsonFormatter,
    access_record,
    configure_logging,
    extra_fields,
)
from {{ cookiecutter.package_name }}.request_context import REQUEST_ID

RFC3339_UTC_MS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def make_record(
    message: str = "hello",
    *,
    level: int = logging.INFO,
    extra: dict[str, object] | None = None,
    exc_info: bool = False,
) -> logging.LogRecord:
    logger = logging.getLogger("tests.logs")
    info = sys.exc_info() if exc_info else None
    return logger.makeRecord(logger.name, level, __file__, 1, message, (), info, extra=extra)


def as_json(record: logging.LogRecord) -> dict[str, object]:
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed: dict[str, object] = json.loads(line)
    return parsed


def test_json_keys_come_in_contract_order() -> None:
    """time, level, logger, message, request_id, then the extras in the order given."""
    token = REQUEST_ID.set("abc123")
    try:
        record = make_record(extra={"zeta": 1, "alpha": "a"})
        keys = list(as_json(record))
    finally:
        REQUEST_ID.reset(token)
    assert keys == ["time", "level", "logger", "message", "request_id", "zeta", "alpha"]


def test_json_time_is_utc_rfc3339_with_milliseconds() -> None:
    """The timestamp is UTC with a ``Z`` and exactly three decimals."""
    record = make_record()
    record.created, record.msecs = 0.25, 250.0
    assert as_json(record)["time"] == "1970-01-01T00:00:00.250Z"
    assert RFC3339_UTC_MS.fullmatch(str(as_json(make_record())["time"]))


def test_json_time_follows_each_second() -> None:
    """The per-second cache never reuses one second's text for the next."""
    formatter = JsonFormatter()
    first, second = make_record(), make_record()
    first.created, first.msecs = 59.0, 0.0
    second.created, second.msecs = 60.999, 999.0
    assert json.loads(formatter.format(first))["time"] == "1970-01-01T00:00:59.000Z"
    assert json.loads(formatter.format(second))["time"] == "1970-01-01T00:01:00.999Z"


def test_json_level_is_lowercase() -> None:
    """Levels are written in lower case, custom levels included."""
    assert as_json(make_record(level=logging.WARNING))["level"] == "warning"
    assert as_json(make_record(level=25))["level"] == "level 25"


def test_json_message_is_formatted_and_escaped() -> None:
    """%-arguments are applied, and quotes, newlines and non-ASCII stay inside one line."""
    record = logging.getLogger("t").makeRecord("t", logging.INFO, "", 0, "a %s", ('"x"\n',), None)
    assert as_json(record)["message"] == 'a "x"\n'
    line = JsonFormatter().format(make_record("naïve ✓"))
    assert line.isascii()
    assert json.loads(line)["message"] == "naïve ✓"


def test_json_without_request_id_omits_the_key() -> None:
    """Outside a request there is no request_id key at all."""
    assert "request_id" not in as_json(make_record())


def test_json_request_id_on_the_record_wins() -> None:
    """A record carrying its own request_id (the access log's) keeps it."""
    token = REQUEST_ID.set("from-context")
    try:
        fields = as_json(make_record(extra={"request_id": "on-record"}))
    finally:
        REQUEST_ID.reset(token)
    assert fields["request_id"] == "on-record"


def test_json_renders_every_value_type() -> None:
    """Plain values stay JSON types; anything else becomes its string; NaN is quoted."""
    marker = object()
    fields = as_json(
        make_record(
            extra={
                "s": "x",
                "i": 3,
                "f": 1.5,
                "b": False,
                "n": None,
                "nan": float("nan"),
                "l": [1, "a"],
                "o": marker,
            }
        )
    )
    assert fields["s"] == "x"
    assert fields["i"] == 3
    assert fields["f"] == 1.5
    assert fields["b"] is False
    assert fields["n"] is None
    assert fields["nan"] == "nan"
    assert fields["l"] == [1, "a"]
    assert fields["o"] == str(marker)


def test_json_extras_never_overwrite_contract_keys() -> None:
    """An extra named ``time`` or ``level`` is prefixed instead of repeating the key."""
    fields = as_json(make_record(extra={"time": "later", "level": 9}))
    assert RFC3339_UTC_MS.fullmatch(str(fields["time"]))
    assert fields["level"] == "info"
    assert fields["extra_time"] == "later"
    assert fields["extra_level"] == 9


def test_json_exception_holds_the_traceback() -> None:
    """A logged exception's traceback is one escaped string under ``exception``."""
    try:
        raise ValueError("boom")  # noqa: TRY301
    except ValueError:
        record = make_record(level=logging.ERROR, exc_info=True)
    fields = as_json(record)
    assert list(fields)[-1] == "exception"
    assert "Traceback" in str(fields["exception"])
    assert "ValueError: boom" in str(fields["exception"])


def test_extra_fields_of_a_record_subclass() -> None:
    """Records from a custom factory are searched whole, so their extras still appear."""

    class Custom(logging.LogRecord):
        pass

    record = Custom("n", logging.INFO, "", 0, "m", (), None)
    record.user = "u"
    assert extra_fields(record) == {"user": "u"}
    assert as_json(record)["user"] == "u"


def test_extra_fields_skip_attributes_other_formatters_add() -> None:
    """``message`` and ``asctime``, set by stdlib formatters, are not extras."""
    record = make_record(extra={"k": 1})
    logging.Formatter("%(asctime)s %(message)s").format(record)
    assert extra_fields(record) == {"k": 1}


def test_human_format_is_one_readable_line() -> None:
    """Development lines read as text: time, level, logger, message, then key=value."""
    token = REQUEST_ID.set("rid")
    try:
        line = HumanFormatter().format(make_record("started", extra={"port": 8000}))
    finally:
        REQUEST_ID.reset(token)
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d\.\d{3} INFO  tests\.logs: started port=8000 request_id=rid", line
    )


def test_human_format_appends_the_traceback() -> None:
    """In development the traceback follows the line, as Python prints it."""
    try:
        raise KeyError("k")  # noqa: TRY301
    except KeyError:
        record = make_record(level=logging.ERROR, exc_info=True)
    lines = HumanFormatter().format(record).splitlines()
    assert lines[1].startswith("Traceback")
    assert lines[-1] == "KeyError: 'k'"


def test_configure_writes_json_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    """By default each record becomes one JSON line on standard output."""
    configure_logging("info")
    logging.getLogger("tests.out").info("ready", extra={"port": 1})
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert json.loads(out[0])["message"] == "ready"


def test_configure_human_writes_text(capsys: pytest.CaptureFixture[str]) -> None:
    """With ``human=True`` the same record is a text line."""
    configure_logging("info", human=True)
    logging.getLogger("tests.out").info("ready")
    out = capsys.readouterr().out
    assert " INFO  tests.out: ready" in out
    assert not out.startswith("{")


def test_configure_twice_writes_each_record_once(capsys: pytest.CaptureFixture[str]) -> None:
    """Reconfiguring replaces the handler rather than adding a second one."""
    configure_logging("info")
    configure_logging("info")
    logging.getLogger("tests.out").info("once")
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_configure_applies_the_level(capsys: pytest.CaptureFixture[str]) -> None:
    """Records below the configured level are dropped."""
    configure_logging("warning")
    logging.getLogger("tests.out").info("hidden")
    logging.getLogger("tests.out").warning("shown")
    out = capsys.readouterr().out
    assert "hidden" not in out
    assert "shown" in out


def test_configure_leaves_server_loggers_alone() -> None:
    """gunicorn's and uvicorn's loggers keep the handlers their server configured."""
    server_handler = logging.NullHandler()
    server_logger = logging.getLogger("uvicorn.error")
    server_logger.addHandler(server_handler)
    try:
        configure_logging("info")
        assert server_handler in server_logger.handlers
    finally:
        server_logger.removeHandler(server_handler)


ACCESS = ("GET", '/a "b"/é', 404, 1.25, "rid-1", "203.0.113.7")


def test_access_records_render_like_any_record() -> None:
    """The access fast path writes exactly what the generic path writes for those fields."""
    fast = access_record("svc.access", *ACCESS)
    method, path, status, duration_ms, request_id, client = ACCESS
    slow = make_record(
        f"{method} {path} {status}",
        extra={
            "request_id": request_id,
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": duration_ms,
            "client": client,
        },
    )
    slow.name, slow.created, slow.msecs = fast.name, fast.created, fast.msecs
    formatter = JsonFormatter()
    assert formatter.format(fast) == formatter.format(slow)
    assert json.loads(formatter.format(fast))["path"] == path


def test_access_records_without_id_or_client() -> None:
    """Outside the request id middleware and over a unix socket: no id key, client null."""
    line = as_json(access_record("svc.access", "GET", "/", 200, 0.5, None, None))
    assert "request_id" not in line
    assert line["client"] is None


def test_access_records_work_with_any_formatter() -> None:
    """Standard %-style formatters find every attribute they expect on an access record."""
    record = access_record("svc.access", *ACCESS)
    text = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(process)d %(message)s")
    assert text.format(record).endswith(f'INFO svc.access {os.getpid()} GET /a "b"/é 404')
    assert "method=GET" in HumanFormatter().format(record)


def test_access_templates_are_rebuilt_after_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked worker's records carry its own process id, not its parent's."""
    before = access_record("svc.fork", *ACCESS)
    monkeypatch.setattr(os, "getpid", lambda: -2)
    # What the fork hook does in the child.
    logs._access_templates.clear()
    assert before.process != -2
    assert access_record("svc.fork", *ACCESS).process == -2


# --- hostile values: every line stays one valid JSON object -----------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_json_survives_values_json_cannot_hold() -> None:
    """NaN anywhere, bytes, cycles, odd keys and objects that refuse str() still give JSON."""
    cycle: list[object] = []
    cycle.append(cycle)
    fields = as_json(
        make_record(
            extra={
                "inf": float("-inf"),
                "nested_nan": [1.0, float("nan")],
                "raw": b"\xff\x00ok",
                "cycle": cycle,
                "tuple_keys": {(1, 2): "x"},
                "broken": Unprintable(),
            }
        )
    )
    assert fields["inf"] == "-inf"
    assert fields["nested_nan"] == "[1.0, nan]"
    assert fields["raw"] == "b'\\xff\\x00ok'"
    assert fields["cycle"] == "[[...]]"
    assert fields["tuple_keys"] == "{(1, 2): 'x'}"
    assert fields["broken"] == "<unprintable Unprintable>"


def test_json_survives_a_bad_format_and_odd_names() -> None:
    """Arguments that do not fit the message, and non-ASCII or lone-surrogate text."""
    logger = logging.getLogger("t")
    record = logger.makeRecord("t\udcff", logging.INFO, "", 0, "%d items", ("many",), None)
    record.__dict__["naïve\n"] = "\udcfe"
    line = JsonFormatter().format(record)
    assert line.isascii()
    fields = json.loads(line)
    assert fields["message"] == "%d items ('many',)"
    assert fields["logger"] == "t\udcff"
    assert fields["naïve\n"] == "\udcfe"


def test_every_contract_key_is_protected() -> None:
    """No extra field can overwrite a key of the contract: each is written with a prefix."""
    extra: dict[str, object] = dict.fromkeys(stack_log.CONTRACT_KEYS, "spoofed")
    token = REQUEST_ID.set("real-id")
    try:
        del extra["request_id"]  # a record's own request_id is the access log's: it wins
        del extra["message"]  # the logging module itself refuses this one
        record = make_record("real message", extra=extra)
        fields = as_json(record)
    finally:
        REQUEST_ID.reset(token)
    assert fields["message"] == "real message"
    assert fields["request_id"] == "real-id"
    assert fields["level"] == "info"
    assert fields["extra_time"] == fields["extra_logger"] == fields["extra_exception"] == "spoofed"
    assert fields["extra_level"] == "spoofed"
    assert "spoofed" not in (fields["time"], fields["logger"])


def test_the_runner_and_gunicorn_write_the_same_shape() -> None:
    """The runner's lines come from the same formatter, protected keys included."""
    line = json.loads(stack_log.json_line("serve", "warning", "hi", level="x", name="n", pid=3))
    assert list(line) == ["time", "level", "logger", "message", "extra_level", "extra_name", "pid"]
    assert (line["level"], line["logger"], line["message"]) == ("warning", "serve", "hi")


def test_nginx_error_lines_become_json() -> None:
    """nginx's error log line: its time, level, pid, connection and context become fields."""
    raw = (
        b"2026/01/02 03:04:05 [warn] 12#12: *7 a client request body is buffered to a temporary"
        b' file /run/x, client: 127.0.0.1, server: _, request: "POST /a\xff HTTP/1.1", host: "h"\n'
    )
    line = stack_log.nginx_error_line(raw)
    assert line.isascii()
    fields = json.loads(line)
    assert fields["time"] == "2026-01-02T03:04:05.000Z"
    assert (fields["level"], fields["logger"]) == ("warning", "nginx.error")
    assert fields["message"] == "a client request body is buffered to a temporary file /run/x"
    assert (fields["pid"], fields["connection"]) == (12, 7)
    assert fields["client"] == "127.0.0.1"
    assert fields["request"] == "POST /a\\xff HTTP/1.1"
    assert fields["host"] == "h"


@pytest.mark.parametrize(
    ("raw", "level", "message"),
    [
        (b'nginx: [emerg] unknown directive "x" in /c', "critical", 'unknown directive "x" in /c'),
        (b"something else \xfe", "error", "something else \\xfe"),
    ],
)
def test_nginx_lines_of_other_shapes_become_json(raw: bytes, level: str, message: str) -> None:
    """nginx's early messages and any unexpected text still give one JSON line."""
    fields = json.loads(stack_log.nginx_error_line(raw))
    assert (fields["level"], fields["logger"], fields["message"]) == (level, "nginx.error", message)


def test_access_lines_are_made_valid_utf8() -> None:
    """Valid lines pass untouched; a non-UTF-8 byte becomes a \\udcXX escape, nothing lost."""
    good = b'{"a":"\xc3\xa9"}\n{"b":1}'
    assert stack_log.access_lines(good) == good + b"\n"
    bad = b'{"ua":"Mozilla \xff"}\n{"b":1}\nnot json \xfe'
    out = stack_log.access_lines(bad).decode("utf-8").splitlines()
    assert json.loads(out[0]) == {"ua": "Mozilla \udcff"}
    assert json.loads(out[1]) == {"b": 1}
    assert json.loads(out[2])["message"] == "not json \\xfe"
    assert json.loads(out[0])["ua"].encode("utf-8", "surrogateescape") == b"Mozilla \xff"
