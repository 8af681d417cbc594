"""The app the live tests serve (APP_MODULE=live_app:app): the real one plus test routes under
/_tests/ (why: at the end), inside the app's middleware. slow?seconds=N answers after N
seconds; boom raises (the error guard's 500); ws echoes WebSocket text and events streams
server-sent events, as FastAPI's docs write them. events logs one line as it starts: a test
can wait for streams in flight. Test-only: gunicorn imports it from its working directory,
tests/live/."""

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from {{ cookiecutter.package_name }}.main import create_app

logger = logging.getLogger("live_app")
router = APIRouter(prefix="/_tests", include_in_schema=False)


@router.get("/slow")
async def slow(seconds: float) -> dict[str, str]:
    await asyncio.sleep(seconds)
    return {"status": "done"}


@router.get("/boom")
async def boom() -> None:
    raise RuntimeError("boom")


@router.websocket("/ws")
async def echo(websocket: WebSocket) -> None:
    """Send each text message back; log one line once open (it carries the request id)."""
    await websocket.accept()
    logger.info("websocket opened")
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        return


@router.get("/events")
async def events(
    tokens: int, interval: float, size: int = 0, stall: float = 0
) -> StreamingResponse:
    """``tokens`` server-sent events, ``interval`` seconds apart, each "<n> <time it was sent>"
    padded with ``size`` bytes; then, given ``stall``, that many seconds of silence before the
    end (a stream the app's STREAM_IDLE_TIMEOUT_SECONDS cuts). Logs one line when it starts."""
    logger.info("stream started")

    async def stream() -> AsyncIterator[str]:
        for number in range(tokens):
            if number:
                await asyncio.sleep(interval)
            yield f"data: {number} {time.time():.6f} {'x' * size}\n\n"
        await asyncio.sleep(stall)

    return StreamingResponse(stream(), media_type="text/event-stream")


# Under a prefix of their own: the app's routes come first, so a route it adds at the same
# path (its /ws, its /events) would answer these tests instead. No app serves /_tests/
# (test_main.py checks), and nginx proxies it as any path: no location of its own.
app = create_app()
app.include_router(router)
