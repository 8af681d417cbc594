"""Queue a job in the caller's transaction, on the app's own asyncpg session: the job commits
or rolls back with the rows that caused it, and no worker sees it before the commit.

procrastinate's own defer takes a psycopg connection, and the web app stays on asyncpg
(docs/jobs.md, One driver for requests): this is procrastinate's insert, called on the
session's connection. tests/jobs/test_defer.py holds it to the locked version's function."""

import json
from typing import Any

from opentelemetry import propagate
from procrastinate.tasks import Task
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from {{ cookiecutter.package_name }}.context import REQUEST_ID

# A job's arguments carry the deferring request's id and trace context under this key;
# observe.py takes it out before the task is called.
ORIGIN_KEY = "_origin"
# procrastinate's defer_jobs query (its sql/queries.sql), each parameter cast: asyncpg
# infers no type inside a row constructor.
DEFER_JOB = text(
    """
    SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW(
        CAST(:queue AS varchar), CAST(:task AS varchar), CAST(:priority AS integer),
        CAST(:lock AS text), CAST(:queueing_lock AS text), CAST(CAST(:args AS text) AS jsonb),
        CAST(NULL AS timestamptz)
    )::procrastinate_job_to_defer_v1])) AS id
    """
)


async def defer(session: AsyncSession, task: Task[Any, Any, Any], **arguments: Any) -> int:
    """Queue ``task(**arguments)`` in ``session``'s transaction (begun if none is); its id.
    The arguments must be JSON: a job outlives the process that queued it."""
    origin: dict[str, str | None] = {"request_id": REQUEST_ID.get()}
    propagate.inject(origin)  # traceparent (and tracestate) of the current span, if traced
    values = {
        "queue": task.queue,
        "task": task.name,
        "priority": task.priority,
        "lock": task.lock,
        "queueing_lock": task.queueing_lock,
        "args": json.dumps({**arguments, ORIGIN_KEY: origin}),
    }
    job_id: int = (await session.execute(DEFER_JOB, values)).scalar_one()
    return job_id
