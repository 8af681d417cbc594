"""nginx's error and access lines, relayed by the supervisor, as the stack's JSON lines."""

import json

import pytest

from serving_stack import child_lines, jsonlog

from .test_jsonlog import printable


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            (
                b"2026/01/02 03:04:05 [warn] 12#12: *7 a client request body is buffered to a"
                b" temporary file /run/x, client: 127.0.0.1, server: _,"
                b' request: "POST /a\xff HTTP/1.1", host: "h\x7f",'
                b' referrer: "r, client: 1.2.3.4"\n'
            ),
            {
                "time": "2026-01-02T03:04:05.000Z",
                "level": "warning",
                "message": "a client request body is buffered to a temporary file /run/x",
                "pid": 12,
                "connection": 7,
                "client": "127.0.0.1",
                "server": "_",
                "request": "POST /a\\xff HTTP/1.1",
                "host": "h\x7f",
                "referrer": "r, client: 1.2.3.4",
            },
        ),
        (
            b'nginx: [emerg] unknown directive "x" in /c',
            {"level": "critical", "message": 'unknown directive "x" in /c'},
        ),
        (b"something else \xfe\x7f", {"level": "error", "message": "something else \\xfe\x7f"}),
    ],
    ids=["error log", "early message", "anything else"],
)
def test_nginx_error_lines_become_json(raw: bytes, expected: dict[str, object]) -> None:
    """nginx's error line gives its time, level, pid, connection and context as fields (a
    client's text imitating the context, a Referer's `", client: `, stays in its field);
    early messages and unexpected text still give one JSON line."""
    line = child_lines.nginx_error_line(raw)
    assert printable(line), line
    fields = json.loads(line)
    assert fields["logger"] == "nginx.error"
    assert {key: fields.get(key) for key in expected} == expected


def test_an_access_line_that_is_not_json_becomes_one() -> None:
    """A JSON access line passes as printable ASCII (the bytes a client sent escaped in every
    live line: the battery's test_nginx_answers.py); one that is not JSON (an edited
    log_format) becomes a JSON line too."""
    out = child_lines.access_lines(b'{"b":1}\nnot json \xfe\x7f').decode("ascii")
    first, second = (json.loads(line) for line in out.splitlines())
    assert all(map(printable, out.splitlines())), out
    assert (first, second["logger"]) == ({"b": 1}, "nginx.access")
    assert second["message"] == "not json \\xfe\x7f"


@pytest.mark.parametrize(
    "value",
    [
        b"\xff" * 128,
        b'\\\\udcff \\\\u005c \\\\x \xff\\\\\xfe\\"',  # a client's own escapes beside bytes
        "\u00e9\U0001f600".encode() + b"\x7f\\u0001\\n",  # text, DEL, nginx's controls
        b"\xed\xb3\xbf\xc2A\xdc",  # an encoded surrogate, a cut sequence
        # Past U+FFFF, json's pairs end in \udc00 and \udc80: an invalid byte's escape too.
        "\U0001f400 \U0001f480".encode() + b"\xff",
    ],
    ids=["0xff", "escapes", "text", "surrogate", "astral"],
)
def test_hostile_access_lines_keep_what_a_parse_would_write(value: bytes) -> None:
    """An access line with bytes over 0x7f (nginx's escape=json passes them through) is
    rewritten in a few passes in C, never parsed: printable ASCII JSON whose strings are what
    a parse gives, each byte that is not UTF-8 as \\xff, nginx's numbers as it wrote them."""
    raw = b'{"path":"/' + value + b'","request_time":0.000,"user_agent":"' + value + b'"}'
    out = child_lines.access_lines(raw).decode("ascii")
    parsed = json.loads(raw.decode("utf-8", "surrogateescape"))["user_agent"]
    text = parsed.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    assert printable(out.removesuffix("\n")), out
    assert json.loads(out) == {"path": "/" + text, "request_time": 0.0, "user_agent": text}
    assert '"request_time":0.000,' in out


@pytest.mark.parametrize(
    ("raw", "level", "message"),
    [
        (
            b"\x1b[32mINFO\x1b[0m:     Started server process [7]\n",
            "info",
            "Started server process [7]",
        ),
        (b"ERROR:    Exception in ASGI application", "error", "Exception in ASGI application"),
        (b"Traceback (most recent call last):", "warning", "Traceback (most recent call last):"),
        (b"INFO: \x1b[1m\xff\x1b[0m", "info", "\\xff"),
        (b"info: lower case is no level", "warning", "info: lower case is no level"),
    ],
)
def test_a_stderr_line_takes_its_own_level_without_colours(
    raw: bytes, level: str, message: str
) -> None:
    """An adopted app's text logging keeps its level; colour codes never reach the log."""
    line = json.loads(child_lines.stderr_line("app.stderr", raw))
    assert (line["level"], line["message"]) == (level, message)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/a?token=s&token=t&x=1 HTTP/1.1", "/a?token=REDACTED&token=REDACTED&x=1 HTTP/1.1"),
        ("/a?ACCESS%5Ftoken=s&%61pi_key=k", "/a?ACCESS%5Ftoken=REDACTED&%61pi_key=REDACTED"),
        ("/a?code&code=&mycode=c#code=d", "/a?code&code=REDACTED&mycode=c#code=d"),
        ('"WebSocket /ws?password=' + "p" * 100_000 + '"', '"WebSocket /ws?password=REDACTED"'),
        ("/a?" + "?&=" * 100_000, "/a?" + "?&=" * 100_000),
        ("token=s, no query", "token=s, no query"),
    ],
    ids=["repeated", "percent-encoded names", "no value", "very long value", "no name", "no ?"],
)
def test_secret_query_parameters_are_redacted(text: str, expected: str) -> None:
    """Each value of a secret parameter becomes REDACTED, whatever its spelling or length."""
    assert jsonlog.redact(text) == expected


def test_an_nginx_error_line_names_no_secret() -> None:
    """The request line, referrer and upstream URL nginx appends lose their secrets, bytes that
    are not UTF-8 around them too."""
    raw = (
        b"2026/01/02 03:04:05 [error] 12#12: *7 upstream timed out, client: 127.0.0.1,"
        b' server: _, request: "GET /a?id_token=\xff\xfe&b=\xff HTTP/1.1", upstream:'
        b' "http://unix:/g.sock:/a?id_token=\xff\xfe&b=\xff", host: "h",'
        b' referrer: "https://h/?Refresh_Token=r"'
    )
    fields = json.loads(child_lines.nginx_error_line(raw))
    assert fields["request"] == "GET /a?id_token=REDACTED&b=\\xff HTTP/1.1"
    assert fields["upstream"] == "http://unix:/g.sock:/a?id_token=REDACTED&b=\\xff"
    assert fields["referrer"] == "https://h/?Refresh_Token=REDACTED"
