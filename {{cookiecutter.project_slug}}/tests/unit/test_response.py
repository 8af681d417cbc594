"""The shared send wrapper: one per request, reused by inner middleware, status and headers."""

import asyncio

from starlette.types import Message

from {{ cookiecutter.package_name }}.middleware.response import ResponseTracker, tracker

from .asgi import header

START: Message = {"type": "http.response.start", "status": 201, "headers": [(b"a", b"1")]}
BODY: Message = {"type": "http.response.body", "body": b"{}"}


def deliver(response: ResponseTracker, message: Message) -> None:
    """Send one message through the tracker, to the end."""

    async def run() -> None:
        await response.send(message)

    asyncio.run(run())


def test_a_tracker_records_the_status_and_passes_every_message_on() -> None:
    """No status before the response starts; the start's status after; messages unchanged."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    response = tracker(send)
    before = response.status
    deliver(response, dict(START))
    assert (before, response.status) == (None, 201)
    deliver(response, BODY)
    assert sent[1] is BODY
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]


def test_headers_are_added_to_a_new_list() -> None:
    """The response object's own header list is never changed (it may be sent again)."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    own = [(b"a", b"1")]
    response = tracker(send)
    response.headers += ((b"x-request-id", b"abc"),)
    deliver(response, {"type": "http.response.start", "status": 200, "headers": own})
    assert header(sent[0], b"x-request-id") == b"abc"
    assert own == [(b"a", b"1")]


def test_an_inner_middleware_reuses_the_outer_tracker() -> None:
    """Given a tracker's send, tracker() returns that tracker: one wrapper per request."""

    async def send(_message: Message) -> None:
        return None

    outer = tracker(send)
    assert tracker(outer.send) is outer
    assert isinstance(outer, ResponseTracker)


def test_behind_another_wrapper_a_new_tracker_is_made() -> None:
    """A foreign send wrapper in between could send on its own: track below it instead."""

    async def send(_message: Message) -> None:
        return None

    outer = tracker(send)

    async def foreign(message: Message) -> None:
        await outer.send(message)

    inner = tracker(foreign)
    assert inner is not outer
    deliver(inner, dict(START))
    assert inner.status == outer.status == 201


def test_the_default_headers_are_never_shared_between_requests() -> None:
    """Adding a header to one request's tracker leaves the next request's empty."""

    async def send(_message: Message) -> None:
        return None

    first = tracker(send)
    first.headers += ((b"x-request-id", b"one"),)
    assert tracker(send).headers == ()
