"""Reloads under load lose nothing: the runner's SIGHUP (the deploy procedure) and nginx's.

The clients are keep-alive GET and POST connections sending back to back. A failure is any
answer other than 200/201, any broken connection, or any 5xx/499 in nginx's access log. A
POST must be applied exactly once: nginx logged as many 201s as the clients received.

The runner's reload (class 7 of docs/security.md) never reloads nginx, so no client
connection is closed at all: not even a stale keep-alive connection is allowed. nginx's own
reload does close idle client connections; there one exception is counted, printed and
allowed: a reused keep-alive connection that an exiting nginx worker closes just as the
client sends on it. No byte of an answer came back and the request never reached nginx (its
access log shows none); clients resend such a request on a new connection (RFC 9112,
9.3.1), and so do these.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import (
    get,
    mixed_load,
    nginx_access,
    runner_children,
    server_errors,
    wait_for,
    wait_for_line,
)

if TYPE_CHECKING:
    from .conftest import LiveStack, LoadReport, Stacks

pytestmark = pytest.mark.live


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text(encoding="utf-8")
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def assert_nothing_lost(stack: LiveStack, report: LoadReport, what: str) -> None:
    """No failed request on either side, and every POST applied exactly once."""
    print(
        f"{what}: {dict(report.ok)} ok, {len(report.failures)} failed,"
        f" {report.stale_retries} stale keep-alive connections resent"
    )
    assert report.failures == [], report.failures[:20]
    assert report.ok["GET"] > 0
    assert report.ok["POST"] > 0

    def posts_logged() -> int:
        return sum(
            1
            for line in nginx_access(stack)
            if line.get("path") == "/fault/echo" and line.get("status") == 201
        )

    # nginx's lines reach the log through the runner a moment after the answers.
    wait_for(lambda: posts_logged() >= report.ok["POST"], 30, "nginx's lines for every POST")
    assert posts_logged() == report.ok["POST"], "a POST was applied twice or lost"
    assert server_errors(stack) == []


def test_runner_reload_under_mixed_load_loses_nothing(stacks: Stacks) -> None:
    """15 s of keep-alive GET and POST load, three SIGHUPs to the runner: 0 failed requests."""
    stack = stacks.start()
    thread, report = mixed_load(stack.port, 15.0, connections=4)
    started = time.monotonic()
    for number, at in enumerate((2.0, 6.0, 10.0), start=1):
        while time.monotonic() - started < at:
            time.sleep(0.05)
        stack.process.send_signal(signal.SIGHUP)
        wait_for_line(
            stack,
            lambda line: line.get("message") == "reload complete",
            f"reload {number} to complete",
            count=number,
        )
    thread.join(60)

    assert not thread.is_alive()
    assert_nothing_lost(stack, report, "runner reload x3")
    assert report.stale_retries == 0, "a client connection was closed: nginx was reloaded?"
    assert stack.child_pid("nginx") in runner_children(stack)
    assert not [line for line in stack.log_lines() if "sending SIGHUP to nginx" in str(line)]
    # Each old generation was stopped cleanly once nginx no longer used it.
    exits = [
        line
        for line in stack.log_lines()
        if str(line.get("message", "")).startswith("gunicorn")
        and str(line.get("message", "")).endswith("exited")
    ]
    assert [line.get("exit_code") for line in exits] == [0, 0, 0], exits
    assert stack.process.poll() is None, "the runner still serves after three reloads"


def test_nginx_reload_under_mixed_load_loses_nothing(stacks: Stacks, nginx_bin: str) -> None:
    """`nginx -s reload` three times under keep-alive GET and POST load: 0 failed requests."""
    stack = stacks.start()
    master = stack.child_pid("nginx")
    conf = stack.run_dir / "nginx.conf"
    reload = stack.identity.command(
        nginx_bin, "-e", "stderr", "-p", str(stack.run_dir), "-c", str(conf), "-s", "reload"
    )
    thread, report = mixed_load(stack.port, 8.0, connections=4)
    started = time.monotonic()
    for at in (1.5, 3.5, 5.5):
        while time.monotonic() - started < at:
            time.sleep(0.05)
        old_workers = children_of(master)
        subprocess.run(
            reload, check=True, timeout=30, env={"PATH": os.defpath}, capture_output=True
        )
        deadline = time.monotonic() + 30
        # Reloaded: new workers are up and the old ones finished their requests and exited.
        while time.monotonic() < deadline and (
            old_workers & children_of(master) or not children_of(master)
        ):
            time.sleep(0.05)
        assert not old_workers & children_of(master), "old nginx workers did not exit"
    thread.join(60)

    assert not thread.is_alive()
    assert_nothing_lost(stack, report, "nginx -s reload x3")


def test_reload_to_code_that_cannot_start_keeps_the_old_code_serving(stacks: Stacks) -> None:
    """SIGHUP when the new code fails at import: reload abandoned, the old generation serves."""
    marker = Path(tempfile.mkdtemp(prefix="reliability-bad-deploy-")) / "broken"
    marker.parent.chmod(0o755)
    stack = stacks.start(FAULT_APP_FAIL_IF_EXISTS=str(marker))
    # Both running workers must have imported the app already: a worker booting after the
    # marker appears would fail too, and take the running generation down with it.
    wait_for_line(
        stack,
        lambda line: line.get("message") == "Application startup complete.",
        "both workers of the running generation to start",
        count=2,
    )
    marker.touch()
    try:
        stack.process.send_signal(signal.SIGHUP)
        wait_for_line(
            stack,
            lambda line: str(line.get("message", "")).startswith("reload abandoned"),
            "the runner to abandon the reload",
        )
        status = get(stack.port, "/livez")[0]
    finally:
        shutil.rmtree(marker.parent)

    assert status == 200, stack.log_text()
    assert stack.process.poll() is None, "the runner keeps serving"
    assert not [line for line in stack.log_lines() if line.get("message") == "reload complete"]
