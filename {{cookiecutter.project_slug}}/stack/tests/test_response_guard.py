"""ResponseGuard, called as plain ASGI: an error after a whole response is logged and kept
from uvicorn; before or during a response it goes on to uvicorn, which answers or cuts."""

import asyncio
import logging
from collections.abc import MutableMapping
from typing import Any
from unittest.mock import AsyncMock

import pytest

from serving_stack.response_guard import ResponseGuard

Message = MutableMapping[str, Any]


def run(*messages: Message, scope_type: str = "http") -> list[Message]:
    """What reaches the server from an app that sends these messages (reading nothing), then
    raises."""
    server = AsyncMock()

    async def app(_scope: Any, _receive: Any, send: Any) -> None:
        for message in messages:
            await send(message)
        raise RuntimeError("boom")

    asyncio.run(ResponseGuard(app)({"type": scope_type}, AsyncMock(), server))
    return [call.args[0] for call in server.await_args_list]


START = {"type": "http.response.start", "status": 500, "headers": []}
BODY = {"type": "http.response.body", "body": b"Internal Server Error"}


def test_an_error_after_the_whole_response_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Starlette's way: its 500 sent whole, then the exception re-raised."""
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        sent = run(START, BODY)

    assert sent == [START, BODY]
    (record,) = caplog.records
    assert record.message == "Exception in ASGI application after its response was sent"
    assert record.exc_info is not None


@pytest.mark.parametrize(
    ("scope_type", "messages"),
    [
        ("http", ()),
        ("http", (START,)),
        ("http", (START, {"type": "http.response.body", "body": b"part", "more_body": True})),
        ("lifespan", ()),
        ("websocket", (START, BODY)),  # not HTTP: untouched, even after a whole "response"
    ],
    ids=["before the response", "after its start", "mid-body", "lifespan", "websocket"],
)
def test_an_error_before_the_response_ends_goes_on_to_the_server(
    scope_type: str, messages: tuple[Message, ...]
) -> None:
    """uvicorn must see it: it answers 500 and closes, or cuts the started response; other
    scopes than HTTP pass through untouched."""
    with pytest.raises(RuntimeError, match="boom"):
        run(*messages, scope_type=scope_type)
