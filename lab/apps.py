"""The app variants the lab serves, as `lab.apps:<variant>`.

- shipped: the service's real application from its factory (``$LAB_FACTORY``, which
  lab/project.py found: ``create_app`` beside the app gunicorn serves), with its middleware
  stack, plus the lab's endpoints under /bench (among them the peers' held condition's event
  stream and WebSocket, written as FastAPI's docs write them).
- bare: the same app with no middleware at all: the baseline.

The template's experiments (scripts/experiments) build their variants, such as the
BaseHTTPMiddleware twins, on `build_bare()`.

Each variant is built only when a server imports it (module `__getattr__`). Runs in the
measured project's Python (its servers import this module); depends on FastAPI.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI, Response, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from lab.project import FACTORY_VARIABLE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ONE_MIB = 1024 * 1024
# Built once: the 1 MiB experiment measures moving bytes through the stack, not encoding JSON.
_LARGE_BODY = b'{"data":"' + b"x" * (ONE_MIB - len(b'{"data":""}')) + b'"}'

router = APIRouter(prefix="/bench")


@router.get("/small")
async def small() -> dict[str, str | int]:
    return {"message": "hello", "count": 3}


@router.get("/small-sync")
def small_sync() -> dict[str, str | int]:
    return {"message": "hello", "count": 3}


@router.get("/1mb")
async def large() -> Response:
    return Response(_LARGE_BODY, media_type="application/json")


@router.get("/1mb-sync")
def large_sync() -> Response:
    return Response(_LARGE_BODY, media_type="application/json")


@router.get("/events")
async def events(tokens: int, interval: float) -> StreamingResponse:
    """``tokens`` server-sent events, ``interval`` seconds apart (lab/held.py's streams)."""

    async def stream() -> AsyncIterator[str]:
        for number in range(tokens):
            if number:
                await asyncio.sleep(interval)
            yield f"data: {number}\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


@router.websocket("/ws")
async def echo(websocket: WebSocket) -> None:
    """Send each text message back; held idle, it costs only the open session."""
    await websocket.accept()
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        return


def build_shipped() -> FastAPI:
    """The real app (its middlewares, settings, routes and logging) with the endpoints added."""
    module, _, function = os.environ[FACTORY_VARIABLE].partition(":")
    application: FastAPI = getattr(importlib.import_module(module), function)()
    application.include_router(router)
    return application


def build_bare() -> FastAPI:
    """The shipped app with its middleware list emptied: same routes, settings and start-up,
    so against `shipped` only the middleware differs. Starlette builds the middleware stack
    from `user_middleware` at the first request, so clearing it here removes them all."""
    application = build_shipped()
    application.user_middleware.clear()
    return application


_BUILDERS = {"bare": build_bare, "shipped": build_shipped}


def __getattr__(name: str) -> FastAPI:
    # Servers import "lab.apps:<variant>" with getattr, which lands here (PEP 562).
    if name not in _BUILDERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    application = _BUILDERS[name]()
    globals()[name] = application
    return application
