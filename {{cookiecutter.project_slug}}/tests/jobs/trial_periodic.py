"""A periodic task firing every second, imported only by the periodic test's workers."""

from procrastinate import JobContext

from {{ cookiecutter.package_name }}.jobs.registry import job_queue

from .trial_tasks import record


# Six fields: the last is the second (croniter's order).
@job_queue.periodic(cron="* * * * * *", periodic_id="trial_tick")
@job_queue.task(name="trial_tick", pass_context=True)
async def trial_tick(context: JobContext, timestamp: int) -> None:
    """Record the tick this run is for."""
    await record(context, str(timestamp), "tick")
