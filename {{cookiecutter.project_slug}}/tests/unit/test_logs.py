"""Logging (logs.py): the JSON line contract, the development format, configuring once, the
access record's fast path. Needs logs.py and the stack's jsonlog (edge cases: the template's)."""

import json
import logging
import os
import re
import sys

import pytest

from {{ cookiecutter.package_name }} import logs
from {{ cookiecutter.package_name }}.logs import HumanFormatter, JsonFormatter, access_record, configure_logging
from {{ cookiecutter.package_name }}.request_context import REQUEST_ID
from {{ cookiecutter.package_name }}_stack.jsonlog import CONTRACT_KEYS

ACCESS = ("GET", '/a "b"/é', 404, 1.25, "rid-1", "203.0.113.7")


def record(message: str = "hello", **extra: object) -> logging.LogRecord:
    """A record as logger.info(message, extra=extra) makes it, with the exception if any."""
    info = sys.exc_info() if sys.exc_info()[0] else None
    return logging.getLogger("t").makeRecord("t", 20, __file__, 1, message, (), info, extra=extra)


def test_a_json_line_follows_the_contract_and_a_human_line_reads_as_text() -> None:
    """JSON: one ASCII line, the contract's keys, extras in order, traceback last; or text."""
    token = REQUEST_ID.set("abc123")
    try:
        raise ValueError("boom")  # noqa: TRY301
    except ValueError:
        spoofed = dict.fromkeys(CONTRACT_KEYS - {"message", "request_id"}, "spoof")
        line = JsonFormatter().format(record('naïve "x"\n', zeta=1, nan=float("nan"), **spoofed))
        human = HumanFormatter().format(record("started", port=8000)).splitlines()
    finally:
        REQUEST_ID.reset(token)
    fields = json.loads(line)
    assert ("\n" in line, line.isascii()) == (False, True)
    assert list(fields)[:7] == ["time", "level", "logger", "message", "request_id", "zeta", "nan"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", fields["time"])
    assert (fields["level"], fields["message"]) == ("info", 'naïve "x"\n')
    assert fields["request_id"] == "abc123"
    assert (fields["nan"], list(fields)[-1]) == ("nan", "exception")
    assert all(fields[f"extra_{key}"] == "spoof" for key in spoofed)
    assert "ValueError: boom" in fields["exception"]
    assert "request_id" not in json.loads(JsonFormatter().format(record()))
    pattern = r"\d\d:\d\d:\d\d\.\d{3} INFO  t: started port=8000 request_id=abc123"
    assert re.fullmatch(pattern, human[0])
    assert (human[1], human[-1]) == ("Traceback (most recent call last):", "ValueError: boom")


@pytest.mark.parametrize("human", [False, True])
def test_configure_writes_each_record_once_at_the_level(
    capsys: pytest.CaptureFixture[str], *, human: bool
) -> None:
    """Configured twice, one line per record at the level; the server's handlers are kept."""
    server_handler = logging.NullHandler()
    logging.getLogger("uvicorn.error").addHandler(server_handler)
    configure_logging("info", human=human)
    configure_logging("warning", human=human)
    assert server_handler in logging.getLogger("uvicorn.error").handlers
    logging.getLogger("uvicorn.error").removeHandler(server_handler)
    logging.getLogger("tests.out").info("hidden")
    logging.getLogger("tests.out").warning("shown")
    [line] = capsys.readouterr().out.splitlines()
    if human:
        assert line.endswith(" WARNING tests.out: shown")
    else:
        assert json.loads(line)["message"] == "shown"


def test_the_access_record_renders_like_any_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path writes what the generic path writes, its own time and pid after a fork."""
    fast = access_record("t", *ACCESS)
    keys = ("method", "path", "status", "duration_ms", "request_id", "client")
    slow = record('GET /a "b"/é 404', **dict(zip(keys, ACCESS, strict=True)))
    slow.created, slow.msecs = fast.created, fast.msecs
    assert JsonFormatter().format(fast) == JsonFormatter().format(slow)
    text = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(process)d %(message)s")
    assert text.format(fast).endswith(f'INFO t {os.getpid()} GET /a "b"/é 404')
    assert access_record("t", *ACCESS).created >= fast.created
    monkeypatch.setattr(os, "getpid", lambda: -2)
    logs._access_templates.clear()  # what the fork hook does in the child
    assert fast.process != -2
    assert access_record("t", *ACCESS).process == -2
