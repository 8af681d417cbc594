"""nginx's own reload (`nginx -s reload`) under load loses nothing.

The clients are keep-alive GET and POST connections sending back to back. A failure is any
answer other than 200/201, any broken connection, or any 5xx/499 in nginx's access log. A
POST must be applied exactly once: nginx logged as many 201s as the clients received.

nginx's reload closes idle client connections; one exception is counted, printed and
allowed: a reused keep-alive connection that an exiting nginx worker closes just as the
client sends on it. No byte of an answer came back and the request never reached nginx (its
access log shows none); clients resend such a request on a new connection (RFC 9112,
9.3.1), and so do these.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from harness import procfs
from harness.ports import wait_for

from .conftest import mixed_load, nginx_access, server_errors

if TYPE_CHECKING:
    from harness.stack import RunningStack

    from .conftest import Identity, LoadReport, Stacks

pytestmark = pytest.mark.live


def assert_nothing_lost(stack: RunningStack, report: LoadReport, what: str) -> None:
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

    # nginx's lines reach the log through the supervisor a moment after the answers.
    wait_for(lambda: posts_logged() >= report.ok["POST"], 30, "nginx's lines for every POST")
    assert posts_logged() == report.ok["POST"], "a POST was applied twice or lost"
    assert server_errors(stack) == []


def test_nginx_reload_under_mixed_load_loses_nothing(
    stacks: Stacks, nginx_bin: str, identity: Identity
) -> None:
    """`nginx -s reload` three times under keep-alive GET and POST load: 0 failed requests."""
    stack = stacks.start()
    master = stack.child_pid("nginx")
    conf = stack.run_dir / "nginx.conf"
    reload = identity.command(
        nginx_bin, "-e", "stderr", "-p", str(stack.run_dir), "-c", str(conf), "-s", "reload"
    )
    thread, report = mixed_load(stack.port, 8.0, connections=4)
    started = time.monotonic()
    for at in (1.5, 3.5, 5.5):
        while time.monotonic() - started < at:
            time.sleep(0.05)
        old_workers = set(procfs.children(master))
        subprocess.run(
            reload, check=True, timeout=30, env={"PATH": os.defpath}, capture_output=True
        )
        # Reloaded: new workers are up and the old ones finished their requests and exited.
        wait_for(
            lambda old=old_workers: bool(now := set(procfs.children(master))) and not old & now,
            30,
            "the old nginx workers to exit",
        )
    thread.join(60)

    assert not thread.is_alive()
    assert_nothing_lost(stack, report, "nginx -s reload x3")
