"""A test-only ASGI app: the real app plus routes that misbehave on purpose.

The battery serves it through the service's real stack (`python -m serving_stack` with
APP_MODULE=fault_app:app) so every fault crosses nginx, the socket and gunicorn. Routes live
inside the real app, behind its middleware (request id, access log, deadline, error guard):

    GET  /fault/sleep?seconds=S   awaits S seconds; logs "fault handler cancelled" if cancelled
    GET  /fault/block?seconds=S   blocks the event loop S seconds (what the heartbeat catches)
    GET  /fault/crash             raises: the app's JSON 500
    GET  /fault/whoami            the client address and scheme the app was given
    GET  /fault/pid               the pid of the worker that answered
    GET  /fault/headers           the request headers and URL the app was given
    GET  /fault/unready           the app's own 503, with its own Retry-After (7)
    GET  /fault/download?mib=N    N MiB of zeros, streamed in 64 KiB chunks (no length)
    POST /fault/echo              reads a JSON body and returns it (201)
    POST /fault/model             validates a JSON body against a strict model, no size limit
    POST /fault/exit              the worker process dies mid-request (nginx answers 502)

Inputs: FAULT_APP_FAIL_AT_STARTUP=import|lifespan makes the app fail to start that way;
FAULT_APP_FAIL_IF_EXISTS=PATH makes it fail at import while PATH exists (a bad deploy: the
running generation started fine, the next one will not). SERVICE_PACKAGE names the
service's package, whose main.py has create_app(); nothing else of the service is assumed.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict

# The service's app: SERVICE_PACKAGE names its package (battery/conftest.py sets it).
create_app = importlib.import_module(f"{os.environ['SERVICE_PACKAGE']}.main").create_app

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fastapi import FastAPI

_FAIL = os.environ.get("FAULT_APP_FAIL_AT_STARTUP", "")
_FAIL_IF = os.environ.get("FAULT_APP_FAIL_IF_EXISTS", "")
if _FAIL == "import" or (_FAIL_IF and Path(_FAIL_IF).exists()):
    raise RuntimeError("fault_app: failing at import, as asked (FAULT_APP_FAIL_*)")

app = create_app()


def _say(message: str, request: Request, **fields: Any) -> None:
    """One JSON line on stdout (the stack's log), with the request id nginx sent."""
    line = {
        "level": "info",
        "logger": "fault_app",
        "message": message,
        "request_id": request.headers.get("x-request-id"),
        **fields,
    }
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


@app.get("/fault/sleep")
async def sleep(request: Request, seconds: float = 1.0) -> dict[str, float]:
    """Answer after an await of ``seconds``; log when started and when cancelled."""
    _say("fault handler started", request, seconds=seconds)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _say("fault handler cancelled", request)
        raise
    return {"slept": seconds}


@app.get("/fault/block")
async def block(request: Request, seconds: float = 1.0) -> dict[str, float]:
    """Block this worker's event loop: nothing else on the worker runs meanwhile."""
    _say("fault handler blocking", request, seconds=seconds, pid=os.getpid())
    time.sleep(seconds)
    return {"blocked": seconds}


@app.get("/fault/crash")
async def crash() -> dict[str, str]:
    """Raise an unhandled exception."""
    raise RuntimeError("fault_app: crash, as asked")


@app.get("/fault/whoami")
async def whoami(request: Request) -> dict[str, str | None]:
    """The client address and scheme after uvicorn applied the proxy headers."""
    return {"client": request.client.host if request.client else None, "scheme": request.url.scheme}


@app.get("/fault/headers")
async def headers(request: Request) -> dict[str, Any]:
    """The headers (names lower case) and the URL the app sees, after nginx and uvicorn."""
    return {"headers": dict(request.headers), "url": str(request.url)}


@app.get("/fault/unready")
async def unready() -> JSONResponse:
    """A 503 the app itself answers, as a readiness endpoint does."""
    return JSONResponse({"detail": "not ready on purpose"}, 503, {"Retry-After": "7"})


@app.get("/fault/pid")
async def pid() -> dict[str, int]:
    """The pid of the worker that answered."""
    return {"pid": os.getpid()}


@app.get("/fault/download")
async def download(mib: int = 1) -> StreamingResponse:
    chunk = bytes(64 * 1024)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(mib * 16):
            yield chunk

    return StreamingResponse(chunks(), media_type="application/octet-stream")


@app.post("/fault/echo", status_code=201)
async def echo(request: Request) -> dict[str, Any]:
    """Read the whole JSON body and send it back: a non-idempotent request for reload tests."""
    body: dict[str, Any] = await request.json()
    return body


class Strict(BaseModel):
    """A model that turns each unknown key and each wrong list item into an error."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    numbers: list[int] = []


@app.post("/fault/model")
async def model(body: Strict) -> dict[str, int]:
    """Validate a body of any size (up to nginx's limit): errors.py's worst case."""
    return {"numbers": len(body.numbers)}


@app.post("/fault/exit")
async def exit_worker() -> None:
    """The worker dies without answering, as a crash in C code or the OOM killer would do."""
    os._exit(1)


async def _connect_dependencies() -> None:
    """Stands for a database that refuses connections at start."""
    raise RuntimeError("fault_app: failing at lifespan startup, as asked")


@asynccontextmanager
async def _failing_lifespan(application: FastAPI) -> AsyncIterator[None]:
    await _connect_dependencies()
    yield


if _FAIL == "lifespan":
    app.router.lifespan_context = _failing_lifespan
