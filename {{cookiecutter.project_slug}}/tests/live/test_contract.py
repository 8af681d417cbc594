"""What the service promises, checked through the live stack (client -> nginx -> socket -> app).

Needs the stack conftest.py starts (nginx installed). The heavier proofs (load, fuzzing,
reloads, faults, hostile and slow clients) run against this project from the template:
`./scripts/battery <this directory>` (docs/security.md says which test proves what).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from .conftest import (
    DEADLINE_SECONDS,
    HERE,
    PACKAGE,
    REQUEST_ID,
    LiveStack,
    answers,
    assert_json_error,
    exchange,
    free_port,
    request,
    wait_for,
)

pytestmark = pytest.mark.live

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def test_answers_carry_the_request_id_the_app_logged(stack: LiveStack) -> None:
    """nginx's request id reaches the app's log, with the real client address, not a spoofed one."""
    status, headers, _ = request(stack.port, "GET", "/livez", {"X-Forwarded-For": "6.6.6.6"})

    assert status == 200
    assert REQUEST_ID.match(headers["x-request-id"]), headers
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, name
    request_id = headers["x-request-id"]
    wait_for(lambda: request_id in stack.app_request_ids(), 10, "the app's access line")
    (line,) = [line for line in stack.log_lines() if line.get("request_id") == request_id
               and line["logger"] == f"{PACKAGE}.access"]  # fmt: skip
    assert line["client"] == "127.0.0.1", line


@pytest.mark.parametrize(
    ("method", "target", "status"), [("GET", "/no-such-page", 404), ("DELETE", "/livez", 405)]
)
def test_the_apps_errors_are_json_with_the_request_id(
    stack: LiveStack, method: str, target: str, status: int
) -> None:
    """The app's own errors are JSON, with the request id and the security headers."""
    answer = request(stack.port, method, target)

    assert_json_error(answer, status)
    assert answer[1].get("x-frame-options") == "DENY"


def _wire(line: bytes, *headers: bytes) -> bytes:
    return b"\r\n".join([line, *headers, b"", b""])


HOST = b"Host: localhost"
REFUSED_BY_NGINX = {
    "body over 1 MiB": (_wire(b"POST /livez HTTP/1.1", HOST, b"Content-Length: 2097152"), 413),
    "9 KB URI": (_wire(b"GET /" + b"a" * 9000 + b" HTTP/1.1", HOST), 414),
    "9 KB header": (_wire(b"GET /livez HTTP/1.1", HOST, b"X-Big: " + b"a" * 9000), 400),
    "no Host": (_wire(b"GET /livez HTTP/1.1"), 400),
    "Content-Length and chunked": (
        _wire(b"POST /livez HTTP/1.1", HOST, b"Content-Length: 4", b"Transfer-Encoding: chunked")
        + b"0\r\n\r\n",
        400,
    ),
    "unknown method": (_wire(b"TRACE /livez HTTP/1.1", HOST), 405),
}


@pytest.mark.parametrize("case", REFUSED_BY_NGINX)
def test_nginx_refuses_before_the_app(stack: LiveStack, case: str) -> None:
    """Oversized, ambiguous or odd requests get nginx's JSON error; the app never sees them."""
    wire, expected = REFUSED_BY_NGINX[case]

    answer = exchange(stack.port, wire)

    assert_json_error(answer, expected)
    assert answer[1]["x-request-id"] not in stack.app_request_ids()


def test_a_host_outside_the_allow_list_is_refused_by_nginx(stack: LiveStack) -> None:
    """A Host outside ALLOWED_HOSTS is nginx's JSON 400; the probes answer any Host."""
    answer = request(stack.port, "GET", "/", {"Host": "evil.example"})

    assert_json_error(answer, 400)
    assert answer[1]["x-request-id"] not in stack.app_request_ids()
    for probe in ("/livez", "/readyz"):
        assert request(stack.port, "GET", probe, {"Host": "10.1.2.3"})[0] == 200, probe


def test_past_the_deadline_the_app_answers_a_json_504(stack: LiveStack) -> None:
    """A handler slower than the request deadline: the app's JSON 504, on time, not nginx's."""
    started = time.monotonic()

    answer = request(stack.port, "GET", "/slow?seconds=30")

    assert_json_error(answer, 504)
    assert "deadline" in json.loads(answer[2])["detail"]
    assert time.monotonic() - started < DEADLINE_SECONDS + 3


def test_metrics_are_served_on_the_metrics_port_only(stack: LiveStack) -> None:
    """The metrics port adds up every worker's and nginx's numbers; the public port has none."""
    for _ in range(3):
        request(stack.port, "GET", "/livez")

    url = f"http://127.0.0.1:{stack.metrics_port}/metrics"
    # The listener starts once the stack is ready: give it its moment when this runs first.
    wait_for(lambda: answers(url), 10, "the metrics listener")
    page = request(stack.metrics_port, "GET", "/metrics")[2].decode()

    assert "http_server_request_duration_seconds_count" in page
    assert "\nnginx_up 1.0\n" in page, page[:500]
    assert request(stack.port, "GET", "/metrics")[0] == 404


def test_the_health_check_command_asks_the_whole_chain(stack: LiveStack) -> None:
    """`python -m <package>_stack check` (the image's HEALTHCHECK) passes here, fails elsewhere."""

    def check(port: int) -> int:
        env = {**os.environ, "PORT": str(port), "LISTEN_ADDRESS": "127.0.0.1"}
        command = [sys.executable, "-m", f"{PACKAGE}_stack", "check"]
        # From tests/live/, as the stack: no .env there.
        done = subprocess.run(command, env=env, cwd=HERE, capture_output=True, check=False)
        return done.returncode

    assert (check(stack.port), check(free_port())) == (0, 1)
