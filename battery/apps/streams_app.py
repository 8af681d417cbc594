"""A test-only ASGI app: the real app, plus WebSocket routes inside its middleware.

/ws echoes each text message; /ws-flood sends 64 KiB messages as fast as the connection
takes them, until it closes (a client that never reads). SERVICE_PACKAGE names the service's
package (its main.py's create_app() builds the real app).
"""

from __future__ import annotations

import importlib
import os

from fastapi import WebSocket, WebSocketDisconnect

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
