"""Real workers (``python -m <package>.worker``) on a migrated database of each test's own, the
jobs queued through the app's own ``defer`` on its asyncpg engine, and what the test database
then holds. The trial tasks (trial_tasks.py) record each run in trial_runs."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from procrastinate.tasks import Task
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import live.conftest as live
from {{ cookiecutter.package_name }} import worker as worker_module
from {{ cookiecutter.package_name }}.jobs.defer import defer
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX

from database.tables import Rows, fetch
{%- if cookiecutter.auth == "oidc" %}
from token_issuer import AUDIENCE, ISSUER
{%- endif %}

TESTS = Path(__file__).resolve().parent.parent
TRIAL_RUNS = """
CREATE TABLE trial_runs (
    key text, attempt int, pid int, event text, at timestamptz DEFAULT clock_timestamp()
)
"""
# Quick beats, so a stalled worker is found in 3 s (a busy machine can delay a beat by a
# second: shorter ones took live workers' jobs); retries 1 s apart unless a test says.
QUICK = {"jobs_heartbeat_seconds": "1", "jobs_retry_base_seconds": "1"}


def execute(url: str, statement: str) -> None:
    """Run one statement and commit it."""

    async def run() -> None:
        engine = create_async_engine(url)
        async with engine.begin() as connection:
            await connection.execute(text(statement))
        await engine.dispose()

    asyncio.run(run())


def queue(url: str, task: Task[Any, Any, Any], **arguments: Any) -> int:
    """Queue ``task`` as the app does (defer() in a session of its engine), committed."""

    async def run() -> int:
        engine = create_async_engine(url)
        async with async_sessionmaker(engine)() as session:
            job_id = await defer(session, task, **arguments)
            await session.commit()
        await engine.dispose()
        return job_id

    return asyncio.run(run())


def runs(url: str, key: str | None = None) -> Rows:
    """trial_runs' rows (of ``key``), oldest first: (key, attempt, pid, event, epoch seconds)."""
    query = "SELECT key, attempt, pid, event, extract(epoch FROM at)::float FROM trial_runs"
    if key is not None:
        return fetch(url, f"{query} WHERE key = :key ORDER BY at", key=key)
    return fetch(url, f"{query} ORDER BY at")


def jobs(url: str) -> Rows:
    """The queue's jobs: (id, task, status, attempts, args)."""
    query = "SELECT id, task_name, status::text, attempts, args FROM procrastinate_jobs"
    return fetch(url, f"{query} ORDER BY id")


@dataclass
class WorkerProcess:
    """A worker started by ``start_worker``: its process, health port and JSON log."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def get(self, path: str) -> tuple[int, str]:
        """GET ``path`` from the worker's health server: (status, body)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError:
            return 0, ""

    def lines(self) -> list[dict[str, Any]]:
        """The worker's log lines (JSON, one per line)."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def stop(self, timeout: float = 30) -> tuple[int, float]:
        """SIGTERM, then wait: (exit status, seconds it took)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout)
        return status, time.monotonic() - started


@pytest.fixture
def queue_url(new_database: Callable[..., str]) -> str:
    """A migrated database of this test's own, with the trial tasks' table."""
    url = new_database()
    execute(url, TRIAL_RUNS)
    return url


def worker_environ(url: str, port: int, settings: dict[str, str]) -> dict[str, str]:
    """The environment of a worker on ``url``: production (JSON lines), quick beats."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith((ENV_PREFIX, "OTEL_")) and name != "STOP_GRACE_PERIOD"
    }
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env["DATABASE_URL"] = url
{%- if cookiecutter.auth == "oidc" %}
    # Production refuses to start without them, the worker too: it reads the same settings.
    env[f"{ENV_PREFIX}AUTH_ISSUER"], env[f"{ENV_PREFIX}AUTH_AUDIENCE"] = ISSUER, AUDIENCE
{%- endif %}
    every = {**QUICK, "jobs_health_port": str(port), **settings}
    env.update({f"{ENV_PREFIX}{name.upper()}": value for name, value in every.items()})
    return env


@pytest.fixture
def start_worker(queue_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start a worker on this test's database (its trial tasks, ``modules`` too, ``settings``
    as field=value) and wait until its /livez answers; every one is killed at the end."""
    started: list[WorkerProcess] = []

    def start(*modules: str, otel: dict[str, str] | None = None, **settings: str) -> WorkerProcess:
        port = live.free_port()
        log = tmp_path / f"worker-{len(started)}.log"
        command = [sys.executable, "-m", worker_module.__name__, "jobs.trial_tasks"]
        with log.open("wb") as output:
            process = subprocess.Popen(
                [*command, *modules],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**worker_environ(queue_url, port, settings), **(otel or {})},
                cwd=tmp_path,  # no developer's .env
            )
        worker = WorkerProcess(process, port, log)
        started.append(worker)

        def ready() -> bool:
            if process.poll() is not None:
                pytest.fail(f"the worker exited {process.returncode}: {log.read_text()}")
            return worker.get("/livez")[0] == 200

        live.wait_for(ready, 30, "the worker's /livez answering 200")
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()
