"""Logging (logs.py): the JSON line contract with the request id, the development format,
configuring once, and the access record's fast path.

Needs logs.py and the stack's formatter (``{{ cookiecutter.package_name }}_stack.jsonlog``) only. The formatter's
exhaustive edge cases (every value type, nginx's and gunicorn's lines) are the template's:
its tests/test_log_format.py runs them against a bake.
"""

import json
import logging
import os
import re
import sys

import pytest

from {{ cookiecutter.package_name }} import logs
from {{ cookiecutter.package_name }}.logs import (
    HumanFormatter,
    JsonFormatter,
    access_record,
    configure_logging,
)
from {{ cookiecutter.package_name }}.request_context import REQUEST_ID
from {{ cookiecutter.package_name }}_stack.jsonlog import CONTRACT_KEYS

ACCESS = ("GET", '/a "b"/é', 404, 1.25, "rid-1", "203.0.113.7")


def record(message: str = "hello", *, extra: dict[str, object] | None = None) -> logging.LogRecord:
    logger = logging.getLogger("tests.logs")
    info = sys.exc_info() if sys.exc_info()[0] else None
    return logger.makeRecord(logger.name, logging.INFO, __file__, 1, message, (), info, extra=extra)


def as_json(log_record: logging.LogRecord) -> dict[str, object]:
    """The record as the service writes it: one ASCII line of JSON."""
    line = JsonFormatter().format(log_record)
    assert "\n" not in line
    assert line.isascii()
    parsed: dict[str, object] = json.loads(line)
    return parsed


def test_a_json_line_follows_the_contract() -> None:
    """time (UTC, ms), level, logger, message, request_id from the context, then the extras
    in order, any value JSON cannot hold as a string, and the traceback last."""
    token = REQUEST_ID.set("abc123")
    try:
        raise ValueError("boom")  # noqa: TRY301
    except ValueError:
        fields = as_json(record('naïve "x"\n', extra={"zeta": 1, "nan": float("nan")}))
    finally:
        REQUEST_ID.reset(token)
    assert list(fields) == [
        "time", "level", "logger", "message", "request_id", "zeta", "nan", "exception",
    ]  # fmt: skip
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(fields["time"]))
    assert (fields["level"], fields["logger"]) == ("info", "tests.logs")
    assert fields["request_id"] == "abc123"
    assert (fields["message"], fields["zeta"], fields["nan"]) == ('naïve "x"\n', 1, "nan")
    assert "ValueError: boom" in str(fields["exception"])
    assert "request_id" not in as_json(record())  # outside a request: no key at all


def test_no_extra_field_overwrites_a_contract_key() -> None:
    """Each contract key given as an extra is written with an ``extra_`` prefix instead."""
    extra: dict[str, object] = dict.fromkeys(CONTRACT_KEYS - {"message", "request_id"}, "spoof")
    fields = as_json(record("real message", extra=extra))
    assert fields["message"] == "real message"
    assert "spoof" not in (fields["time"], fields["level"], fields["logger"])
    assert all(fields[f"extra_{key}"] == "spoof" for key in extra)


def test_human_lines_are_text_with_the_traceback_after() -> None:
    """Development: time, level, logger, message, key=value, request id; then the traceback."""
    token = REQUEST_ID.set("rid")
    try:
        raise KeyError("k")  # noqa: TRY301
    except KeyError:
        lines = HumanFormatter().format(record("started", extra={"port": 8000})).splitlines()
    finally:
        REQUEST_ID.reset(token)
    pattern = r"\d\d:\d\d:\d\d\.\d{3} INFO  tests\.logs: started port=8000 request_id=rid"
    assert re.fullmatch(pattern, lines[0])
    assert (lines[1], lines[-1]) == ("Traceback (most recent call last):", "KeyError: 'k'")


@pytest.mark.parametrize("human", [False, True])
def test_configure_writes_each_record_once_at_the_level(
    capsys: pytest.CaptureFixture[str], *, human: bool
) -> None:
    """Twice configured, still one line per record, on stdout, below the level dropped, as
    JSON or text; the server's own loggers keep their handlers."""
    server_handler = logging.NullHandler()
    logging.getLogger("uvicorn.error").addHandler(server_handler)
    try:
        configure_logging("info", human=human)
        configure_logging("warning", human=human)
        assert server_handler in logging.getLogger("uvicorn.error").handlers
    finally:
        logging.getLogger("uvicorn.error").removeHandler(server_handler)
    logging.getLogger("tests.out").info("hidden")
    logging.getLogger("tests.out").warning("shown")
    [line] = capsys.readouterr().out.splitlines()
    if human:
        assert line.endswith(" WARNING tests.out: shown")
    else:
        assert json.loads(line)["message"] == "shown"


def test_the_access_record_renders_like_any_record() -> None:
    """The fast path writes what the generic path writes, %-formatters find every attribute,
    and each record has its own time and, after a fork, the child's process id."""
    fast = access_record("svc.access", *ACCESS)
    keys = ("method", "path", "status", "duration_ms", "request_id", "client")
    slow = record('GET /a "b"/é 404', extra=dict(zip(keys, ACCESS, strict=True)))
    slow.name, slow.created, slow.msecs = fast.name, fast.created, fast.msecs
    assert JsonFormatter().format(fast) == JsonFormatter().format(slow)
    text = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(process)d %(message)s")
    assert text.format(fast).endswith(f'INFO svc.access {os.getpid()} GET /a "b"/é 404')
    assert access_record("svc.access", *ACCESS).created >= fast.created
    bare = as_json(access_record("svc.access", "GET", "/", 200, 0.5, None, None))
    assert ("request_id" not in bare, bare["client"]) == (True, None)


def test_access_templates_are_rebuilt_after_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked worker's records carry its own process id, not its parent's."""
    before = access_record("svc.fork", *ACCESS)
    monkeypatch.setattr(os, "getpid", lambda: -2)
    logs._access_templates.clear()  # what the fork hook does in the child
    assert before.process != -2
    assert access_record("svc.fork", *ACCESS).process == -2
