"""A test-only ASGI app: the real app, plus /slow?seconds=N that answers after a pause.

The live tests serve it through the real stack (APP_MODULE=slow_app:app) to hold requests
in flight while the stack is stopped. It logs one JSON line when a slow request starts, so
a test can wait for "all in flight" by reading the log instead of sleeping. /slow bypasses
the app's middleware; /app-slow?seconds=N is the same pause as a route of the real app,
inside its middleware (its request deadline included). SERVICE_PACKAGE names the
service's package (its main.py's create_app() builds the real app).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

# The service's app: SERVICE_PACKAGE names its package (battery/conftest.py sets it).
real_app = importlib.import_module(f"{os.environ['SERVICE_PACKAGE']}.main").create_app()

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send


async def _app_slow(seconds: float) -> dict[str, str]:
    await asyncio.sleep(seconds)
    return {"status": "done"}


real_app.add_api_route("/app-slow", _app_slow, methods=["GET"])


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Serve /slow here and everything else (lifespan included) from the real app."""
    if scope["type"] != "http" or scope["path"] != "/slow":
        await real_app(scope, receive, send)
        return
    while (await receive()).get("more_body"):
        pass  # a POST's body is read whole, as a real handler would
    query = parse_qs(scope["query_string"].decode("latin-1"))
    seconds = float(query.get("seconds", ["2"])[0])
    line = {"level": "info", "logger": "slow_app", "message": "slow request started"}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
    await asyncio.sleep(seconds)
    body = b'{"status":"done"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
