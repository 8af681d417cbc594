"""Trace propagation: a well-formed X-Request-ID and traceparent from TRUSTED_PROXIES only.

Class 8 of docs/security.md. From a trusted load balancer, nginx keeps a well-formed id
(letters, digits, "._-", at most 128) and W3C traceparent (version 00, no all-zero id) with
its tracestate; the app logs and echoes that id. From anyone else, or malformed, nginx makes
a fresh id and drops the trace context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harness.clients import get

from .conftest import APP_ACCESS_LOGGER, Stacks, parse_json, wait_for_line

if TYPE_CHECKING:
    from collections.abc import Iterator

    from harness.stack import RunningStack

    from .conftest import Identity

pytestmark = pytest.mark.live

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def trusting_stack(nginx_bin: str, identity: Identity) -> Iterator[RunningStack]:
    """A stack whose nginx trusts the loopback client as its load balancer."""
    started = Stacks(nginx_bin, identity)
    yield started.start(TRUSTED_PROXIES="127.0.0.1/32")
    started.stop_all()


def seen(stack: RunningStack, headers: dict[str, str]) -> tuple[str, dict[str, object]]:
    """The id the client got back, and the headers the app received."""
    status, answer, body = get(stack.port, "/fault/headers", headers)
    assert status == 200
    received = parse_json(body)["headers"]
    assert isinstance(received, dict)
    return answer["x-request-id"], received


def test_trusted_proxy_id_and_trace_are_kept(trusting_stack: RunningStack) -> None:
    """From a trusted proxy: the id is echoed, logged by the app, and traceparent passes."""
    request_id = "lb-7f3a.9_Z"
    echoed, received = seen(
        trusting_stack,
        {"X-Request-ID": request_id, "traceparent": PARENT, "tracestate": "vendor=abc"},
    )
    assert echoed == request_id
    assert received["x-request-id"] == request_id
    assert received["traceparent"] == PARENT
    assert received["tracestate"] == "vendor=abc"
    wait_for_line(
        trusting_stack,
        lambda line: (
            line.get("logger") == APP_ACCESS_LOGGER and line.get("request_id") == request_id
        ),
        "the app's access line with the load balancer's id",
    )


@pytest.mark.parametrize(
    ("request_id", "parent"),
    [
        ("has space", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
        ("x" * 129, "00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        ('quote"d', "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
        ("", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("ok", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
    ],
)
def test_malformed_id_or_trace_from_a_trusted_proxy_is_replaced(
    trusting_stack: RunningStack, request_id: str, parent: str
) -> None:
    """A malformed id gets a fresh one; a malformed traceparent is dropped with its tracestate."""
    echoed, received = seen(
        trusting_stack,
        {"X-Request-ID": request_id, "traceparent": parent, "tracestate": "vendor=abc"},
    )
    if request_id == "ok":
        assert echoed == "ok"
    else:
        assert echoed != request_id
        assert len(echoed) == 32
    assert received["x-request-id"] == echoed
    assert "traceparent" not in received
    assert "tracestate" not in received


def test_untrusted_client_id_and_trace_are_replaced(shared_stack: RunningStack) -> None:
    """From a client outside TRUSTED_PROXIES, even a well-formed id and trace are replaced."""
    echoed, received = seen(
        shared_stack, {"X-Request-ID": "client-chosen", "traceparent": PARENT, "tracestate": "a=b"}
    )
    assert echoed != "client-chosen"
    assert len(echoed) == 32
    assert received["x-request-id"] == echoed
    assert "traceparent" not in received
    assert "tracestate" not in received


def test_trusted_proxies_setting_is_what_decides(stacks: Stacks) -> None:
    """The same request keeps its id only when TRUSTED_PROXIES covers the peer (boundary /32)."""
    outside = stacks.start(TRUSTED_PROXIES="127.0.0.2/32")
    assert seen(outside, {"X-Request-ID": "lb-1"})[0] != "lb-1"
