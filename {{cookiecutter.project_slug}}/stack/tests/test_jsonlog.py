"""The one JSON log formatter in depth: every value type, odd names, the time cache (the
contract a service relies on: the project's tests/unit)."""

import json
import logging

from serving_stack import jsonlog


def record(
    message: str = "hello", level: int = logging.INFO, /, **extra: object
) -> logging.LogRecord:
    logger = logging.getLogger("tests.format")
    return logger.makeRecord(logger.name, level, __file__, 1, message, (), None, extra=extra)


def printable(line: str) -> bool:
    """One line of printable ASCII, DEL (0x7f) escaped too."""
    return all(" " <= char < "\x7f" for char in line)


def as_json(log_record: logging.LogRecord) -> dict[str, object]:
    line = jsonlog.JsonFormatter().format(log_record)
    assert printable(line), line
    parsed: dict[str, object] = json.loads(line)
    return parsed


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_every_value_type_is_json_or_its_string() -> None:
    """Plain values stay JSON types; NaN anywhere, bytes, cycles, odd keys, any object and
    objects that refuse str() become strings: the line stays one valid JSON object."""
    cycle: list[object] = []
    cycle.append(cycle)
    marker = object()
    cases = {  # name: (value, as written)
        "s": ("x", "x"),
        "del": ("c\x7fd", "c\x7fd"),
        "i": (3, 3),
        "f": (1.5, 1.5),
        "b": (False, False),
        "n": (None, None),
        "l": ([1, "a", "\x7f"], [1, "a", "\x7f"]),
        "nan": (float("nan"), "nan"),
        "inf": (float("-inf"), "-inf"),
        "nested_nan": ([1.0, float("nan")], "[1.0, nan]"),
        "raw": (b"\xff\x00ok", "b'\\xff\\x00ok'"),
        "cycle": (cycle, "[[...]]"),
        "tuple_keys": ({(1, 2): "x"}, "{(1, 2): 'x'}"),
        "o": (marker, str(marker)),
        "broken": (Unprintable(), "<unprintable Unprintable>"),
    }
    fields = as_json(record(**{name: value for name, (value, _) in cases.items()}))
    assert list(fields) == ["time", "level", "logger", "message", *cases]
    assert {name: fields[name] for name in cases} == {k: v for k, (_, v) in cases.items()}


def test_time_level_and_names() -> None:
    """UTC with milliseconds, the per-second cache never reused across seconds; custom levels
    named; a bad %-format, non-ASCII and lone-surrogate names still give JSON."""
    formatter = jsonlog.JsonFormatter()
    first, second = record(), record()
    first.created, first.msecs = 59.0, 0.0
    second.created, second.msecs = 60.999, 999.0
    assert json.loads(formatter.format(first))["time"] == "1970-01-01T00:00:59.000Z"
    assert json.loads(formatter.format(second))["time"] == "1970-01-01T00:01:00.999Z"
    assert as_json(record("hello", 25))["level"] == "level 25"
    odd = logging.LogRecord("t\udcff", logging.INFO, "", 0, "%d items\x7f", ("many",), None)
    odd.__dict__["naïve\n"] = "\udcfe"
    fields = as_json(odd)
    assert (fields["message"], fields["logger"]) == ("%d items\x7f ('many',)", "t\udcff")
    assert fields["naïve\n"] == "\udcfe"


def test_extra_fields_of_any_record() -> None:
    """Records from a custom factory keep their extras; attributes other formatters add
    (message, asctime) are not extras."""

    class Custom(logging.LogRecord):
        pass

    custom = Custom("n", logging.INFO, "", 0, "m", (), None)
    custom.user = "u"
    assert jsonlog.extra_fields(custom) == {"user": "u"}
    plain = record(k=1)
    logging.Formatter("%(asctime)s %(message)s").format(plain)
    assert jsonlog.extra_fields(plain) == {"k": 1}


def test_the_supervisors_lines_share_the_shape() -> None:
    """The supervisor's own lines come from the same formatter, protected keys included."""
    line = json.loads(jsonlog.json_line("supervisor", "warning", "hi", level="x", name="n", pid=3))
    assert list(line) == ["time", "level", "logger", "message", "extra_level", "extra_name", "pid"]
    assert (line["level"], line["logger"], line["message"]) == ("warning", "supervisor", "hi")
