"""The Kubernetes probes against the live stack, read from the service's own k8s/base:
liveness answers within its timeout while both workers are frozen (SIGSTOP: as saturated as a
worker gets; gunicorn's watchdog owns those, a restart would not help), and readiness stays
ready while the database is stopped, reporting it (body, metric, one log line per worker)
while the app answers its own JSON 503s. Skipped, saying so, for a service without k8s/ or
without a database. About 12 s in all (two stacks).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import urllib.request
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from harness.clients import get
from harness.ports import wait_for

from .conftest import DATABASE, PROJECT, REAL_APP, parse_json, wait_for_line, worker_pids

if TYPE_CHECKING:
    from collections.abc import Iterator

    from harness.postgres import Database
    from harness.stack import RunningStack

    from .conftest import Stacks

pytestmark = pytest.mark.live

DEPLOYMENT = PROJECT / "k8s" / "base" / "deployment.yaml"
needs_k8s = pytest.mark.skipif(not DEPLOYMENT.is_file(), reason="the service has no k8s/base")


def probe(kind: str) -> dict[str, Any]:
    """The app container's probe of this kind, as the manifest declares it."""
    deployment = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container[kind]
    return found


@needs_k8s
def test_liveness_answers_within_its_timeout_while_both_workers_are_frozen(
    stacks: Stacks,
) -> None:
    """With both workers stopped (SIGSTOP), the liveness probe's path answers 200 within the
    probe's timeoutSeconds, while a request through the workers (/livez) does not."""
    liveness = probe("livenessProbe")
    path, timeout = liveness["httpGet"]["path"], float(liveness["timeoutSeconds"])
    stack = stacks.start()
    frozen = worker_pids(stack)
    assert len(frozen) == 2
    try:
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        status, _, body = get(stack.port, path, timeout=timeout)
        # Frozen workers never answer: a second shows it as well as the probe's timeout.
        through_workers = get(stack.port, "/livez", timeout=1)[0]
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    assert status == 200, f"{path} did not answer within the probe's {timeout:g} s"
    assert parse_json(body) == {"status": "ok"}
    assert through_workers == 0, "the workers answered: they were not frozen"


@pytest.fixture
def database() -> Iterator[Database]:
    """The session's server, for a test that stops it: running again after the test."""
    assert DATABASE is not None
    yield DATABASE
    DATABASE.running_again()


def readiness(stack: RunningStack) -> tuple[int, dict[str, object]]:
    status, _, body = get(stack.port, probe("readinessProbe")["httpGet"]["path"])
    return status, parse_json(body)


def database_metric(stack: RunningStack) -> str:
    url = f"http://127.0.0.1:{stack.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    (line,) = [row for row in text.splitlines() if row.startswith("readiness_check_passing{")]
    assert 'check="database"' in line
    return line.rsplit(" ", 1)[1]


@needs_k8s
@pytest.mark.skipif(DATABASE is None, reason="the service has no database (no alembic.ini)")
def test_readiness_stays_ready_while_the_database_is_stopped(
    database: Database, stacks: Stacks
) -> None:
    """PostgreSQL stopped: the readiness probe's path stays 200 naming the database failing,
    the metric says 0, each worker logs one warning line (no traceback above debug), and the
    items answer the app's JSON 503 with Retry-After and the request id; back, all recover."""
    stack = stacks.start(REAL_APP, DATABASE_URL=database.copy(), WEB_CONCURRENCY="2")
    assert readiness(stack) == (
        200,
        {
            "status": "ready",
            "failing": [],
            "checks": {"database": "ok"},
            "required": [],
        },
    )
    database.server.stop("fast")
    # The app caches a readiness run for a second (a probe flood runs the checks once): the
    # first answers after the stop may still be the last run's.
    wait_for(lambda: readiness(stack)[1]["failing"] == ["database"], 5, "readiness failing")
    probes = [readiness(stack) for _ in range(10)]
    status, headers, body = get(stack.port, "/items")
    metric = database_metric(stack)
    database.server.start()
    wait_for(lambda: readiness(stack)[1]["checks"] == {"database": "ok"}, 60, "readiness back")

    assert {code for code, _ in probes} == {200}
    assert all(answer["failing"] == ["database"] for _, answer in probes), probes
    assert (status, headers["retry-after"]) == (503, "2")
    assert json.loads(body) == {
        "detail": "the database is unavailable; retry shortly",
        "request_id": headers["x-request-id"],
    }
    assert metric == "0.0"
    assert database_metric(stack) == "1.0"
    # Logged as the check that answered "ok" ran: the relay may pass it on after the answer.
    recovered = "readiness check recovered"
    wait_for_line(stack, lambda line: line.get("message") == recovered, "the recovery's line")
    said = [line for line in stack.log_lines() if str(line.get("logger")).endswith("readiness")]
    failing = [line for line in said if line["message"] == "readiness check failing"]
    assert 1 <= len(failing) <= 2, said  # once per worker the probes reached
    assert all(len(json.dumps(line)) < 1000 and "exception" not in line for line in failing)
    assert not [line for line in said if line.get("level") == "error"], said
    assert any(line["message"] == recovered for line in said), said
