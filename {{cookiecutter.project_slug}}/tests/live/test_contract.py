"""What the service promises, checked through the live stack (client -> nginx -> socket -> app).

Needs the stack conftest.py starts (nginx installed). The heavier proofs (load, fuzzing,
reloads, faults, hostile and slow clients) run against this project from the template:
`./scripts/battery <this directory>` (docs/security.md says which test proves what)."""

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import (
    DEADLINE_SECONDS,
    HERE,
    LiveStack,
    assert_json_error,
    exchange,
    free_port,
    get,
    wait_for,
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
    "the app's 405": (_wire(b"DELETE /boom HTTP/1.1", HOST), 405),
    "the app's 500": (_wire(b"GET /boom HTTP/1.1", HOST), 500),
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
    """A handler slower than the request deadline: the app's JSON 504, on time, not nginx's;
    its access line says 504 (the deadline sits inside the access log)."""
    started = time.monotonic()

    answer = get(stack.port, "/slow?seconds=30")

    assert_json_error(answer, 504)
    assert "deadline" in json.loads(answer[2])["detail"]
    assert time.monotonic() - started < DEADLINE_SECONDS + 3
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

    assert (check(stack.port), check(free_port())) == (0, 1)


# Last: it stops the stack every test here shares (pytest runs a module's tests in order).
def test_sigterm_lets_requests_in_flight_finish_then_exits_0(stack: LiveStack) -> None:
    """SIGTERM with requests in flight: each answers 200, the runner exits 0, every line is JSON."""

    def started() -> int:
        return sum(line.get("message") == "slow request started" for line in stack.log_lines())

    before = started()
    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = [pool.submit(get, stack.port, "/slow?seconds=1") for _ in range(4)]
        wait_for(lambda: started() >= before + 4, 20, "the requests to reach the app")
        stack.process.send_signal(signal.SIGTERM)
        statuses = [reply.result(timeout=30)[0] for reply in replies]

    assert statuses == [200] * 4
    assert stack.process.wait(timeout=30) == 0
    for raw in stack.log_path.read_bytes().splitlines():
        assert list(json.loads(raw))[:4] == ["time", "level", "logger", "message"], raw
