"""What the service promises, checked through the live stack (client -> nginx -> socket -> app).

Needs the stack conftest.py starts (nginx installed). What this project owns (its app and
its nginx locations) is proven here; the heavier proofs (load, fuzzing, reloads, faults, hostile
and slow clients) and the stack's own (its metrics port) run against this project from the
template: `./scripts/battery <this directory>` (docs/security.md says which test proves what)."""

import contextlib
import itertools
import json
import re

import pytest
from websockets.exceptions import InvalidStatus

from .conftest import (
    STREAM_EVENTS,
    STREAM_IDLE_SECONDS,
    STREAM_SIZES,
    WEBSOCKETS_PER_CLIENT,
    LiveStack,
    Stopped,
    exchange,
    get,
    read_stream,
    wait_for,
    websocket,
)

pytestmark = pytest.mark.live


def _wire(line: bytes, *headers: bytes) -> bytes:
    return b"\r\n".join([line, *headers, b"", b""])


HOST = b"Host: localhost"
# A probe from anywhere: any Host (a pod's IP), a client's X-Forwarded-For that must not count.
PROBE = (b"Host: 10.1.2.3", b"X-Forwarded-For: 6.6.6.6")
# The app's answers, each in its access line, and nginx's refusals, which never reach it.
ANSWERS = {
    "the app's /livez": (_wire(b"GET /livez HTTP/1.1", *PROBE), 200),
    "the app's /readyz": (_wire(b"GET /readyz HTTP/1.1", *PROBE), 200),
    "the app's 404": (_wire(b"GET /no-such-page HTTP/1.1", HOST), 404),
    # Not /livez: a probe is GET or HEAD, any other method nginx's own 405 (nginx.conf).
    "the app's 405": (_wire(b"DELETE /_tests/boom HTTP/1.1", HOST), 405),
    "the app's 500": (_wire(b"GET /_tests/boom HTTP/1.1", HOST), 500),
    # Slower than the deadline (DEADLINE_SECONDS): the app's 504, before nginx's timeout.
    "the app's 504": (_wire(b"GET /_tests/slow?seconds=30 HTTP/1.1", HOST), 504),
    # Not /livez: the probes take no body (nginx.conf), this is the 1 MiB of any route.
    "body over 1 MiB": (_wire(b"POST / HTTP/1.1", HOST, b"Content-Length: 2097152"), 413),
    "9 KB URI": (_wire(b"GET /" + b"a" * 9000 + b" HTTP/1.1", HOST), 414),
    "9 KB header": (_wire(b"GET /livez HTTP/1.1", HOST, b"X-Big: " + b"a" * 9000), 400),
    "Host outside ALLOWED_HOSTS": (_wire(b"GET / HTTP/1.1", b"Host: evil.example"), 400),
    "unknown method": (_wire(b"TRACE /livez HTTP/1.1", HOST), 405),
}


@pytest.mark.parametrize("case", ANSWERS)
def test_answers_carry_the_request_id_the_app_logged(stack: LiveStack, case: str) -> None:
    """nginx's request id and security headers on every answer, and an error is JSON with that
    id, whoever wrote it. The app's answers (its handlers', its error guard's 500, its
    deadline's 504) are in its access line with their status and the real client address, not
    a spoofed one; nginx's refusals (oversized, foreign-Host or odd-method requests) never
    reach the app. The probes answer any Host."""
    wire, expected = ANSWERS[case]

    status, headers, body = exchange(stack.port, wire)

    request_id = headers.get("x-request-id", "")
    assert status == expected, body[:300]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id), headers
    assert (headers["x-content-type-options"], headers["x-frame-options"]) == ("nosniff", "DENY")
    assert headers["referrer-policy"] == "no-referrer"
    if status >= 400:
        assert headers["content-type"].startswith("application/json"), headers
        error = json.loads(body)
        assert (bool(error["detail"]), error["request_id"]) == (True, request_id), error
    if case.startswith("the app's"):
        wait_for(lambda: request_id in stack.access_lines(), 10, "the app's access line")
        line = stack.access_lines()[request_id]
        assert (line["status"], line["client"]) == (expected, "127.0.0.1")
    else:  # nginx's own: once a later request's line is in, this one's would be too
        later = get(stack.port, "/livez")[1]["x-request-id"]
        wait_for(lambda: later in stack.access_lines(), 10, "a later request's access line")
        assert request_id not in stack.access_lines()


def test_a_websocket_echoes_through_nginx_with_the_request_id(stack: LiveStack) -> None:
    """A WebSocket route as FastAPI's docs write it answers through nginx; the handshake
    carries nginx's request id, the app's log lines during the session carry it too, and
    nginx's access line says 101 (an upgrade) once the session ends."""
    with websocket(stack.port) as session:
        session.send("hello")
        assert session.recv(timeout=10) == "hello"
        assert session.response is not None  # set once the handshake succeeded
        request_id = session.response.headers["X-Request-ID"]

    assert re.fullmatch(r"[0-9a-f]{32}", request_id), request_id

    def lines(logger: str) -> list[dict[str, object]]:
        return stack.log_lines(logger=logger, request_id=request_id)

    wait_for(lambda: bool(lines("nginx.access")), 10, "nginx's access line of the session")
    assert [line["message"] for line in lines("live_app")] == ["websocket opened"]
    assert lines("nginx.access")[0]["status"] == 101
    page = get(stack.metrics_port, "/metrics")[2].decode()
    assert 'websocket_session_duration_seconds_count{code="1000"}' in page


def test_websockets_per_client_are_capped_at_nginx(stack: LiveStack) -> None:
    """One address holds at most WEBSOCKETS_PER_CLIENT open sessions: the next handshake gets
    nginx's 503; once one closes, a new one opens."""
    with contextlib.ExitStack() as sessions:
        held = [sessions.enter_context(websocket(stack.port)) for _ in range(WEBSOCKETS_PER_CLIENT)]
        with pytest.raises(InvalidStatus) as refused:
            websocket(stack.port)
        assert refused.value.response.status_code == 503
        held[0].close()
        with websocket(stack.port) as again:
            again.send("back")
            assert again.recv(timeout=10) == "back"


def test_a_stream_silent_too_long_is_cut_visibly_with_one_warning(stack: LiveStack) -> None:
    """A stream that sends nothing for STREAM_IDLE_TIMEOUT_SECONDS is cut: the client gets the
    events sent before, then no clean end of the body; the app logs one warning, no error (nginx
    says "upstream prematurely closed connection" in its own line, at its level)."""

    def app_errors() -> list[dict[str, object]]:
        return [line for line in stack.log_lines(level="error") if line["logger"] != "nginx.error"]

    errors_before = app_errors()

    stream = read_stream(
        stack.port, f"/_tests/events?tokens=2&interval=0.1&stall={STREAM_IDLE_SECONDS * 30}"
    )

    assert [number for number, _, _ in stream.events] == [0, 1]
    assert not stream.complete

    def warnings() -> list[dict[str, object]]:
        return stack.log_lines(request_id=stream.request_id, level="warning")

    wait_for(lambda: bool(warnings()), 10, "the app's warning about the cut stream")
    later = get(stack.port, "/livez")[1]["x-request-id"]
    wait_for(lambda: later in stack.access_lines(), 10, "a later request's access line")
    assert len(warnings()) == 1, warnings()
    assert "stream" in str(warnings()[0]["message"])
    assert app_errors() == errors_before


def test_sigterm_lets_streams_finish_closes_websockets_and_exits_0(stopped: Stopped) -> None:
    """SIGTERM with event streams and a WebSocket open (a stack of its own, stopped in the
    background from the session's start: conftest.py): each stream, longer than twice the
    request deadline (which bounds the time to the first byte only), arrives whole, event by
    event, each before the app sent the next (never held back by nginx, small events or 64 KiB
    ones) and never gzipped though the client asked; the WebSocket gets a close frame (1012,
    service restart) within nginx's drain, not a dropped connection; the supervisor exits 0, and
    every line is JSON. Plain requests in flight: the battery's test_faults.py."""
    for size, stream in zip(STREAM_SIZES, stopped.streams, strict=True):
        assert stream.complete, f"the stream of {size}-byte events was cut"
        assert [number for number, _, _ in stream.events] == list(range(STREAM_EVENTS)), size
        assert "content-encoding" not in stream.headers, stream.headers
        assert stream.headers["content-type"].startswith("text/event-stream")
        for (_, _, arrived), (_, next_sent, _) in itertools.pairwise(stream.events):
            assert arrived < next_sent, (size, stream.events)
    assert stopped.close_code is not None, "no close frame: the connection was dropped"
    assert stopped.close_code in (1001, 1012)
    assert stopped.exit_code == 0
    for raw in stopped.log_path.read_bytes().splitlines():
        assert list(json.loads(raw))[:4] == ["time", "level", "logger", "message"], raw
