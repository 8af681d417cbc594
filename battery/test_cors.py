"""CORS through the live stack: off by default, and a real browser preflight when set.

A preflight is what a browser sends before a cross-origin POST with a JSON body: OPTIONS
with Origin and Access-Control-Request-* headers. It crosses nginx like any request, so
this checks nginx passes it and the answer's headers untouched, and adds its own.
"""

from __future__ import annotations

import http.client
from typing import TYPE_CHECKING

import pytest

from .conftest import needs_the_example

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness.stack import RunningStack

pytestmark = [pytest.mark.live, needs_the_example()]

ORIGINS = "CORS_ORIGINS"  # the stack's variable, which the app reads too
ALLOWED = "https://app.example.com"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type",
}


def send(
    stack: RunningStack, method: str, path: str, headers: dict[str, str]
) -> tuple[int, http.client.HTTPMessage]:
    connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=30)
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, response.msg
    finally:
        connection.close()


def test_preflight_from_an_allowed_origin_is_answered(
    start_stack: Callable[..., RunningStack],
) -> None:
    """A listed origin's preflight gets 200 with the CORS headers, through nginx."""
    stack = start_stack(**{ORIGINS: f"{ALLOWED},http://localhost:5173"})
    status, headers = send(stack, "OPTIONS", "/items", {"Origin": ALLOWED, **PREFLIGHT})
    assert status == 200
    assert headers.get_all("Access-Control-Allow-Origin") == [ALLOWED]
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert "content-type" in headers["Access-Control-Allow-Headers"].lower()
    assert headers["Access-Control-Max-Age"] == "600"
    assert "Origin" in headers["Vary"]
    assert headers["X-Request-ID"], "nginx's own headers are still added"

    # The actual request then carries the origin and exposes the request id to the page.
    status, headers = send(stack, "GET", "/livez", {"Origin": ALLOWED})
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "x-request-id" in headers["Access-Control-Expose-Headers"].lower()

    # An origin not listed gets no permission.
    evil = "https://evil.example"
    status, headers = send(stack, "OPTIONS", "/items", {"Origin": evil, **PREFLIGHT})
    assert status == 400
    assert "Access-Control-Allow-Origin" not in headers
    status, headers = send(stack, "GET", "/livez", {"Origin": evil})
    assert status == 200
    assert "Access-Control-Allow-Origin" not in headers


def test_cors_is_off_by_default(start_stack: Callable[..., RunningStack]) -> None:
    """Without origins, a preflight is just an OPTIONS the API does not serve."""
    stack = start_stack()
    status, headers = send(stack, "OPTIONS", "/items", {"Origin": ALLOWED, **PREFLIGHT})
    assert status == 405
    assert not [name for name in headers if name.lower().startswith("access-control-")]
