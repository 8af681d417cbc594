"""The worker's promises, each against real worker processes and a real PostgreSQL: a killed
worker's job runs again elsewhere, a stop drains then aborts and requeues, retries back off and
end, a periodic job fires once per tick across workers, and its health port answers."""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from httpx2 import ASGITransport, AsyncClient, Response
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

import live.conftest as live
from {{ cookiecutter.package_name }} import worker as worker_module
from {{ cookiecutter.package_name }}.jobs.health import health_app
from {{ cookiecutter.package_name }}.jobs.recovery import STALLED_AFTER_BEATS
from {{ cookiecutter.package_name }}.jobs.tasks import prune_finished_jobs
from {{ cookiecutter.package_name }}.settings import (
    ENV_PREFIX,
    JOBS_ABORT_MARGIN,
    Settings,
    refusal,
)

from .conftest import (
    QUICK,
    WorkerProcess,
    execute,
    jobs,
    queue,
    runs,
    worker_environ,
)
from .trial_tasks import trial_fail, trial_sleep, trial_stuck

BEAT = float(QUICK["jobs_heartbeat_seconds"])


def sample(metrics: str, name: str, labels: dict[str, str]) -> float | None:
    """The value of the sample ``name`` with ``labels`` in Prometheus' text, or None."""
    for family in text_string_to_metric_families(metrics):
        for found in family.samples:
            if (found.name, found.labels) == (name, labels):
                return float(found.value)
    return None


def test_a_job_of_a_killed_worker_runs_again_on_another(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """SIGKILL mid-job: another worker runs it again (attempt 2) and it succeeds, started
    within the stalled timeout plus one beat (the sweep) plus 1 s; nothing is left running."""
    workers = {worker.process.pid: worker for worker in (start_worker(), start_worker())}
    queue(queue_url, trial_stuck, key="killed")
    live.wait_for(lambda: len(runs(queue_url, "killed")) == 1, 10, "the job starting")
    [(_, _, holder, _, _)] = runs(queue_url, "killed")
    killed_at = time.time()
    workers.pop(holder).process.kill()
    [(survivor, other)] = workers.items()

    def rerun_finished() -> bool:
        last = [(row[1], row[3]) for row in runs(queue_url, "killed")][-1:]
        return last == [(2, "finished")]

    live.wait_for(rerun_finished, 15, "the job running again and finishing")
    [started, again, finished] = runs(queue_url, "killed")
    assert (started[1], again[1:4], finished[1:4]) == (
        1,
        (2, survivor, "started"),
        (2, survivor, "finished"),
    )
    assert again[4] - killed_at < STALLED_AFTER_BEATS * BEAT + BEAT + 1
    live.wait_for(lambda: jobs(queue_url) == [], 5, "the succeeded job deleted")
    lines = [
        line for line in other.lines() if line.get("message", "").startswith("job of a stalled")
    ]
    assert [(line["task"], line["attempt"]) for line in lines] == [("trial_stuck", 2)]


def test_sigterm_lets_a_running_job_finish_then_exits_0(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """SIGTERM during a job shorter than the drain: the job succeeds, the worker exits 0."""
    worker = start_worker(jobs_drain_seconds="10")
    queue(queue_url, trial_sleep, key="short", seconds=1)
    live.wait_for(lambda: len(runs(queue_url, "short")) == 1, 10, "the job starting")
    status, _ = worker.stop()
    assert status == 0
    assert [row[3] for row in runs(queue_url, "short")] == ["started", "finished"]
    assert jobs(queue_url) == []


def test_a_job_longer_than_the_drain_is_aborted_queued_again_and_rerun(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """SIGTERM during a job longer than the drain: the worker aborts it and stops within the
    drain plus 1 s, exit 0; the job waits, attempt 1 recorded, and the next worker reruns it."""
    drain = 1.0
    worker = start_worker(jobs_drain_seconds=str(drain))
    queue(queue_url, trial_sleep, key="long", seconds=60)
    live.wait_for(lambda: len(runs(queue_url, "long")) == 1, 10, "the job starting")
    status, took = worker.stop()
    # Its own account of the stop, then the process' end as the platform sees it (a busy
    # machine may take a second or two more to end a Python process; its grace period holds).
    [stopped] = [line for line in worker.lines() if line["message"] == "worker stopped"]
    assert stopped["stop_seconds"] < drain + 1
    assert (status, took < drain + JOBS_ABORT_MARGIN) == (0, True), took
    [(_, task, state, attempts, _)] = jobs(queue_url)
    assert (task, state, attempts) == ("trial_sleep", "todo", 1)
    start_worker()
    live.wait_for(lambda: len(runs(queue_url, "long")) == 2, 15, "the job running again")
    assert [row[1] for row in runs(queue_url, "long")] == [1, 2]


def test_retries_back_off_then_the_job_fails_for_good(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """A failing job runs JOBS_MAX_ATTEMPTS times, the waits between runs at least the
    policy's (base ** attempt: 2 s, then 4 s), then stays failed and runs no more."""
    start_worker(jobs_max_attempts="3", jobs_retry_base_seconds="2")
    job_id = queue(queue_url, trial_fail, key="failing")

    def failed() -> bool:
        return [(row[0], row[2]) for row in jobs(queue_url)] == [(job_id, "failed")]

    live.wait_for(failed, 30, "the job failing for good")
    times = [row[4] for row in runs(queue_url, "failing")]
    assert [row[1] for row in runs(queue_url, "failing")] == [1, 2, 3]
    assert times[1] - times[0] >= 2
    assert times[2] - times[1] >= 4
    time.sleep(2 * BEAT)
    assert len(runs(queue_url, "failing")) == 3


def test_a_periodic_job_fires_once_per_tick_across_two_workers(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """Two workers both run the periodic deferrer: each second's tick runs exactly once over
    10 ticks."""
    workers = [start_worker("jobs.trial_periodic") for _ in range(2)]
    first = int(time.time()) + 1
    last = first + 9
    live.wait_for(lambda: time.time() > last + 2, 15, "ten ticks passing")
    ticks = [int(row[0]) for row in runs(queue_url) if row[3] == "tick"]
    assert [ticks.count(tick) for tick in range(first, last + 1)] == [1] * 10, ticks
    assert {row[2] for row in runs(queue_url)} <= {worker.process.pid for worker in workers}


def test_the_health_port_answers_livez_and_metrics_and_refuses_junk(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """/livez gives the heartbeat's age; /metrics counts jobs by task and outcome; an unknown
    path is a 404 and a request that is not HTTP is refused, the worker going on."""
    worker = start_worker()
    status, body = worker.get("/livez")
    assert status == 200
    assert json.loads(body)["heartbeat_age_seconds"] < STALLED_AFTER_BEATS * BEAT
    queue(queue_url, trial_sleep, key="counted", seconds=0)
    succeeded = {"task": "trial_sleep", "outcome": "succeeded"}

    def counted() -> bool:
        return sample(worker.get("/metrics")[1], "jobs_total", succeeded) == 1

    live.wait_for(counted, 10, "the job counted")
    metrics = worker.get("/metrics")[1]
    assert sample(metrics, "job_duration_seconds_count", {"task": "trial_sleep"}) == 1
    assert sample(metrics, "job_attempt_sum", {"task": "trial_sleep"}) == 1
    assert sample(metrics, "jobs_stalled_recovered_total", {}) == 0
    assert worker.get("/admin")[0] == 404
    with socket.create_connection(("127.0.0.1", worker.port), timeout=5) as raw:
        raw.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 400")
    assert worker.get("/livez")[0] == 200


def test_the_queue_s_depth_and_oldest_wait_are_sampled_each_beat(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """One slot, held by a job that hangs: the two queued after it wait, and /metrics says how
    many and for how long; the hanging one is running, not waiting."""
    worker = start_worker(jobs_concurrency="1")
    queue(queue_url, trial_stuck, key="holding")
    live.wait_for(lambda: len(runs(queue_url, "holding")) == 1, 10, "the slot taken")
    for key in ("first", "second"):
        queue(queue_url, trial_sleep, key=key, seconds=0)
    default = {"queue": "default"}

    def both_waiting() -> bool:
        metrics = worker.get("/metrics")[1]
        oldest = sample(metrics, "job_oldest_waiting_seconds", default) or 0
        return sample(metrics, "jobs_waiting", default) == 2 and oldest > 0

    live.wait_for(both_waiting, 3 * BEAT + 5, "the two waiting jobs sampled")


def test_failed_jobs_are_pruned_after_the_hours_kept(
    queue_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    """prune_finished_jobs (hourly) deletes a failed job older than JOBS_KEEP_FAILED_HOURS
    and keeps a younger one: the queue's tables stay bounded."""
    start_worker(jobs_max_attempts="1", jobs_keep_failed_hours="1")
    old, young = (queue(queue_url, trial_fail, key=key) for key in ("old", "young"))

    def both_failed() -> bool:
        return {row[2] for row in jobs(queue_url)} == {"failed"} and len(jobs(queue_url)) == 2

    live.wait_for(both_failed, 10, "both jobs failing for good")
    two_hours_ago = "UPDATE procrastinate_events SET at = at - interval '2 hours'"
    execute(queue_url, f"{two_hours_ago} WHERE job_id = {old}")
    queue(queue_url, prune_finished_jobs, timestamp=0)
    live.wait_for(lambda: [row[0] for row in jobs(queue_url)] == [young], 10, "the old one pruned")


def test_livez_is_503_once_the_heartbeat_is_older_than_the_stalled_timeout() -> None:
    """The other workers take a stalled worker's jobs: its /livez says so, to be restarted."""
    ages = iter([0.4, 1.6])
    app = health_app(lambda: next(ages), stalled_after=1.5)

    async def ask_twice() -> list[Response]:
        async with AsyncClient(transport=ASGITransport(app), base_url="http://w") as client:
            return [await client.get("/livez") for _ in range(2)]

    fresh, stalled = asyncio.run(ask_twice())
    assert (fresh.status_code, fresh.json()["status"]) == (200, "ok")
    assert (stalled.status_code, stalled.json()["status"]) == (503, "stalled")


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        ({"jobs_concurrency": "0"}, "JOBS_CONCURRENCY is refused"),
        ({"jobs_max_connections": "1"}, "JOBS_MAX_CONNECTIONS is refused"),
        ({"jobs_heartbeat_seconds": "0.05"}, "JOBS_HEARTBEAT_SECONDS is refused"),
        ({"jobs_retry_base_seconds": "two"}, "JOBS_RETRY_BASE_SECONDS is refused"),
        ({"item_webhook_url": "hooks.example.com"}, "ITEM_WEBHOOK_URL is refused"),
        ({"item_webhook_url": "file:///etc/passwd"}, "ITEM_WEBHOOK_URL is refused"),
        ({"jobs_drain_seconds": "nan"}, "JOBS_DRAIN_SECONDS is refused"),
        ({"jobs_drain_seconds": "3601"}, "JOBS_DRAIN_SECONDS is refused"),
        ({"jobs_max_attempts": "0"}, "JOBS_MAX_ATTEMPTS is refused"),
        ({"jobs_keep_failed_hours": "0"}, "JOBS_KEEP_FAILED_HOURS is refused"),
        ({"jobs_health_port": "65536"}, "JOBS_HEALTH_PORT is refused"),
        ({"jobs_health_host": "0.0.0.0; rm -rf /"}, "JOBS_HEALTH_HOST is refused"),
        ({"STOP_GRACE_PERIOD": "24"}, "STOP_GRACE_PERIOD=24 is below the job worker's stop"),
    ],
)
def test_a_wrong_worker_setting_is_refused_in_one_line(
    settings: dict[str, str],
    refused: str,
    queue_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The worker's settings at a wrong value: status 2, one line naming the variable, before
    anything starts (the command line's main, in process: test_a_module_of_tasks... runs it)."""
    monkeypatch.setenv("DATABASE_URL", queue_url)
    for name, value in settings.items():
        monkeypatch.setenv(name if name.isupper() else f"{ENV_PREFIX}{name.upper()}", value)
    assert worker_module.main([]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ")
    assert refused in line


def test_the_worker_settings_at_their_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A drain that just fits the grace period is accepted; non-defaults are read as given."""
    monkeypatch.setenv("STOP_GRACE_PERIOD", "25")  # the default drain, 20, plus 5
    settings = Settings(jobs_concurrency=256, jobs_max_connections=2, jobs_heartbeat_seconds=0.1)
    assert (settings.stop_grace_period, settings.jobs_concurrency) == (25, 256)
    monkeypatch.setenv("STOP_GRACE_PERIOD", "24.9")
    with pytest.raises(ValidationError) as too_short:
        Settings()
    assert refusal(too_short.value).startswith("STOP_GRACE_PERIOD=24.9 is below")
    monkeypatch.setenv(f"{ENV_PREFIX}JOBS_HEALTH_HOST", "::")  # every address, IPv6 too
    monkeypatch.setenv(f"{ENV_PREFIX}JOBS_HEALTH_PORT", "65535")
    monkeypatch.setenv(f"{ENV_PREFIX}JOBS_DRAIN_SECONDS", "19.5")  # 19.5 + 5 <= 24.9
    settings = Settings()  # the drain fits the shorter grace period
    assert (str(settings.jobs_health_host), settings.jobs_health_port) == ("::", 65535)


def test_a_module_of_tasks_that_does_not_import_is_one_line(queue_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", worker_module.__name__, "no_such_tasks"],
        env=worker_environ(queue_url, 1, {}),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)
    assert done.stderr.startswith("error: cannot import tasks from 'no_such_tasks'")


def test_sigterm_stops_an_idle_worker_at_once(start_worker: Callable[..., WorkerProcess]) -> None:
    """Nothing running: SIGTERM ends the worker, exit 0, in well under a second or two."""
    worker = start_worker()
    status, took = worker.stop()
    assert (status, took < 2) == (0, True), took


def test_make_worker_starts_the_worker_the_docs_show(
    queue_url: str, tmp_path: Path, project_root: Path
) -> None:
    """`make worker` (README, docs/jobs.md) runs the worker on DATABASE_URL until stopped."""
    port = live.free_port()
    env = worker_environ(queue_url, port, {})
    command = ["make", "--no-print-directory", "-C", str(project_root), "worker"]
    with (tmp_path / "make-worker.log").open("wb") as log:
        make = subprocess.Popen(
            [*command, f"VENV={sys.prefix}"],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        worker = WorkerProcess(make, port, tmp_path / "make-worker.log")
        live.wait_for(lambda: worker.get("/livez")[0] == 200, 30, "make worker's /livez answering")
    finally:
        os.killpg(make.pid, signal.SIGTERM)  # Ctrl-C's way: the whole group
        make.wait(30)
