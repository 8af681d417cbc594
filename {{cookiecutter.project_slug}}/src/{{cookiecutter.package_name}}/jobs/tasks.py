"""The tasks the worker runs. A job may run more than once (docs/jobs.md, At least once): a
worker killed after the work and before recording it leaves the job to run again elsewhere, so
each task is written to be run twice without harm."""

import asyncio
import logging
from typing import Any

import httpx
from procrastinate import JobContext

from .registry import job_queue

logger = logging.getLogger(__name__)

# The webhook call's whole budget (httpx's timeouts are per read): a slow receiver holds one
# of the worker's slots no longer than this, then the job is retried.
WEBHOOK_BUDGET_SECONDS = 10.0


# A name of its own, not the function's dotted path: moving the function strands no queued job.
@job_queue.task(name="announce_item", pass_context=True)
async def announce_item(context: JobContext, *, item: dict[str, Any], idempotency_key: str) -> None:
    """POST a new item to ITEM_WEBHOOK_URL with an ``Idempotency-Key`` header. A second run
    sends the same key, which the receiver uses to keep the first: the half of at-least-once
    delivery the receiver owns. Any answer but a 2xx is an error, retried with backoff."""
    url = context.additional_context["settings"].item_webhook_url
    if url is None:
        logger.info("new item; no webhook configured", extra={"item_id": item["id"]})
        return
    headers = {"Idempotency-Key": idempotency_key}
    async with asyncio.timeout(WEBHOOK_BUDGET_SECONDS), httpx.AsyncClient() as client:
        response = await client.post(str(url), json=item, headers=headers)
    response.raise_for_status()
    logger.info("new item announced", extra={"item_id": item["id"], "status": response.status_code})


# Hourly, off the hour most schedules crowd. Every worker runs the periodic deferrer; the
# queue records each tick once, so one job runs per tick however many workers there are.
@job_queue.periodic(cron="17 * * * *", periodic_id="prune")
@job_queue.task(name="prune_finished_jobs", queueing_lock="prune_finished_jobs", pass_context=True)
async def prune_finished_jobs(context: JobContext, timestamp: int) -> None:
    """Delete failed, cancelled and aborted jobs older than JOBS_KEEP_FAILED_HOURS (succeeded
    ones are deleted as they finish), so the queue's tables stay bounded."""
    hours = context.additional_context["settings"].jobs_keep_failed_hours
    await context.app.job_manager.delete_old_jobs(
        nb_hours=hours, include_failed=True, include_cancelled=True, include_aborted=True
    )
    logger.info("old jobs pruned", extra={"older_than_hours": hours, "tick": timestamp})
