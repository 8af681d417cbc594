"""A test-only app: the real application, plus GET /hold?seconds=N inside its middleware.

The observability tests serve it through the real stack (APP_MODULE=observed_app:app) to
keep a request in flight in a known worker: /hold logs a JSON line with that worker's pid
before it waits, so a test can kill exactly that worker. Unlike slow_app.py, /hold is a
route of the real app, so the metrics middleware counts it like any other. SERVICE_PACKAGE
names the service's package (its main.py's create_app() builds the real app).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys

# The service's app: SERVICE_PACKAGE names its package (battery/conftest.py sets it).
create_app = importlib.import_module(f"{os.environ['SERVICE_PACKAGE']}.main").create_app

app = create_app()


@app.get("/hold", include_in_schema=False)
async def hold(seconds: float = 30.0) -> dict[str, str]:
    """Answer after ``seconds``, having logged this worker's pid."""
    line = {"level": "info", "logger": "observed_app", "message": "holding", "pid": os.getpid()}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
    await asyncio.sleep(seconds)
    return {"status": "done"}
