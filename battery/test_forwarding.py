"""What nginx lets through: only its own forwarding headers, known methods, RFC 3986 targets.

Class 3 of docs/security.md. Forwarding headers nginx does not set (X-Real-IP, Forwarded,
X-Forwarded-Host/-Port/-Prefix/-Server) never reach the app. Unknown methods and request
targets with characters RFC 3986 does not allow are refused by nginx, in the service's JSON
error shape with the request id (uvicorn would answer them in plain text, without one).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from harness.clients import exchange, get, parse_response

from .conftest import never_reaches_app, parse_json

if TYPE_CHECKING:
    from harness.stack import RunningStack

pytestmark = pytest.mark.live

FOREIGN = {
    "X-Real-IP": "6.6.6.6",
    "Forwarded": "for=6.6.6.6;host=evil.example;proto=https",
    "X-Forwarded-Host": "evil.example",
    "X-Forwarded-Port": "443",
    "X-Forwarded-Prefix": "/evil",
    "X-Forwarded-Server": "evil.example",
    "X-Forwarded-Ssl": "on",
    "X-Forwarded-Protocol": "https",
}


def test_foreign_forwarding_headers_never_reach_the_app(shared_stack: RunningStack) -> None:
    """The app sees nginx's X-Forwarded-For/-Proto only, whatever the client sends."""
    status, _, body = get(shared_stack.port, "/fault/headers", {**FOREIGN, "X-Forwarded-For": "1"})
    assert status == 200
    seen = parse_json(body)["headers"]
    assert isinstance(seen, dict)
    assert {name.lower() for name in FOREIGN} & set(seen) == set()
    assert seen["x-forwarded-for"] == "127.0.0.1"
    assert seen["x-forwarded-proto"] == "http"


def _json_error(raw: bytes, status: int) -> None:
    """raw is nginx's JSON error with this status, its body's id equal to the header's."""
    got, headers, body = parse_response(raw)
    assert got == status, raw[:200]
    assert headers["content-type"] == "application/json"
    assert parse_json(body)["request_id"] == headers["x-request-id"]


@pytest.mark.parametrize("method", ["FOO", "PROPFIND", "MKCOL", "LOCK", "SEARCH", "PURGE"])
def test_unknown_method_is_a_json_405_from_nginx(shared_stack: RunningStack, method: str) -> None:
    """Methods outside GET HEAD POST PUT PATCH DELETE OPTIONS never reach the app."""
    wire = f"{method} /hostile-{uuid.uuid4().hex} HTTP/1.1\r\nHost: localhost\r\n"
    wire += "Connection: close\r\n\r\n"
    raw: list[bytes] = []

    def send() -> bytes:
        raw.append(exchange(shared_stack.port, wire.encode()))
        return raw[0]

    assert never_reaches_app(shared_stack, send) == 405
    _json_error(raw[0], 405)


# Also raw bytes above 0x7f (sent as latin-1 below): invalid UTF-8 (0xff), and UTF-8 é
# unencoded; RFC 3986 wants both percent-encoded.
@pytest.mark.parametrize(
    "character", ['"', "<", ">", "\\", "^", "`", "{", "|", "}", "\x7f", "\xff", "\xc3\xa9"]
)
def test_odd_request_target_is_a_json_400_from_nginx(
    shared_stack: RunningStack, character: str
) -> None:
    """A target with a character RFC 3986 does not allow is refused by nginx, in JSON."""
    wire = f"GET /hostile-{uuid.uuid4().hex}?q=a{character}b HTTP/1.1\r\nHost: localhost\r\n"
    wire += "Connection: close\r\n\r\n"
    raw: list[bytes] = []

    def send() -> bytes:
        raw.append(exchange(shared_stack.port, wire.encode("latin-1")))
        return raw[0]

    assert never_reaches_app(shared_stack, send) == 400
    _json_error(raw[0], 400)


@pytest.mark.parametrize(
    ("wire", "status"),
    [
        (b"\x16\x03\x01\x02\x00garbage\r\n\r\n", 400),
        (b"GET / HTTP/9.9\r\nHost: localhost\r\n\r\n", 505),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n", 413),
    ],
    ids=["garbage", "HTTP/9.9", "9 KB target", "9 KB header", "2 MB body"],
)
def test_nginx_errors_are_json_with_the_request_id(
    shared_stack: RunningStack, wire: bytes, status: int
) -> None:
    """nginx's own refusals use the app's error shape, not an HTML page."""
    _json_error(exchange(shared_stack.port, wire), status)


def test_well_formed_targets_still_pass(shared_stack: RunningStack) -> None:
    """Percent-encoding and every RFC 3986 sub-delimiter reach the app."""
    status, _, body = get(shared_stack.port, "/fault/headers?a=%20b&c=d,e;f=(g)*!'$+~:@/?")
    assert status == 200
    assert str(parse_json(body)["url"]).endswith("/fault/headers?a=%20b&c=d,e;f=(g)*!'$+~:@/?")
