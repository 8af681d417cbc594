"""Jobs whose worker died (SIGKILL, OOM, a lost node) run again, and the worker knows its own
heartbeat. Each beat, every worker (``Beat``) retries the jobs held by workers silent for
STALLED_AFTER_BEATS beats (procrastinate finds them; running them again is the project's
choice: docs/jobs.md, Nothing stays stuck), reads its own heartbeat's age for /livez and
samples the queue for /metrics."""

import logging
import time

from procrastinate import App
from procrastinate.exceptions import ConnectorException
from prometheus_client import Counter, Gauge

logger = logging.getLogger(__name__)

# Beats a worker may miss before its jobs are taken from it (procrastinate's own default is
# 3: a beat every 10 s, stalled after 30 s).
STALLED_AFTER_BEATS = 3

STALLED_RECOVERED = Counter("jobs_stalled_recovered", "Jobs of a dead worker queued again")
WAITING = Gauge("jobs_waiting", "Jobs due and not started, by queue", ["queue"])
OLDEST_WAITING = Gauge(
    "job_oldest_waiting_seconds", "How long the oldest due job has waited, by queue", ["queue"]
)

# This worker's heartbeat as the database has it (a row another worker pruned: none).
OWN_HEARTBEAT = """
SELECT extract(epoch FROM now() - last_heartbeat)::float AS age
FROM procrastinate_workers WHERE id = %(worker_id)s
"""
# Due jobs by queue, and the oldest one's wait: since its retry time, else since it was queued.
QUEUE_STATE = """
SELECT j.queue_name AS queue, count(*) AS waiting,
       extract(epoch FROM now() - min(coalesce(j.scheduled_at, deferred.at)))::float AS oldest
FROM procrastinate_jobs j
LEFT JOIN LATERAL (
    SELECT min(e.at) AS at FROM procrastinate_events e
    WHERE e.job_id = j.id AND e.type = 'deferred'
) deferred ON true
WHERE j.status = 'todo' AND (j.scheduled_at IS NULL OR j.scheduled_at <= now())
GROUP BY j.queue_name
"""


class Beat:
    """One worker's recovery sweep and heartbeat watch, run every ``interval`` seconds."""

    def __init__(self, app: App, interval: float) -> None:
        self.app, self.interval = app, interval
        # Monotonic time of the newest heartbeat seen in the database; from the start until
        # the first sweep, the start (a worker registers its heartbeat as it starts).
        self._heartbeat_at = time.monotonic()
        self._queues: set[str] = set()

    @property
    def stalled_after(self) -> float:
        """Seconds of silence after which a worker's jobs are taken from it."""
        return STALLED_AFTER_BEATS * self.interval

    def heartbeat_age(self) -> float:
        """Seconds since this worker's newest heartbeat the database confirmed."""
        return time.monotonic() - self._heartbeat_at

    async def sweep(self, worker_id: int | None) -> None:
        """One beat: stalled jobs retried, the heartbeat read, the queue sampled."""
        manager = self.app.job_manager
        stalled = await manager.get_stalled_jobs(seconds_since_heartbeat=self.stalled_after)
        recovered = 0
        # Never its own: a worker sweeping is alive, whatever a late beat of its own says.
        for job in (job for job in stalled if worker_id is None or job.worker_id != worker_id):
            try:
                await manager.retry_job(job)
            except ConnectorException:  # another worker's sweep retried it first
                continue
            recovered += 1
            extra = {"job_id": job.id, "task": job.task_name, "attempt": job.attempts + 2}
            logger.warning("job of a stalled worker queued again", extra=extra)
        STALLED_RECOVERED.inc(recovered)
        if worker_id is not None:
            await self._read_heartbeat(worker_id)
        await self._sample_queue()

    async def _read_heartbeat(self, worker_id: int) -> None:
        connector = self.app.connector
        rows = await connector.execute_query_all_async(OWN_HEARTBEAT, worker_id=worker_id)
        if rows:  # pruned: this worker counts as dead, and its age keeps growing for /livez
            self._heartbeat_at = time.monotonic() - float(rows[0]["age"])

    async def _sample_queue(self) -> None:
        rows = await self.app.connector.execute_query_all_async(QUEUE_STATE)
        seen = {str(row["queue"]): row for row in rows}
        for queue in self._queues - set(seen):  # emptied since the last beat
            WAITING.labels(queue).set(0)
            OLDEST_WAITING.labels(queue).set(0)
        for queue, row in seen.items():
            WAITING.labels(queue).set(int(row["waiting"]))
            OLDEST_WAITING.labels(queue).set(max(0.0, float(row["oldest"])))
        self._queues |= set(seen)
