"""The edge, through the live stack: what nginx refuses, answers and logs before the app.

Ports and hosts (no redirect takes its authority from anything but the checked host and
port), the body limits of the probes and of the routes that declare one, CORS on nginx's own
errors, log bytes, the status socket's directory. Class 1 of docs/security.md; one stack for
the module, with the app's CORS origins set.
"""

from __future__ import annotations

import json
import re
import socket
from typing import TYPE_CHECKING

import pytest

from harness.clients import exchange, parse_response, request
from harness.ports import wait_for

from .conftest import Stacks, app_access, needs_the_example, nginx_access

if TYPE_CHECKING:
    from collections.abc import Iterator

    from harness.stack import RunningStack

    from .conftest import Identity

pytestmark = pytest.mark.live

ALLOWED_ORIGIN = "https://app.example.com"
JSON_TYPE = {"Content-Type": "application/json"}
# Host with a port that is not 1-65535 written plainly: Starlette would drop it and build
# the redirect's authority from the unix socket's path.
BAD_PORTS = ["localhost:99999", "localhost:0", "localhost:00080", "localhost:65536", "[::1]:0"]


@pytest.fixture(scope="module")
def stack(nginx_bin: str, identity: Identity) -> Iterator[RunningStack]:
    started = Stacks(nginx_bin, identity)
    yield started.start(CORS_ORIGINS=ALLOWED_ORIGIN)
    started.stop_all()


def get_wire(target: str, host: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


def assert_refused_before_the_app(
    stack: RunningStack, answer: tuple[int, dict[str, str], bytes], expected: int
) -> None:
    """nginx's own error: JSON with the request id, which never reached the app."""
    status, headers, body = answer
    assert status == expected, body[:300]
    assert headers["content-type"].startswith("application/json"), headers
    assert json.loads(body)["request_id"] == headers["x-request-id"]
    assert headers["x-request-id"] not in {line.get("request_id") for line in app_access(stack)}


@pytest.mark.parametrize("host", BAD_PORTS)
def test_a_port_outside_1_to_65535_is_a_400(stack: RunningStack, host: str) -> None:
    """Host's port must be 1-65535 without leading zeros: nginx's JSON 400, for any path."""
    for target in ("/items/", "/livez"):
        answer = parse_response(exchange(stack.port, get_wire(target, host)))
        assert_refused_before_the_app(stack, answer, 400)


@needs_the_example()
def test_no_answer_names_a_filesystem_path(stack: RunningStack) -> None:
    """Redirects take their authority from the checked host and port only, also for an
    absolute-form target; no answer, header or body, contains the run directory."""
    wires = [get_wire("/items/", host) for host in [*BAD_PORTS, "localhost:8080", "LOCALHOST:1"]]
    wires += [
        get_wire("http://localhost/items/", "evil.example:4444"),
        get_wire("http://localhost:65535/items/", "localhost:99999"),
        b"GET /items/ HTTP/1.0\r\n\r\n",
        b"GET http://localhost/items/ HTTP/1.0\r\n\r\n",
    ]
    answers = [parse_response(exchange(stack.port, wire)) for wire in wires]

    for status, headers, body in answers:
        assert str(stack.run_dir) not in f"{headers} {body!r}", (status, headers, body)
        assert "sock" not in headers.get("location", "")
    locations = [headers.get("location") for _, headers, _ in answers]
    assert locations[len(BAD_PORTS) :] == [
        "http://localhost:8080/items",
        "http://localhost:1/items",
        "http://localhost/items",  # Host's port was evil.example's, not the target's
        None,  # 400: a Host with a bad port is refused even when the target names the host
        None,  # HTTP/1.0 without Host: $host is nginx's "_", not an allowed host
        "http://localhost/items",
    ]


@pytest.mark.parametrize("probe", ["/livez", "/readyz", "/nginx-health"])
def test_the_probes_take_no_body(stack: RunningStack, probe: str) -> None:
    """A probe is GET or HEAD without a body: POST is nginx's 405, a GET with a body its 400,
    neither read: nothing to spool, nothing to fill (battery/test_side_doors.py: chunked)."""
    assert_refused_before_the_app(stack, request(stack.port, "POST", probe, b"x"), 405)
    with_body = request(stack.port, "GET", probe, b"", headers={"Content-Length": "2048"})
    assert_refused_before_the_app(stack, with_body, 400)


@needs_the_example()
def test_a_route_declaring_a_body_limit_gets_it_at_nginx(stack: RunningStack) -> None:
    """POST /items declares 8 KiB (api/items.py): a larger body is nginx's 413, before the app
    reads a byte, logged as POST /items; one under it reaches the app (a 422 for this key)."""
    over = json.dumps({"x": "a" * 8200}).encode()
    under = json.dumps({"x": "a" * 7000}).encode()

    refused = request(stack.port, "POST", "/items", over, headers=JSON_TYPE)
    served = request(stack.port, "POST", "/items", under, headers=JSON_TYPE)

    assert_refused_before_the_app(stack, refused, 413)
    assert served[0] == 422, served
    request_id = refused[1]["x-request-id"]

    # Logged as what the client asked, not as nginx's error page (GET /.nginx-error).
    def logged() -> list[dict[str, object]]:
        return [line for line in nginx_access(stack) if line.get("request_id") == request_id]

    wait_for(lambda: len(logged()) == 1, 10, "the 413's access line")
    (line,) = logged()
    assert (line["message"], line["method"], line["path"]) == ("POST /items 413", "POST", "/items")


def raw_head(port: int, wire: bytes) -> bytes:
    """The raw header block of one answer (a parsed dict would hide a repeated header)."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(wire)
        while b"\r\n\r\n" not in received and (chunk := client.recv(65536)):
            received += chunk
    return received.partition(b"\r\n\r\n")[0]


@needs_the_example()
def test_nginx_errors_carry_cors_headers_for_an_allowed_origin(stack: RunningStack) -> None:
    """nginx's own 413 carries the app's CORS headers for a listed origin (exposing
    Retry-After and X-Request-ID), none for another origin; the app's answers carry the
    app's own, once."""
    big = b"x" * 9000
    allowed = request(stack.port, "POST", "/items", big, headers={"Origin": ALLOWED_ORIGIN})
    other = request(stack.port, "POST", "/items", big, headers={"Origin": "https://evil.example"})
    wire = f"GET /livez HTTP/1.1\r\nHost: localhost\r\nOrigin: {ALLOWED_ORIGIN}\r\n\r\n"
    by_app = raw_head(stack.port, wire.encode()).lower()

    assert allowed[0] == other[0] == 413
    assert allowed[1].get("access-control-allow-origin") == ALLOWED_ORIGIN, allowed[1]
    assert "retry-after" in allowed[1].get("access-control-expose-headers", "").lower()
    assert allowed[1].get("vary") == "Origin"
    assert "access-control-allow-origin" not in other[1]
    expected = f"access-control-allow-origin: {ALLOWED_ORIGIN}".encode()
    assert by_app.count(b"access-control-allow-origin:") == 1, by_app
    assert expected in by_app, by_app


def test_every_log_line_is_printable_ascii_json(stack: RunningStack) -> None:
    """DEL, controls, UTF-8 and bytes that are not UTF-8 in a request's path and headers are
    escaped in every line: printable ASCII JSON, bytes as \\xff, never lone surrogates."""
    marker = "edge-log-bytes"
    wire = (
        b"GET /" + marker.encode() + b"/%ff%7f%c3%a9 HTTP/1.1\r\nHost: localhost\r\n"
        b"User-Agent: ua\x7f\xff\xc3\xa9\x01end\r\nConnection: close\r\n\r\n"
    )
    exchange(stack.port, wire)

    def logged() -> list[dict[str, object]]:
        return [line for line in nginx_access(stack) if marker in str(line.get("path"))]

    wait_for(lambda: len(logged()) == 1, 10, "the access line")
    raw = stack.log_path.read_bytes()
    outside = sorted({byte for byte in raw if not (0x20 <= byte < 0x7F or byte == 0x0A)})
    assert outside == [], [hex(byte) for byte in outside]
    assert not re.search(rb"\\ud[89a-f][0-9a-f]{2}", raw, re.IGNORECASE)
    for line in raw.splitlines():
        json.loads(line)
    (access,) = logged()
    assert access["user_agent"] == "ua\x7f\\xff\u00e9\u0001end", access
    assert access["path"] == f"/{marker}/\\xff\x7f\u00e9", access


def test_the_status_socket_is_reachable_by_the_stacks_user_only(stack: RunningStack) -> None:
    """nginx's stub_status socket (mode 0666, as nginx makes it) is in a 0700 directory."""
    (status_socket,) = stack.run_dir.rglob("nginx-status.sock")

    directory_mode = status_socket.parent.stat().st_mode & 0o777
    socket_mode = status_socket.stat().st_mode & 0o777
    assert directory_mode == 0o700 or socket_mode & 0o007 == 0, (directory_mode, socket_mode)
