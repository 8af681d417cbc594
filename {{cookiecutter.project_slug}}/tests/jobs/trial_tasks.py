"""Tasks the jobs tests run in real workers (``python -m <package>.worker jobs.trial_tasks``):
each records its runs in the test database's trial_runs table, through the worker's own pool."""

import asyncio
import os

from procrastinate import JobContext

from {{ cookiecutter.package_name }}.jobs.registry import job_queue

RECORD = """
INSERT INTO trial_runs (key, attempt, pid, event)
VALUES (%(key)s, %(attempt)s, %(pid)s, %(event)s)
"""


async def record(context: JobContext, key: str, event: str) -> None:
    """One row: this run of ``key``, its attempt and process, and what happened."""
    attempt = context.job.attempts + 1
    values = {"key": key, "attempt": attempt, "pid": os.getpid(), "event": event}
    await context.app.connector.execute_query_async(RECORD, **values)


@job_queue.task(name="trial_sleep", pass_context=True)
async def trial_sleep(context: JobContext, *, key: str, seconds: float) -> None:
    """Record the start, sleep, record the end."""
    await record(context, key, "started")
    await asyncio.sleep(seconds)
    await record(context, key, "finished")


@job_queue.task(name="trial_fail", pass_context=True)
async def trial_fail(context: JobContext, *, key: str) -> None:
    """Record the start, then fail."""
    await record(context, key, "started")
    raise RuntimeError(f"trial {key} fails on purpose")


@job_queue.task(name="trial_stuck", pass_context=True)
async def trial_stuck(context: JobContext, *, key: str) -> None:
    """Record the start; a first attempt then hangs (until its worker is killed), a later one
    records its end at once."""
    await record(context, key, "started")
    if context.job.attempts == 0:
        await asyncio.sleep(3600)
    await record(context, key, "finished")
