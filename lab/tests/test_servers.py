"""The lab's process handling leaves nothing running, children of children included."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness.ports import free_port
from harness.processes import Processes, ServerError, wait_ready
from harness.procfs import group_members

# A parent that starts a child and both sleep: like gunicorn's master and its workers.
FAMILY = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_stop_all_ends_the_whole_process_group() -> None:
    """A master and the worker it forked are both gone after stop_all."""
    processes = Processes()
    process = processes.start("family", [sys.executable, "-c", FAMILY], dict(os.environ), Path())
    deadline = time.monotonic() + 30  # Python's start-up, twice, on a busy machine
    while len(group_members(process.popen.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(group_members(process.popen.pid)) == 2
    processes.stop_all()
    assert group_members(process.popen.pid) == []
    assert processes.running == []


def test_a_server_that_dies_is_reported_with_its_output() -> None:
    """wait_ready fails fast, with the process's last output, when the server exits."""
    processes = Processes()
    try:
        dying = processes.start(
            "dying", [sys.executable, "-c", "print('bad config'); raise SystemExit(3)"], {}, Path()
        )
        with pytest.raises(ServerError, match="exited with 3") as raised:
            wait_ready(dying, ("127.0.0.1", free_port()), "/")
        time.sleep(0.1)  # the drain thread may still be reading the last line
        assert "bad config" in str(raised.value) or "bad config" in dying.output()
    finally:
        processes.stop_all()
