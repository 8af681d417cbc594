"""The app the live tests serve (APP_MODULE=live_app:app): the real one plus GET /slow.

/slow?seconds=N answers after N seconds, inside the app's middleware (its deadline
included), and logs one line when it starts so a test can wait for requests in flight.
Test-only: gunicorn imports it from its working directory, tests/live/.
"""

from __future__ import annotations

import asyncio
import logging

from {{ cookiecutter.package_name }}.main import create_app

app = create_app()
logger = logging.getLogger("live_app")


@app.get("/slow", include_in_schema=False)
async def slow(seconds: float) -> dict[str, str]:
    """Hold the request for ``seconds``."""
    logger.info("slow request started")
    await asyncio.sleep(seconds)
    return {"status": "done"}
