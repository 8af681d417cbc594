"""Faults in the live stack: stops, killed and stuck workers, a broken app, slow handlers.

Each test starts its own stack (the faults damage it) with short timeouts through the
environment variables the deploy files read, so the whole module takes seconds, not minutes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import TYPE_CHECKING

import pytest

from harness.clients import get
from harness.ports import wait_for

from .conftest import (
    DEADLINE_VARIABLE,
    elapsed,
    mixed_load,
    parse_json,
    server_errors,
    wait_for_line,
    worker_pids,
)

if TYPE_CHECKING:
    from .conftest import Stacks

pytestmark = pytest.mark.live


def test_sigterm_lets_requests_in_flight_finish(stacks: Stacks) -> None:
    """SIGTERM: four slow requests in flight complete with 200; the supervisor exits 0 in budget."""
    graceful = 5
    # The drain may not be shorter than the app's deadline (the supervisor refuses it): both 5 s.
    stack = stacks.start(GRACEFUL_TIMEOUT=str(graceful), extra_env={DEADLINE_VARIABLE: "5"})
    results: list[int] = []

    def slow() -> None:
        results.append(get(stack.port, "/fault/sleep?seconds=1.5", timeout=30)[0])

    threads = [threading.Thread(target=slow) for _ in range(4)]
    for thread in threads:
        thread.start()
    wait_for_line(
        stack, lambda line: line.get("message") == "fault handler started", "4 in flight", 4
    )
    started = time.monotonic()
    stack.process.send_signal(signal.SIGTERM)
    code = stack.wait_exit(graceful + 15)
    for thread in threads:
        thread.join(10)

    assert results == [200] * 4, stack.log_text()
    assert code == 0, stack.log_text()
    assert elapsed(started) < graceful + 5


def test_request_longer_than_the_budget_is_cut(stacks: Stacks) -> None:
    """SIGTERM: a request longer than the drain budget is cut there, not waited for."""
    # The stop budget: nginx drains for worker_shutdown_timeout, then gunicorn for
    # GRACEFUL_TIMEOUT (docs/serving.md, "The timeout chain"). The supervisor refuses a drain
    # shorter than the app's deadline, where the app's 504 would always come first: only
    # nginx's drain, overridden in this stack's nginx.conf, can be shorter, and it cuts.
    deadline, drain = 5, 1
    stack = stacks.start(
        GRACEFUL_TIMEOUT=str(deadline),
        nginx_directives={"worker_shutdown_timeout": f"{drain}s"},
        extra_env={DEADLINE_VARIABLE: str(deadline)},
    )
    results: list[int] = []
    thread = threading.Thread(
        target=lambda: results.append(get(stack.port, "/fault/sleep?seconds=60", timeout=90)[0])
    )
    thread.start()
    wait_for_line(stack, lambda line: line.get("message") == "fault handler started", "in flight")
    started = time.monotonic()
    stack.process.send_signal(signal.SIGTERM)
    thread.join(30)
    cut_after = elapsed(started)
    stack.wait_exit(60)
    stopped_after = elapsed(started)

    assert results == [0], "the 60 s request was not cut: it got an answer"
    assert drain - 0.5 < cut_after < drain + 2, "cut at nginx's drain budget"
    # Within the budget: nginx's drain, then gunicorn's (its request ends at the deadline).
    assert stopped_after < drain + deadline + 2 * 5, stack.log_text()


def test_sigkill_of_one_worker_loses_at_most_its_requests(stacks: Stacks) -> None:
    """SIGKILL of a worker under load: failures <= its requests in flight; replaced in < 2 s."""
    stack = stacks.start()
    workers = worker_pids(stack)
    assert len(workers) == 2
    connections = 4  # per method: at most 8 requests are in flight at any moment
    thread, report = mixed_load(stack.port, 4.0, connections)
    wait_for_line(stack, lambda line: line.get("path") == "/fault/echo", "load under way", 20)
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    deadline = killed_at + 2.0
    while len(worker_pids(stack) - {victim}) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    replaced_after = elapsed(killed_at)
    thread.join(30)
    after_thread, after = mixed_load(stack.port, 2.0, connections)
    after_thread.join(30)

    assert len(worker_pids(stack) - {victim}) == 2
    assert replaced_after < 2.0
    assert len(report.failures) <= 2 * connections, report.failures
    assert len(server_errors(stack)) <= 2 * connections
    assert after.failures == [], "full success once the new worker is up"
    assert sum(after.ok.values()) > 0


def test_blocked_event_loop_is_killed_by_the_heartbeat(stacks: Stacks) -> None:
    """A handler blocking its event loop: the worker is killed and replaced; others serve."""
    timeout = 2
    # The watchdog may not be shorter than the app's deadline (the supervisor refuses it).
    stack = stacks.start(GUNICORN_TIMEOUT=str(timeout), extra_env={DEADLINE_VARIABLE: "2"})
    workers = worker_pids(stack)
    blocked: list[tuple[int, float]] = []

    def call_blocker() -> None:
        started = time.monotonic()
        status = get(stack.port, "/fault/block?seconds=30", timeout=60)[0]
        blocked.append((status, elapsed(started)))

    thread = threading.Thread(target=call_blocker)
    thread.start()
    wait_for_line(stack, lambda line: line.get("message") == "fault handler blocking", "blocking")
    others: list[int] = []
    while thread.is_alive() and len(others) < 200:
        others.append(get(stack.port, "/livez", timeout=30)[0])
    thread.join(60)

    status, seconds = blocked[0]
    assert status == 502, "the stuck worker was killed: nginx has no answer to relay"
    assert seconds < 3 * timeout + 2, "killed by the heartbeat, not after the 30 s block"
    assert others, "no request was tried while the worker was stuck"
    assert set(others) == {200}, "the other worker kept serving"
    wait_for_line(stack, lambda line: "WORKER TIMEOUT" in str(line.get("message")), "the kill")
    # The master forks the replacement after it reaps the killed worker: wait for it.
    wait_for(lambda: len(worker_pids(stack)) == 2, 30, "a replacement worker")
    assert worker_pids(stack) != workers, "a new worker replaced the stuck one"


@pytest.mark.parametrize("how", ["import", "lifespan"])
def test_app_failing_at_startup_stops_the_supervisor(stacks: Stacks, how: str) -> None:
    """An app that cannot start: the supervisor exits non-zero within seconds, no respawn loop."""
    started = time.monotonic()
    stack = stacks.start(ready=False, FAULT_APP_FAIL_AT_STARTUP=how)
    code = stack.wait_exit(30)
    boots = [line for line in stack.log_lines() if "Booting worker" in str(line.get("message"))]

    assert code != 0
    assert elapsed(started) < 20
    assert len(boots) <= 2, f"workers were respawned: {len(boots)} boots"
    assert "as asked" in stack.log_text(), "the app's own error is in the log"


def test_handler_slower_than_the_deadline_gets_504_and_is_cancelled(stacks: Stacks) -> None:
    """Past the app's deadline: a JSON 504 carrying the request id, and the handler cancelled."""
    stack = stacks.start(extra_env={DEADLINE_VARIABLE: "1"})
    started = time.monotonic()
    status, headers, body = get(stack.port, "/fault/sleep?seconds=20", timeout=30)
    took = elapsed(started)

    assert status == 504
    request_id = headers["x-request-id"]
    assert parse_json(body)["request_id"] == request_id
    assert headers["content-type"] == "application/json"
    assert took < 3
    wait_for_line(
        stack,
        lambda line: (
            line.get("message") == "fault handler cancelled"
            and line.get("request_id") == request_id
        ),
        "the handler's cancellation",
    )
