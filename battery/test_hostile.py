"""Hostile clients over raw sockets: nginx refuses them, and the app never sees them.

"Never reaching the app" is proven twice per request: nginx's access-log line for it has no
upstream time (nginx never contacted gunicorn), and the app's access log gains no line
except the sentinel request each check sends afterwards (the app logs every request).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

import pytest

from harness.clients import exchange, get, request

from .conftest import app_access, needs_the_example, never_reaches_app, parse_json

if TYPE_CHECKING:
    from harness.stack import RunningStack

    from .conftest import Stacks

pytestmark = pytest.mark.live

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "content-security-policy": "frame-ancestors 'none'",
    "cross-origin-resource-policy": "same-origin",
}
MIB = 1024 * 1024


def _path() -> str:
    return f"/hostile-{uuid.uuid4().hex}"


HEAD = "Host: localhost\r\nConnection: close\r\n"
BAD_REQUESTS = {
    "garbage request line": b"\x16\x03\x01\x02\x00garbage\r\n\r\n",
    "HTTP/1.1 without Host": b"GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n",
    "space in a header name": b"GET {path} HTTP/1.1\r\n" + HEAD.encode() + b"Bad Name: x\r\n\r\n",
    "Content-Length with Transfer-Encoding": (
        b"POST {path} HTTP/1.1\r\n" + HEAD.encode() + b"Content-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "two Content-Lengths": (
        b"POST {path} HTTP/1.1\r\n" + HEAD.encode() + b"Content-Length: 2\r\n"
        b"Content-Length: 3\r\n\r\nabc"
    ),
}


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=list(BAD_REQUESTS))
def test_malformed_requests_get_400(shared_stack: RunningStack, case: str) -> None:
    """Requests a lenient server might misread (smuggling, no Host) are 400 from nginx."""
    wire = BAD_REQUESTS[case].replace(b"{path}", _path().encode())
    status = never_reaches_app(shared_stack, lambda: exchange(shared_stack.port, wire))
    assert status == 400


def test_unknown_http_version_gets_505(shared_stack: RunningStack) -> None:
    """HTTP/9.9 is refused with 505 by nginx."""
    wire = f"GET {_path()} HTTP/9.9\r\n{HEAD}\r\n".encode()
    assert never_reaches_app(shared_stack, lambda: exchange(shared_stack.port, wire)) == 505


def test_overlong_uri_gets_414(shared_stack: RunningStack) -> None:
    """A 9 KB URI (over large_client_header_buffers' 8k) is 414 from nginx."""
    wire = f"GET {_path()}?{'a' * 9000} HTTP/1.1\r\n{HEAD}\r\n".encode()
    assert never_reaches_app(shared_stack, lambda: exchange(shared_stack.port, wire)) == 414


def test_overlong_header_gets_400_or_431(shared_stack: RunningStack) -> None:
    """A 9 KB header line is refused by nginx (400 "Request Header Or Cookie Too Large")."""
    wire = f"GET {_path()} HTTP/1.1\r\n{HEAD}X-Big: {'b' * 9000}\r\n\r\n".encode()
    status = never_reaches_app(shared_stack, lambda: exchange(shared_stack.port, wire))
    assert status in {400, 431}


def test_body_over_limit_by_content_length_gets_413(shared_stack: RunningStack) -> None:
    """A declared 2 MiB body is refused with 413 before nginx reads it."""
    wire = f"POST {_path()} HTTP/1.1\r\n{HEAD}Content-Length: {2 * MIB}\r\n\r\n".encode()
    pieces = [wire, b"x" * 1024]
    status = never_reaches_app(shared_stack, lambda: exchange(shared_stack.port, pieces))
    assert status == 413


def test_body_over_limit_by_chunks_gets_413(shared_stack: RunningStack) -> None:
    """A chunked body that grows past 1 MiB is refused with 413 while it streams in."""
    head = f"POST {_path()} HTTP/1.1\r\n{HEAD}Transfer-Encoding: chunked\r\n\r\n".encode()
    chunk = b"10000\r\n" + b"c" * 0x10000 + b"\r\n"  # 64 KiB per chunk, 20 chunks = 1.25 MiB
    wire = [head, *([chunk] * 20), b"0\r\n\r\n"]
    assert never_reaches_app(shared_stack, lambda: exchange(shared_stack.port, wire)) == 413


def test_expect_continue_over_limit_gets_413_without_100(shared_stack: RunningStack) -> None:
    """With Expect: 100-continue, an oversized body is refused before the client sends it."""
    wire = (
        f"POST {_path()} HTTP/1.1\r\n{HEAD}Content-Length: {2 * MIB}\r\n"
        "Expect: 100-continue\r\n\r\n"
    ).encode()
    raw: list[bytes] = []

    def send() -> bytes:
        raw.append(exchange(shared_stack.port, wire))
        return raw[0]

    assert never_reaches_app(shared_stack, send) == 413
    assert not raw[0].startswith(b"HTTP/1.1 100"), "nginx invited the oversized body"


# --- addresses and schemes ---------------------------------------------------------------------


SPOOF = {"X-Forwarded-For": "6.6.6.6", "X-Forwarded-Proto": "https", "X-Forwarded-Ssl": "on"}


def test_client_cannot_spoof_address_or_scheme(shared_stack: RunningStack) -> None:
    """An untrusted client's X-Forwarded-* headers change nothing the app sees."""
    status, _, body = get(shared_stack.port, "/fault/whoami", SPOOF)
    assert status == 200
    assert parse_json(body) == {"client": "127.0.0.1", "scheme": "http"}


def test_trusted_proxy_sets_address_and_scheme(stacks: Stacks) -> None:
    """A load balancer inside TRUSTED_PROXIES does set the address and scheme the app sees."""
    stack = stacks.start(TRUSTED_PROXIES="127.0.0.1/32")
    headers = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}
    status, _, body = get(stack.port, "/fault/whoami", headers)
    assert status == 200
    assert parse_json(body) == {"client": "203.0.113.9", "scheme": "https"}


# --- security headers on every kind of answer --------------------------------------------------


@needs_the_example()
def test_security_headers_on_every_status(shared_stack: RunningStack) -> None:
    """200, 404, 422, 500 from the app and 413, 502 from nginx all carry the headers."""
    port = shared_stack.port
    answers = {
        200: get(port, "/livez"),
        404: get(port, _path()),
        422: request(port, "POST", "/items", b"{}", headers={"Content-Type": "application/json"}),
        500: get(port, "/fault/crash"),
        413: request(port, "POST", "/items", b"x" * (MIB + 1)),
        # The worker dies mid-request and nginx does not retry a POST: nginx's own 502 page.
        502: request(port, "POST", "/fault/exit"),
    }
    problems = {}
    for expected, (status, headers, _) in answers.items():
        wrong = {k: headers.get(k) for k, v in SECURITY_HEADERS.items() if headers.get(k) != v}
        if status != expected or wrong or len(headers.get("x-request-id", "")) != 32:
            problems[expected] = (status, wrong, headers.get("x-request-id"))
    assert problems == {}, f"expected status -> (got, wrong headers, request id): {problems}"


# --- slowloris ---------------------------------------------------------------------------------


async def _drip(port: int, head: bytes, drip: bytes, every: float, limit: float) -> float:
    """Send head, then drip every so often; return seconds until nginx closed the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        writer.write(head)
        while loop.time() - start < limit:
            if drip:
                writer.write(drip)
                await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(4096), every) == b"":
                    return loop.time() - start
            except TimeoutError:
                continue
            except ConnectionResetError:
                return loop.time() - start
    except (ConnectionResetError, BrokenPipeError):
        return loop.time() - start
    finally:
        writer.close()
    return float("inf")


async def _normal_requests(port: int, count: int) -> list[tuple[int, float]]:
    results = []
    for _ in range(count):
        started = time.monotonic()
        status = (await asyncio.to_thread(get, port, "/livez", None, 5.0))[0]
        results.append((status, time.monotonic() - started))
        await asyncio.sleep(0.05)
    return results


def test_slowloris_is_cut_at_the_timeouts_while_others_are_served(stacks: Stacks) -> None:
    """50 header drips and 20 body drips are closed at their timeouts; 20 normal requests pass."""
    header_timeout, body_timeout = 2.0, 2.0
    stack = stacks.start(
        nginx_directives={
            "client_header_timeout": f"{header_timeout:g}s",
            "client_body_timeout": f"{body_timeout:g}s",
        }
    )
    port = stack.port
    header_head = b"GET /drip HTTP/1.1\r\nHost: localhost\r\n"
    body_head = b"POST /fault/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n{"

    async def scenario() -> tuple[list[float], list[float], list[tuple[int, float]]]:
        headers = [_drip(port, header_head, b"X-Drip: 1\r\n", 0.5, 15) for _ in range(50)]
        # A body drip that pauses longer than client_body_timeout (between two reads).
        bodies = [_drip(port, body_head, b"", 0.5, 15) for _ in range(20)]
        results = await asyncio.gather(
            asyncio.gather(*headers), asyncio.gather(*bodies), _normal_requests(port, 20)
        )
        return results[0], results[1], results[2]

    header_closed, body_closed, normal = asyncio.run(scenario())

    assert [status for status, _ in normal] == [200] * 20
    assert max(seconds for _, seconds in normal) < 1.0, normal
    for closed, timeout in ((header_closed, header_timeout), (body_closed, body_timeout)):
        assert all(timeout - 0.3 <= seconds <= timeout + 1.5 for seconds in closed), closed
    drip_paths = [line.get("path") for line in app_access(stack)]
    assert "/drip" not in drip_paths
    assert "/fault/echo" not in drip_paths, "a dripped body reached the app"
