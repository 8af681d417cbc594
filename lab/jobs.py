"""Issue 46's figures for a jobs=procrastinate project: its own worker and queue, on a
throwaway PostgreSQL (the project's tests/pg_server.py, migrated by its own alembic).

    ./scripts/bench PROJECT_DIR --jobs [--out DIR]

In one run, in this order, each against the targets issue 46 set:

- the worker's resident memory idle, then after NOOP_JOBS no-op jobs, queued beforehand (the
  app's own ``defer``) and run by one worker process at its default concurrency: jobs per
  second from its start to an empty queue; the queue tables' rows and dead tuples after;
- what queueing adds to creating an item: the route's database work (insert, commit) with and
  without its job, ENQUEUE_SAMPLES of each, interleaved, and the queueing itself (the flush
  for the item's id, the ``defer``): p50 and p99;
- pickup: commit to the task's first line, PICKUP_SAMPLES one after another on an idle worker;
- crash recovery: a worker SIGKILLed mid-job, to the job's start on the other worker (the
  heartbeat at RECOVERY_BEAT s, stalled after 3 beats; at the default 10 s, 3 times longer);
- drain: SIGTERM to exit, with a job RUNNING_JOB_S long just started, and idle.

One markdown table, DIR/jobs.md (lab/results.py). Runs in the project's Python; needs
PostgreSQL's server binaries (Debian's postgresql).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness import postgres, procfs
from harness.ports import free_port, wait_for
from lab.project import ProjectError
from lab.stats import percentile

if TYPE_CHECKING:
    from collections.abc import Callable

    from lab.project import Project

NOOP_JOBS = 10_000
ENQUEUE_SAMPLES = 1_000
PICKUP_SAMPLES = 200
RECOVERY_BEAT = 2.0
RUNNING_JOB_S = 2.0
QUEUE_BATCH = 500  # jobs per transaction when filling the queue
TARGETS = {  # issue 46's
    "jobs_per_second": 200,
    "enqueue_p99_ms": 5,
    "pickup_p99_ms": 100,
    "worker_mib": 100,
}
STARTS = "CREATE TABLE lab_job_starts (key text, pid int, started double precision)"


@dataclass
class Worker:
    """One of the project's worker processes, started by ``start_worker``."""

    process: subprocess.Popen[bytes]
    port: int

    def alive(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/livez", timeout=2) as got:
                return bool(got.status == 200)
        except (urllib.error.URLError, OSError):
            if self.process.poll() is not None:
                raise ProjectError(f"the worker exited {self.process.returncode}") from None
            return False

    def rss_mib(self) -> float:
        return int(procfs.status(self.process.pid)["VmRSS"].split()[0]) / 1024

    def stop(self) -> float:
        """SIGTERM; the seconds until it exited."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(120)
        return time.monotonic() - started


def start_worker(project: Project, url: str, **settings: str) -> Worker:
    """The project's worker (``python -m <package>.worker lab.job_tasks``) on ``url``, in
    production mode (JSON lines, discarded), ready when its /livez answers."""
    prefix = f"{project.package.upper()}_"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith((prefix, "OTEL_"))}
    env |= {"DATABASE_URL": url, "LAB_JOBS_PACKAGE": project.package}
    env |= {f"{prefix}JOBS_HEALTH_PORT": str(port), f"{prefix}ENVIRONMENT": "production"}
    env |= {f"{prefix}{name.upper()}": value for name, value in settings.items()}
    command = [sys.executable, "-m", f"{project.package}.worker", "lab.job_tasks"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=project.root)
    worker = Worker(process, port)
    wait_for(worker.alive, 60, "the worker's /livez")
    return worker


class Queue:
    """The project's database side: its engine, its ``defer``, its item model."""

    def __init__(self, project: Project, url: str) -> None:
        sqlalchemy = importlib.import_module("sqlalchemy.ext.asyncio")
        self.engine = sqlalchemy.create_async_engine(url)
        self.sessions = sqlalchemy.async_sessionmaker(self.engine, expire_on_commit=False)
        self.defer = importlib.import_module(f"{project.package}.jobs.defer").defer
        self.item_row = importlib.import_module(f"{project.package}.db.models").ItemRow
        tasks = importlib.import_module(f"{project.package}.jobs.tasks")
        self.announce_item = tasks.announce_item
        os.environ["LAB_JOBS_PACKAGE"] = project.package
        self.lab = importlib.import_module("lab.job_tasks")

    async def sql(self, statement: str, **params: Any) -> list[Any]:
        text = importlib.import_module("sqlalchemy").text
        async with self.engine.begin() as connection:
            result = await connection.execute(text(statement), params)
            return list(result) if result.returns_rows else []

    async def fill(self, count: int) -> None:
        for first in range(0, count, QUEUE_BATCH):
            async with self.sessions() as session:
                for _ in range(min(QUEUE_BATCH, count - first)):
                    await self.defer(session, self.lab.lab_noop)
                await session.commit()

    async def create_item(self, *, with_job: bool) -> tuple[float, float]:
        """The route's database work, timed: (seconds in all, seconds of the queueing: the
        flush for the item's id and the defer)."""
        started = time.perf_counter()
        queueing = 0.0
        async with self.sessions() as session:
            row = self.item_row(name="lab", price_cents=1, tags=[])
            session.add(row)
            if with_job:
                queueing = time.perf_counter()
                await session.flush()
                item = {"id": row.id, "name": "lab", "price_cents": 1, "tags": []}
                await self.defer(session, self.announce_item, item=item, idempotency_key="lab")
                queueing = time.perf_counter() - queueing
            await session.commit()
        return time.perf_counter() - started, queueing

    async def stamp(self, key: str, seconds: float = 0) -> float:
        """Queue lab_stamp(key) and commit; the wall-clock time of the commit."""
        async with self.sessions() as session:
            await self.defer(session, self.lab.lab_stamp, key=key, seconds=seconds)
            await session.commit()
        return time.time()

    async def started(self, key: str) -> list[tuple[int, float]]:
        rows = await self.sql(
            "SELECT pid, started FROM lab_job_starts WHERE key = :key ORDER BY started", key=key
        )
        return [(int(pid), float(at)) for pid, at in rows]

    async def waiting(self) -> int:
        rows = await self.sql(
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        )
        return int(rows[0][0])


def enqueue_figures(queue: Queue, db: Callable[[Any], Any]) -> dict[str, float]:
    """Creating an item without and with its job, interleaved, and the queueing alone."""
    plain: list[float] = []
    queued: list[float] = []
    queueing: list[float] = []
    for _ in range(ENQUEUE_SAMPLES):
        plain.append(db(queue.create_item(with_job=False))[0])
        whole, part = db(queue.create_item(with_job=True))
        queued.append(whole)
        queueing.append(part)
    figures = {}
    for name, samples in (("create", plain), ("create_and_queue", queued), ("enqueue", queueing)):
        figures[f"{name}_p50_ms"] = percentile(samples, 0.5) * 1e3
        figures[f"{name}_p99_ms"] = percentile(samples, 0.99) * 1e3
    return figures


def run(project: Project, loop: asyncio.AbstractEventLoop, url: str) -> dict[str, Any]:
    """Every figure, in the module docstring's order."""
    queue = Queue(project, url)
    db = loop.run_until_complete
    db(queue.sql(STARTS))
    figures: dict[str, Any] = {}

    worker = start_worker(project, url)
    figures["worker_idle_mib"] = worker.rss_mib()
    worker.stop()
    db(queue.fill(NOOP_JOBS))
    started = time.monotonic()
    worker = start_worker(project, url)
    wait_for(lambda: db(queue.waiting()) == 0, 600, "the queue emptied")
    figures["jobs_per_second"] = NOOP_JOBS / (time.monotonic() - started)
    figures["worker_after_mib"] = worker.rss_mib()
    time.sleep(2)  # the server's statistics are flushed within a second of each transaction
    tables = db(
        queue.sql(
            "SELECT relname, n_live_tup, n_dead_tup FROM pg_stat_user_tables"
            " WHERE relname LIKE 'procrastinate%' ORDER BY relname"
        )
    )
    figures["tables"] = [[str(name), int(live), int(dead)] for name, live, dead in tables]

    figures |= enqueue_figures(queue, db)
    wait_for(lambda: db(queue.waiting()) == 0, 120, "the announcements run")

    def has_started(key: str) -> bool:
        return bool(db(queue.started(key)))

    pickups = []
    for sample in range(PICKUP_SAMPLES):
        key = f"pickup-{sample}"
        committed = db(queue.stamp(key))
        wait_for(functools.partial(has_started, key), 10, "a pickup")
        pickups.append(db(queue.started(key))[0][1] - committed)
    figures["pickup_p50_ms"] = percentile(pickups, 0.5) * 1e3
    figures["pickup_p99_ms"] = percentile(pickups, 0.99) * 1e3

    db(queue.stamp("drain", RUNNING_JOB_S))
    wait_for(functools.partial(has_started, "drain"), 10, "the drained job starting")
    figures["drain_running_s"] = worker.stop()
    figures["drain_idle_s"] = start_worker(project, url).stop()

    beat = {"jobs_heartbeat_seconds": str(RECOVERY_BEAT)}
    workers = [start_worker(project, url, **beat) for _ in range(2)]
    db(queue.stamp("crash", 600))
    wait_for(functools.partial(has_started, "crash"), 10, "the crash job starting")
    [(pid, _)] = db(queue.started("crash"))
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(db(queue.started("crash"))) == 2, 120, "the crash job running again")
    figures["recovery_s"] = db(queue.started("crash"))[1][1] - killed_at
    for survivor in workers:
        if survivor.process.poll() is None:
            survivor.process.kill()
            survivor.process.wait()
    db(queue.engine.dispose())
    return figures


def table(figures: dict[str, Any]) -> str:
    def verdict(value: float, target: float, *, most: bool) -> str:
        met = value <= target if most else value >= target
        return f"{'met' if met else 'MISSED'} ({'≤' if most else '≥'} {target:g})"

    rows = [
        (
            "no-op jobs per second, one worker process (concurrency 8)",
            f"{figures['jobs_per_second']:.0f}",
            verdict(figures["jobs_per_second"], TARGETS["jobs_per_second"], most=False),
        ),
        (
            "creating an item, p50 / p99 ms: without its job",
            f"{figures['create_p50_ms']:.2f} / {figures['create_p99_ms']:.2f}",
            "",
        ),
        (
            "creating an item, p50 / p99 ms: with its job queued",
            f"{figures['create_and_queue_p50_ms']:.2f} / {figures['create_and_queue_p99_ms']:.2f}",
            "",
        ),
        (
            "of which queueing (the flush for its id, the defer), p50 / p99 ms",
            f"{figures['enqueue_p50_ms']:.2f} / {figures['enqueue_p99_ms']:.2f}",
            verdict(figures["enqueue_p99_ms"], TARGETS["enqueue_p99_ms"], most=True),
        ),
        (
            "pickup, commit to the task's start, p50 / p99 ms",
            f"{figures['pickup_p50_ms']:.1f} / {figures['pickup_p99_ms']:.1f}",
            verdict(figures["pickup_p99_ms"], TARGETS["pickup_p99_ms"], most=True),
        ),
        (
            f"crash recovery, SIGKILL to the rerun's start (heartbeat {RECOVERY_BEAT:g} s), s",
            f"{figures['recovery_s']:.1f}",
            f"stalled after {3 * RECOVERY_BEAT:g} s, swept every {RECOVERY_BEAT:g} s",
        ),
        (
            f"drain, SIGTERM to exit: a {RUNNING_JOB_S:g} s job just started / idle, s",
            f"{figures['drain_running_s']:.2f} / {figures['drain_idle_s']:.2f}",
            "",
        ),
        (
            f"worker resident memory, MiB: idle / after {NOOP_JOBS:,} jobs",
            f"{figures['worker_idle_mib']:.0f} / {figures['worker_after_mib']:.0f}",
            verdict(figures["worker_after_mib"], TARGETS["worker_mib"], most=True),
        ),
    ]
    rows += [
        (f"`{name}` after the run: live rows / dead tuples", f"{live} / {dead}", "")
        for name, live, dead in figures["tables"]
    ]
    lines = ["| figure | value | target |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {target} |" for name, value, target in rows]
    return "\n".join(lines)


def report(project: Project) -> tuple[str, str]:
    """(markdown, JSON) of one run's figures."""
    if not (project.root / "src" / project.package / "worker.py").is_file():
        raise ProjectError(f"{project.root} has no job worker: bake it with jobs=procrastinate")
    database = postgres.migrated(project.root, sys.executable)
    loop = asyncio.new_event_loop()
    try:
        figures = run(project, loop, database.copy())
    finally:
        loop.close()
        database.server.remove()
    text = "# Background jobs (issue 46's figures)\n\n" + table(figures) + "\n"
    return text, json.dumps(figures, indent=2)
