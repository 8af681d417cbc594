"""``WebSocket /channels/{name}``: each text message a session sends reaches every session of
that channel once, its own included, on any worker of any pod (db/channels.py's hub, on
PostgreSQL; docs/streaming.md, State across workers and pods)."""

import asyncio
import contextlib
import re

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect, status

{% if cookiecutter.auth == "oidc" -%}
from {{ cookiecutter.package_name }}.auth import require_scopes
{% endif -%}
from {{ cookiecutter.package_name }}.db.channels import (
    LOST,
    PAYLOAD_BYTES,
    ChannelHub,
    ChannelsUnavailableError,
    MessageTooBigError,
    Subscriber,
)
from {{ cookiecutter.package_name }}.db.engine import RETRY_AFTER

NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
BAD_NAME = "a channel name is 1-64 characters of A-Z, a-z, 0-9, '_', '.' and '-'"
UNAVAILABLE = "the channels are unavailable; retry shortly"
# Close codes (RFC 6455) and reasons for a message the channel cannot carry.
BINARY = (1003, "text messages only")
TOO_BIG = (1009, f"message too big: at most {PAYLOAD_BYTES} bytes as JSON with the channel name")
# Seconds a close may wait for a client's backed-up writes before the session is dropped: a
# reader that was slow drains its backlog first, and its close frame comes after it (1 s was
# too short for a test's client on a loaded 2-CPU machine: the frame never came).
CLOSE_SECONDS = 5.0

Close = tuple[int, str] | None  # a session's end: a close frame's code and reason, or none
router = APIRouter(tags=["channels"])


{% if cookiecutter.auth == "oidc" -%}
# A session both reads and writes: its handshake needs the write scope (docs/auth.md).
@router.websocket("/channels/{name}", dependencies=[require_scopes("channels:write")])
{%- else -%}
@router.websocket("/channels/{name}")
{%- endif %}
async def channel(websocket: WebSocket, name: str) -> None:
    """Subscribe to channel ``name`` and publish each text message sent to it."""
    if not NAME.fullmatch(name):  # the handshake's answer: a JSON 400, never a session
        raise HTTPException(status.HTTP_400_BAD_REQUEST, BAD_NAME)
    hub: ChannelHub = websocket.app.state.channels
    try:
        subscriber = await hub.subscribe(name)  # listening before the client may publish
    except ChannelsUnavailableError:
        headers = {"Retry-After": RETRY_AFTER}
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, UNAVAILABLE, headers) from None
    try:
        await websocket.accept()
        close = await session(websocket, hub, subscriber)
    finally:
        hub.unsubscribe(subscriber)
    if close is not None:
        with contextlib.suppress(TimeoutError, WebSocketDisconnect, RuntimeError):
            await asyncio.wait_for(websocket.close(*close), CLOSE_SECONDS)


async def session(websocket: WebSocket, hub: ChannelHub, subscriber: Subscriber) -> Close:
    """Publish what the client sends, forward what the channel carries, until either ends."""
    tasks = {
        asyncio.create_task(publish(websocket, hub, subscriber.channel)),
        asyncio.create_task(forward(websocket, subscriber)),
        asyncio.create_task(ended(subscriber)),
    }
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return next((close for task in done if (close := task.result()) is not None), None)


async def publish(websocket: WebSocket, hub: ChannelHub, channel: str) -> Close:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return None
        if message.get("text") is None:
            return BINARY
        try:
            await hub.publish(channel, message["text"])
        except MessageTooBigError:
            return TOO_BIG
        except ChannelsUnavailableError:
            return LOST


async def forward(websocket: WebSocket, subscriber: Subscriber) -> Close:
    try:
        while True:
            await websocket.send_text(await subscriber.queue.get())
    except WebSocketDisconnect:
        return None


async def ended(subscriber: Subscriber) -> Close:
    await subscriber.ended.wait()
    return subscriber.close
