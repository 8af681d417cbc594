"""Logging (logs.py): the JSON line contract, the development format, configuring once."""

import json
import logging
import re
import sys

import pytest
from serving_stack import CONTRACT_KEYS

from {{ cookiecutter.package_name }}.context import REQUEST_ID
from {{ cookiecutter.package_name }}.logs import (
    CutStreamFilter,
    HumanFormatter,
    JsonFormatter,
    configure_logging,
)
from {{ cookiecutter.package_name }}.middleware.deadline import DeadlineExceeded


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
        protected = CONTRACT_KEYS - {"message", "request_id"}
        spoofed = dict.fromkeys(protected, "spoof")
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
def test_configure_writes_each_record_once_at_the_level_but_a_cut_streams_traceback(
    capsys: pytest.CaptureFixture[str], *, human: bool
) -> None:
    """Configured twice, one line per record at the level and one filter: uvicorn's traceback of
    a stream the deadline cut is not written, any other is; the server's handlers are kept."""
    server = logging.getLogger("uvicorn.error")
    server_handler = logging.NullHandler()
    server.addHandler(server_handler)
    configure_logging("info", human=human)
    configure_logging("warning", human=human)
    assert server_handler in server.handlers
    server.removeHandler(server_handler)
    assert sum(isinstance(each, CutStreamFilter) for each in server.filters) == 1
    logging.getLogger("tests.out").info("hidden")
    logging.getLogger("tests.out").warning("shown")
    for error in (DeadlineExceeded("GET /events: response stream cut"), RuntimeError("boom")):
        server.error("Exception in ASGI application\n", exc_info=(type(error), error, None))

    lines = capsys.readouterr().out.splitlines()
    if human:
        [shown, failed, _, exception] = lines
        assert shown.endswith(" WARNING tests.out: shown")
        assert failed.endswith(" ERROR uvicorn.error: Exception in ASGI application")
        assert exception == "RuntimeError: boom"
    else:
        [shown, failed] = [json.loads(line) for line in lines]
        assert shown["message"] == "shown"
        assert "RuntimeError: boom" in failed["exception"]
