"""What the service promises, checked through the live stack (client -> nginx -> socket -> app).

Needs the stack conftest.py starts (nginx installed). The heavier proofs (load, fuzzing,
reloads, faults, hostile and slow clients) run against this project from the template:
`./scripts/battery <this directory>` (docs/security.md says which test proves what)."""

import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from websockets.exceptions import InvalidStatus

from .conftest import (
    DEADLINE_SECONDS,
    HERE,
    STREAM_EVENTS,
    STREAM_IDLE_SECONDS,
    STREAM_SIZES,
    WEBSOCKETS_PER_CLIENT,
    LiveStack,
    Stopped,
    assert_json_error,
    exchange,
    free_port,
    get,
    read_stream,
    wait_for,
    websocket,
)

pytestmark = pytest.mark.live


@pytest.mark.parametrize("probe", ["/livez", "/readyz"])
def test_answers_carry_the_request_id_the_app_logged(stack: LiveStack, probe: str) -> None:
    """nginx's request id and security headers on the answer; the app logs that id with the
    real client address, not a spoofed one; the probes answer any Host."""
    status, headers, _ = get(stack.port, probe, "X-Forwarded-For: 6.6.6.6", host="10.1.2.3")

    assert status == 200
    assert (headers["x-content-type-options"], headers["x-frame-options"]) == ("nosniff", "DENY")
    assert headers["referrer-policy"] == "no-referrer"
    request_id = headers["x-request-id"]
    wait_for(lambda: request_id in stack.access_lines(), 10, "the app's access line")
    assert stack.access_lines()[request_id]["client"] == "127.0.0.1"


def _wire(line: bytes, *headers: bytes) -> bytes:
    return b"\r\n".join([line, *headers, b"", b""])


HOST = b"Host: localhost"
ERRORS = {
    "the app's 404": (_wire(b"GET /no-such-page HTTP/1.1", HOST), 404),
    # Not /livez: a probe is GET or HEAD, any other method nginx's own 405 (nginx.conf).
    "the app's 405": (_wire(b"DELETE /_tests/boom HTTP/1.1", HOST), 405),
    "the app's 500": (_wire(b"GET /_tests/boom HTTP/1.1", HOST), 500),
    # Not /livez: the probes take no body (nginx.conf), this is the 1 MiB of any route.
    "body over 1 MiB": (_wire(b"POST / HTTP/1.1", HOST, b"Content-Length: 2097152"), 413),
    "9 KB URI": (_wire(b"GET /" + b"a" * 9000 + b" HTTP/1.1", HOST), 414),
    "9 KB header": (_wire(b"GET /livez HTTP/1.1", HOST, b"X-Big: " + b"a" * 9000), 400),
    "Host outside ALLOWED_HOSTS": (_wire(b"GET / HTTP/1.1", b"Host: evil.example"), 400),
    "unknown method": (_wire(b"TRACE /livez HTTP/1.1", HOST), 405),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_are_json_with_the_request_id(stack: LiveStack, case: str) -> None:
    """The app's errors (its error guard's 500 too, inside its request id and access log) and
    nginx's refusals (oversized, foreign-Host or odd-method requests, which the app never sees)
    are JSON with the request id, framing denied."""
    wire, expected = ERRORS[case]

    answer = exchange(stack.port, wire)

    assert_json_error(answer, expected)
    assert answer[1]["x-frame-options"] == "DENY"
    request_id = answer[1]["x-request-id"]
    if case.startswith("the app's"):
        wait_for(lambda: request_id in stack.access_lines(), 10, "the app's access line")
        assert stack.access_lines()[request_id]["status"] == expected
    else:  # nginx's own: once a later request's line is in, this one's would be too
        later = get(stack.port, "/livez")[1]["x-request-id"]
        wait_for(lambda: later in stack.access_lines(), 10, "a later request's access line")
        assert request_id not in stack.access_lines()


def test_past_the_deadline_the_app_answers_a_json_504(stack: LiveStack) -> None:
    """A handler slower than the request deadline (30 s): the app's JSON 504 naming the
    deadline, not nginx's and not the handler's answer; its access line says 504 (the deadline
    sits inside the access log)."""
    started = time.monotonic()

    answer = get(stack.port, "/_tests/slow?seconds=30")

    assert_json_error(answer, 504)
    assert "deadline" in json.loads(answer[2])["detail"]
    assert time.monotonic() - started >= DEADLINE_SECONDS  # a lower bound: load cannot fail it
    request_id = answer[1]["x-request-id"]
    wait_for(lambda: request_id in stack.access_lines(), 10, "the app's access line")
    assert stack.access_lines()[request_id]["status"] == 504


def test_metrics_are_served_on_the_metrics_port_only(stack: LiveStack) -> None:
    """The metrics port adds up every worker's and nginx's numbers; the public port has none."""
    for _ in range(3):
        get(stack.port, "/livez")

    page = get(stack.metrics_port, "/metrics")[2].decode()

    assert "http_server_request_duration_seconds_count" in page
    assert "\nnginx_up 1.0\n" in page, page[:500]
    assert get(stack.port, "/metrics")[0] == 404


def test_the_health_check_command_asks_the_whole_chain(stack: LiveStack) -> None:
    """`python -m serving_stack check` (the image's HEALTHCHECK) passes here, fails elsewhere."""

    def check(port: int) -> int:
        env = {**os.environ, "PORT": str(port), "LISTEN_ADDRESS": "127.0.0.1"}
        command = [sys.executable, "-m", "serving_stack", "check"]
        # From tests/live/, as the stack: no .env there.
        return subprocess.run(
            command, env=env, cwd=HERE, capture_output=True, check=False
        ).returncode

    with ThreadPoolExecutor(max_workers=2) as pool:  # side by side: mostly interpreter start-ups
        assert tuple(pool.map(check, [stack.port, free_port()])) == (0, 1)


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
        return [
            line
            for line in stack.log_lines()
            if (line["logger"], line.get("request_id")) == (logger, request_id)
        ]

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
        logged = stack.log_lines()
        return [
            line for line in logged if line["level"] == "error" and line["logger"] != "nginx.error"
        ]

    errors_before = app_errors()

    stream = read_stream(
        stack.port, f"/_tests/events?tokens=2&interval=0.1&stall={STREAM_IDLE_SECONDS * 30}"
    )

    assert [number for number, _, _ in stream.events] == [0, 1]
    assert not stream.complete

    def warnings() -> list[dict[str, object]]:
        return [
            line
            for line in stack.log_lines()
            if line.get("request_id") == stream.request_id and line["level"] == "warning"
        ]

    wait_for(lambda: bool(warnings()), 10, "the app's warning about the cut stream")
    later = get(stack.port, "/livez")[1]["x-request-id"]
    wait_for(lambda: later in stack.access_lines(), 10, "a later request's access line")
    assert len(warnings()) == 1, warnings()
    assert "stream" in str(warnings()[0]["message"])
    assert app_errors() == errors_before


def test_sigterm_lets_requests_and_streams_finish_closes_websockets_and_exits_0(
    stopped: Stopped,
) -> None:
    """SIGTERM with requests in flight, event streams and a WebSocket open (a stack of its
    own, stopped in the background from the session's start: conftest.py): each request
    answers 200; each stream, longer than twice the request deadline (which bounds the time
    to the first byte only), arrives whole, event by event, each before the app sent the next
    (never held back by nginx, small events or 64 KiB ones) and never gzipped though the
    client asked; the WebSocket gets a close frame (1012, service restart) within nginx's
    drain, not a dropped connection; the runner exits 0, and every line is JSON."""
    assert stopped.statuses == [200] * 4
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
