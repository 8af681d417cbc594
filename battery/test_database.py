"""A service's database through the live stack (nginx, two gunicorn workers, each with its
pool): the workers share the data within the connection budget, and PostgreSQL restarted
under load costs only JSON 503s. For a service with a database (battery/database.py starts
it); skipped, saying so, on one without.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from harness.clients import get, request
from harness.ports import wait_for

from .conftest import DATABASE, PACKAGE, REAL_APP

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from harness.postgres import Database

    from .conftest import Stacks

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(DATABASE is None, reason="the service has no database (no alembic.ini)"),
]

WORKERS = 2


@pytest.fixture
def database() -> Iterator[Database]:
    """The session's server, for a test that stops it: running again after the test."""
    assert DATABASE is not None
    yield DATABASE
    DATABASE.running_again()


def post_item(port: int, n: int) -> tuple[int, dict[str, object]]:
    body = json.dumps({"name": f"item {n}", "price_cents": n, "tags": [f"t{n % 3}"]}).encode()
    status, _, answer = request(
        port, "POST", "/items", body, headers={"Content-Type": "application/json"}
    )
    return status, json.loads(answer)


def database_check(port: int) -> object:
    """The database check's outcome in the /readyz body ("ok", "error"...)."""
    return json.loads(get(port, "/readyz")[2])["checks"]["database"]


def grown(answers: list[tuple[int, str, bytes]], by: int) -> Callable[[], bool]:
    """A condition for wait_for: ``by`` more answers than now."""
    count = len(answers) + by
    return lambda: len(answers) >= count


def test_workers_share_the_database_within_the_budget_and_ride_out_restarts(
    database: Database, stacks: Stacks
) -> None:
    """Concurrent creates land once each within the budget; restarted twice under load (fast,
    crash-like), the database costs only JSON 503s, and the same workers serve on."""
    url = database.copy()
    budget = {f"{PACKAGE.upper()}_DATABASE_MAX_CONNECTIONS": str(WORKERS)}
    stack = stacks.start(REAL_APP, WEB_CONCURRENCY=str(WORKERS), DATABASE_URL=url, **budget)
    with ThreadPoolExecutor(max_workers=12) as pool:
        created = list(pool.map(lambda n: post_item(stack.port, n), range(30)))
    assert {status for status, _ in created} == {201}
    assert 1 <= database.sessions(url) <= WORKERS
    listed = json.loads(get(stack.port, "/items?limit=100")[2])
    assert sorted(item["id"] for item in listed) == sorted(item["id"] for _, item in created)

    answers: list[tuple[int, str, bytes]] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            code, headers, body = get(stack.port, "/items?limit=5")
            answers.append((code, headers.get("retry-after", ""), body))
            stop.wait(0.01)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        for mode in ("fast", "immediate"):
            wait_for(grown(answers, 5), 30, "answers")
            database.server.stop(mode)
            wait_for(lambda: database_check(stack.port) != "ok", 30, "readyz to report it down")
            # Reported, not required: the pod stays in rotation and answers its own 503s.
            assert get(stack.port, "/readyz")[0] == get(stack.port, "/livez")[0] == 200
            database.server.start()
        wait_for(lambda: database_check(stack.port) == "ok", 60, "readyz to report it back")
        wait_for(grown(answers, 10), 30, "answers after the restarts")
    finally:
        stop.set()
        loader.join(timeout=30)
    assert {status for status, _, _ in answers} <= {200, 503}
    unavailable = [(retry, body) for status, retry, body in answers if status == 503]
    assert all(retry.isdigit() and "detail" in json.loads(body) for retry, body in unavailable)
    assert {status for status, _, _ in answers[-10:]} == {200}
    assert stack.process.poll() is None
    lines = [str(line.get("message")) for line in stack.log_lines()]
    assert lines.count("started gunicorn") == 1
    assert sum("Booting worker" in line for line in lines) == WORKERS
