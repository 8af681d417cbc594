"""A test-only ASGI app: the real app, plus WebSocket routes inside its middleware.

/ws echoes each text message; /ws-flood sends 64 KiB messages as fast as the connection
takes them, until it closes (a client that never reads); /events is an event stream of one
event a second, forever (a subscriber that stays). SERVICE_PACKAGE names the service's
package (its main.py's create_app() builds the real app).
"""

from __future__ import annotations

import asyncio
import importlib
import os
from typing import TYPE_CHECKING

from fastapi import WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

app = importlib.import_module(f"{os.environ['SERVICE_PACKAGE']}.main").create_app()


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        return


async def flood(websocket: WebSocket) -> None:
    await websocket.accept()
    chunk = "x" * 65536
    try:
        while True:
            await websocket.send_text(chunk)
    except (WebSocketDisconnect, OSError, RuntimeError):  # the connection went away
        return


app.add_api_websocket_route("/ws", echo)
app.add_api_websocket_route("/ws-flood", flood)


async def ticks() -> AsyncIterator[str]:
    number = 0
    while True:
        yield f"data: {number}\n\n"
        number += 1
        await asyncio.sleep(1)


async def events() -> StreamingResponse:
    # The stack's response middleware adds X-Accel-Buffering: no to text/event-stream.
    return StreamingResponse(ticks(), media_type="text/event-stream")


app.add_api_route("/events", events, methods=["GET"])
