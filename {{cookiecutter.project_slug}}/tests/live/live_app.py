"""The app the live tests serve (APP_MODULE=live_app:app): the real one plus two routes,
inside the app's middleware. /slow?seconds=N answers after N seconds and logs one line when
it starts, so a test can wait for requests in flight; /boom raises (the error guard's 500).
Test-only: gunicorn imports it from its working directory, tests/live/."""

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


@app.get("/boom", include_in_schema=False)
async def boom() -> None:
    raise RuntimeError("boom")
