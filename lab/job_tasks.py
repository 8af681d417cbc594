"""The tasks lab/jobs.py measures, on the project's own queue: imported by the project's worker
(``python -m <package>.worker lab.job_tasks``), which finds the package in LAB_JOBS_PACKAGE."""

from __future__ import annotations

import asyncio
import importlib
import os
import time
from typing import Any

# Any: the queue is the project's (the default bake, which types the lab, has no procrastinate).
registry = importlib.import_module(f"{os.environ['LAB_JOBS_PACKAGE']}.jobs.registry")
job_queue: Any = registry.job_queue

STAMP = "INSERT INTO lab_job_starts (key, pid, started) VALUES (%(key)s, %(pid)s, %(started)s)"


async def noop() -> None:
    """Nothing: what the queue itself costs per job."""


async def stamp(context: Any, *, key: str, seconds: float = 0) -> None:
    """Record when (wall clock) and where this run started, then sleep ``seconds``."""
    started = {"key": key, "pid": os.getpid(), "started": time.time()}
    await context.app.connector.execute_query_async(STAMP, **started)
    await asyncio.sleep(seconds)


# Registered by a call, not as decorators: the queue is typed Any here.
lab_noop = job_queue.task(name="lab_noop")(noop)
lab_stamp = job_queue.task(name="lab_stamp", pass_context=True)(stamp)
