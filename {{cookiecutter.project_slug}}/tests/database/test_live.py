"""Items in PostgreSQL through the live stack (nginx, two gunicorn workers, each with its pool):
shared data, the connection budget, database restarts under load. Needs tests/live/conftest.py's
launcher (skipped without nginx) and the session's PostgreSQL (tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from live.conftest import launch, request, wait_for
from {{ cookiecutter.package_name }}.db.engine import APPLICATION_NAME

from .tables import fetch

if TYPE_CHECKING:
    from collections.abc import Callable

    from pg_server import PostgresServer

pytestmark = [pytest.mark.live]

WORKERS = 2
JSON = {"Content-Type": "application/json"}
UNAVAILABLE = {"detail": "the database is unavailable; retry shortly"}


def post_item(port: int, n: int) -> tuple[int, dict[str, object]]:
    body = json.dumps({"name": f"item {n}", "price_cents": n, "tags": [f"t{n % 3}"]})
    status, _, answer = request(port, "POST", "/items", JSON, body.encode())
    return status, json.loads(answer)


def grown(answers: list[tuple[int, str, bytes]], by: int) -> Callable[[], bool]:
    """A condition for wait_for: ``by`` more answers than now."""
    count = len(answers) + by
    return lambda: len(answers) >= count


def test_workers_share_the_store_within_the_budget_and_ride_out_restarts(
    stoppable: PostgresServer, new_database: Callable[..., str]
) -> None:
    """Concurrent creates land once each within the budget; restarted twice under load (fast,
    crash-like), the database costs only JSON 503s, and the same workers serve on."""
    url = new_database()
    environment = {
        "WEB_CONCURRENCY": str(WORKERS),
        "DATABASE_URL": url,
        "{{ cookiecutter.package_name | upper }}_DATABASE_MAX_CONNECTIONS": str(WORKERS),
    }
    stack = launch("{{ cookiecutter.package_name }}.main:app", **environment)
    try:
        with ThreadPoolExecutor(max_workers=12) as pool:
            created = list(pool.map(lambda n: post_item(stack.port, n), range(30)))
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"
            connections = int(str(fetch(url, query, name=APPLICATION_NAME)[0][0]))
        assert {status for status, _ in created} == {201}
        assert 1 <= connections <= WORKERS
        listed = json.loads(request(stack.port, "GET", "/items?limit=100")[2])
        created_ids = sorted(int(str(item["id"])) for _, item in created)
        assert sorted(item["id"] for item in listed) == created_ids

        answers: list[tuple[int, str, bytes]] = []
        stop = threading.Event()

        def status(target: str) -> int:
            return request(stack.port, "GET", target)[0]

        def load() -> None:
            while not stop.is_set():
                code, headers, body = request(stack.port, "GET", "/items?limit=5")
                answers.append((code, headers.get("retry-after", ""), body))
                stop.wait(0.01)

        loader = threading.Thread(target=load)
        loader.start()
        try:
            for mode in ("fast", "immediate"):
                wait_for(grown(answers, 5), 30, "answers")
                stoppable.stop(mode)
                wait_for(lambda: status("/readyz") == 503, 30, "readyz to turn 503")
                assert status("/livez") == 200
                stoppable.start()
            wait_for(lambda: status("/readyz") == 200, 60, "readyz to recover")
            wait_for(grown(answers, 10), 30, "answers after the restarts")
        finally:
            stop.set()
            loader.join(timeout=30)
        assert {status for status, _, _ in answers} <= {200, 503}
        unavailable = [(retry, body) for status, retry, body in answers if status == 503]
        assert all(retry == "2" and json.loads(body) == UNAVAILABLE for retry, body in unavailable)
        assert {status for status, _, _ in answers[-10:]} == {200}
        assert stack.process.poll() is None
        lines = [str(line.get("message")) for line in stack.log_lines()]
        assert lines.count("started gunicorn") == 1
        assert sum("Booting worker" in line for line in lines) == WORKERS
    finally:
        stack.stop()
        shutil.rmtree(stack.run_dir.parent, ignore_errors=True)
