"""The job worker, a process type of its own from the service's image: this module run with
``python -m`` (`make worker`). It runs the tasks of jobs/, serves /livez and /metrics on
JOBS_HEALTH_PORT, and stops in order on SIGTERM or SIGINT: no new job is fetched, running ones
get JOBS_DRAIN_SECONDS to finish, what is left is aborted and queued again (docs/jobs.md)."""

import argparse
import asyncio
import contextlib
import importlib
import logging
import signal
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import uvicorn
from procrastinate import RetryStrategy
from procrastinate.worker import Worker
from psycopg_pool import AsyncConnectionPool
from pydantic import ValidationError

from .jobs.health import health_app
from .jobs.observe import JobFields, configure_tracing, observe
from .jobs.recovery import STALLED_AFTER_BEATS, Beat
from .jobs.registry import TASK_MODULES, job_queue
from .logs import configure_logging
from .settings import Settings, refusal

logger = logging.getLogger(__name__)

# procrastinate's default: new jobs come by LISTEN/NOTIFY, this only catches retries falling due.
FETCH_POLL_SECONDS = 5.0

# Shown in pg_stat_activity beside the web workers' connections.
APPLICATION_NAME = {{ (cookiecutter.project_slug ~ "-worker") | string_literal }}


class HealthServer(uvicorn.Server):
    """uvicorn without its own signal handling: the worker's handler drains the jobs first,
    then ends this server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def conninfo(settings: Settings) -> str:
    """DATABASE_URL as libpq reads it (the settings keep it in asyncpg's spelling)."""
    parts = urlsplit(settings.database_url.get_secret_value())
    return urlunsplit(parts._replace(scheme="postgresql"))


def apply_retry_policy(settings: Settings) -> None:
    """Give every task without a retry policy of its own the settings' one: a failed job and
    one aborted at a stop are queued again, JOBS_RETRY_BASE_SECONDS ** attempt later."""
    # procrastinate counts retries, not runs; and 0 would retry for ever: one run is no policy.
    retries = settings.jobs_max_attempts - 1
    base = settings.jobs_retry_base_seconds
    policy = RetryStrategy(max_attempts=retries, exponential_wait=base) if retries else None
    for task in job_queue.tasks.values():
        task.retry_strategy = task.retry_strategy or policy


async def beat_until_stopped(beat: Beat, worker: Worker) -> None:
    """Sweep every beat; a sweep that fails (the database away) is logged and tried again."""
    while True:
        try:
            await beat.sweep(worker.worker_id)
        except Exception:
            logger.exception("job recovery sweep failed; retrying next beat")
        await asyncio.sleep(beat.interval)


async def run(settings: Settings) -> None:
    """Run the worker until a signal stops it, its health server beside it."""
    apply_retry_policy(settings)
    interval = settings.jobs_heartbeat_seconds
    worker = Worker(
        job_queue,
        name="worker",
        concurrency=settings.jobs_concurrency,
        shutdown_graceful_timeout=settings.jobs_drain_seconds,
        delete_jobs="successful",  # failed ones stay for a person, pruned later (jobs/tasks.py)
        # A retried job's time comes without a notification: looked for at least every beat.
        fetch_job_polling_interval=min(FETCH_POLL_SECONDS, interval),
        update_heartbeat_interval=interval,
        stalled_worker_timeout=STALLED_AFTER_BEATS * interval,
        additional_context={"settings": settings},
        worker_middleware=[observe],
        install_signal_handlers=False,  # below: the worker first, then the health server
    )
    beat = Beat(job_queue, interval)
    health = uvicorn.Config(
        health_app(beat.heartbeat_age, beat.stalled_after),
        host=str(settings.jobs_health_host),
        port=settings.jobs_health_port,
        lifespan="off",
        log_config=None,  # the root logger's JSON lines
        access_log=False,
    )
    server = HealthServer(health)
    stop_requested: list[float] = []  # when the first stop signal came (monotonic)

    def stop(signum: signal.Signals) -> None:
        if not stop_requested:
            stop_requested.append(time.monotonic())
            drain = {"signal": signum.name, "drain_seconds": settings.jobs_drain_seconds}
            logger.info("stopping: no new job; running ones may finish", extra=drain)
        worker.stop()  # type: ignore[no-untyped-call]  # procrastinate's, unannotated

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    pool = AsyncConnectionPool(
        conninfo(settings),
        min_size=1,
        max_size=settings.jobs_max_connections,
        kwargs={"application_name": APPLICATION_NAME, "connect_timeout": 5},
        check=AsyncConnectionPool.check_connection,  # replace one the server dropped
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    try:
        async with job_queue.open_async(pool):
            serving = asyncio.create_task(server.serve())
            sweeping = asyncio.create_task(beat_until_stopped(beat, worker))
            try:
                await worker.run()  # type: ignore[no-untyped-call]  # procrastinate's, unannotated
            finally:
                sweeping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeping
                server.should_exit = True
                await serving
    finally:
        await pool.close()
        if stop_requested:  # the stop's own account, beside the platform's grace period
            took = {"stop_seconds": round(time.monotonic() - stop_requested[0], 3)}
            logger.info("worker stopped", extra=took)


def main(argv: list[str] | None = None) -> int:
    """The worker's command line; a refused setting or a module not found is one line."""
    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__)
    parser.add_argument("modules", nargs="*", help=f"modules of tasks beside {TASK_MODULES[0]}")
    arguments = parser.parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as refused:
        sys.stderr.write(f"error: {refusal(refused)}\n")
        return 2
    configure_logging(settings.log_level, human=settings.environment == "development")
    for handler in logging.getLogger().handlers:
        handler.addFilter(JobFields())
    # procrastinate's info lines repeat each job's arguments (its data, maybe personal): but
    # for debugging, observe.py's one line per run instead; its warnings and errors still come.
    if settings.log_level != "debug":
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
    for module in [*TASK_MODULES, *arguments.modules]:
        try:
            importlib.import_module(module)
        except ImportError as missing:
            sys.stderr.write(f"error: cannot import tasks from {module!r}: {missing}\n")
            return 2
    tracing = configure_tracing()
    try:
        asyncio.run(run(settings))
    finally:
        if tracing is not None:
            tracing.shutdown()  # the last spans exported before the process ends
    return 0


if __name__ == "__main__":
    sys.exit(main())
