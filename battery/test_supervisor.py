"""The supervisor's faults: SIGHUP, its own death, a busy port, and privileges.

Classes 5 and 6 of docs/security.md:
- SIGHUP is logged and ignored: the same processes keep serving (deploys replace the
  container);
- nginx and gunicorn die with the supervisor, even when it is killed with SIGKILL;
- a port already in use is one line ("port N in use ...; set PORT"), and nothing starts;
- started as root, the supervisor never serves as root unless SERVE_AS_ROOT=on.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness import procfs
from harness.clients import get
from harness.ports import wait_for

from .conftest import STOP_GRACE_S, run_supervisor, wait_for_line

if TYPE_CHECKING:
    from harness.stack import RunningStack

    from .conftest import Stacks

pytestmark = pytest.mark.live


def test_sighup_changes_nothing_and_loses_nothing(stacks: Stacks) -> None:
    """SIGHUP is said and ignored (deploys replace the container): the same processes serve."""
    stack = stacks.start()
    # gunicorn, nginx, then the metrics listener: all three before the signal.
    wait_for(lambda: len(stack.children()) == 3, 30, "the metrics listener")
    children = stack.children()
    stack.process.send_signal(signal.SIGHUP)
    wait_for_line(
        stack,
        lambda line: str(line.get("message", "")).startswith("received SIGHUP: ignored"),
        "the supervisor to say it ignores SIGHUP",
    )

    assert [get(stack.port, "/livez")[0] for _ in range(5)] == [200] * 5
    assert stack.process.poll() is None, stack.log_text()
    assert stack.children() == children


def test_children_die_with_the_supervisor(stacks: Stacks) -> None:
    """SIGKILL of the supervisor: nginx, gunicorn (and their workers) and the metrics listener
    stop."""
    stack = stacks.start()
    # gunicorn, nginx, then the metrics listener, which starts just after "ready".
    wait_for(lambda: len(stack.children()) == 3, 30, "the metrics listener")
    children = stack.children()
    stack.process.kill()
    stack.process.wait(10)

    wait_for(lambda: not any(map(procfs.group_members, children)), 30, "the stack to die with it")
    assert get(stack.port, "/livez")[0] == 0, "something still answers on the port"


def _listener() -> tuple[socket.socket, int]:
    busy = socket.socket()
    busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    return busy, busy.getsockname()[1]


def test_a_busy_port_is_one_line_and_nothing_starts(stacks: Stacks) -> None:
    """PORT taken by another process: exit 1, one line naming the port and PORT; no gunicorn."""
    busy, port = _listener()
    with busy:
        stack = stacks.start(ready=False, PORT=str(port))
        code = stack.wait_exit(30)
    errors = [line for line in stack.log_lines() if line.get("level") == "error"]
    assert code == 1
    assert len(errors) == 1, stack.log_text()
    assert f"port {port} in use" in str(errors[0]["message"])
    assert "set PORT" in str(errors[0]["message"])
    assert stack.children() == [], "a process was started"


def test_ready_is_logged_only_when_our_nginx_is_bound(stacks: Stacks) -> None:
    """An orphan answering on the port must not make a new supervisor say "ready"."""
    first = stacks.start()
    second = stacks.start(ready=False, PORT=str(first.port))
    assert second.wait_exit(30) == 1
    assert not [line for line in second.log_lines() if line.get("message") == "ready"]


# --- stdout: a reader gone or stalled (issue 50, item 4) ------------------------------------


def served(port: int, count: int) -> int:
    """How many of count requests in a row (each logged twice) answer 200 before one fails."""
    for done in range(count):
        if get(port, "/fault/whoami", timeout=5)[0] != 200:
            return done
    return count


def dropped(stack: RunningStack) -> float:
    """stdout_lines_dropped_total, as the metrics listener serves it."""
    wait_for(lambda: get(stack.metrics_port, "/metrics")[0] == 200, 30, "the metrics listener")
    _, _, body = get(stack.metrics_port, "/metrics")
    found = re.search(rb"^stdout_lines_dropped_total ([0-9.e+]+)$", body, re.MULTILINE)
    assert found is not None, body[-2000:]
    return float(found[1])


def read_until(fd: int, marker: bytes) -> bytes:
    """What the stack wrote, read until a whole line holding marker."""
    output = b""
    while marker not in output.rpartition(b"\n")[0]:
        assert select.select([fd], [], [], 30)[0], f"no {marker!r} line for 30 s"
        output += os.read(fd, 65536)
    return output


def read_to_end(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_stdout_without_a_reader_stops_nothing(stacks: Stacks) -> None:
    """stdout's reader gone (every write fails): requests and /livez answer, their lines are
    counted as dropped, and SIGTERM stops the stack cleanly (exit status 0)."""
    read_end, write_end = os.pipe()
    stack = stacks.start(stdout=write_end)
    os.close(write_end)
    os.close(read_end)

    assert served(stack.port, 300) == 300
    assert get(stack.port, "/livez")[0] == 200
    assert dropped(stack) >= 300
    stack.process.send_signal(signal.SIGTERM)
    assert stack.wait_exit(STOP_GRACE_S) == 0


def test_a_stalled_stdout_drops_lines_never_requests(stacks: Stacks) -> None:
    """stdout nobody reads: 3,000 logged requests and /livez answer, the lines past the backlog
    are dropped and counted, and said once stdout is read again; stalled again, SIGTERM stops
    the stack cleanly (exit status 0). Every line written is whole."""
    read_end, write_end = os.pipe()
    stack = stacks.start(stdout=write_end)
    os.close(write_end)
    try:
        assert served(stack.port, 3000) == 3000
        assert get(stack.port, "/livez")[0] == 200
        counted = dropped(stack)
        output = read_until(read_end, b"log lines were dropped")
        assert served(stack.port, 300) == 300  # 200 KB of lines: stalled again
        stack.process.send_signal(signal.SIGTERM)
        code = stack.wait_exit(STOP_GRACE_S)
        output += read_to_end(read_end)
    finally:
        os.close(read_end)

    # The last line may be cut: the stack exits with lines its stdout did not take.
    lines = [json.loads(line) for line in output.rpartition(b"\n")[0].splitlines()]
    said = [line["dropped"] for line in lines if "log lines were dropped" in line["message"]]
    assert code == 0
    assert counted > 0
    assert said[0] >= counted


# --- privileges: only meaningful when the tests run as root ---------------------------------


def _run_as_root(tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The supervisor started as root with the service's interpreter (root's own, in /root)."""
    return run_supervisor(
        {
            "PATH": f"{os.environ.get('PATH', os.defpath)}:/usr/sbin",
            "RUN_DIR": str(tmp / "run"),
            "PORT": "1",  # never reached: the supervisor stops before binding
            "LISTEN_ADDRESS": "127.0.0.1",
            **env,
        }
    )


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the privilege checks run as root")


@needs_root
def test_root_never_serves_as_root_by_default(tmp_path: Path) -> None:
    """Started as root: one refusal line naming the ways out, exit 1, nothing started."""
    result = _run_as_root(tmp_path)
    lines = [line for line in result.stdout.splitlines() if '"level":"error"' in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert len(lines) == 1, result.stdout
    assert "started as root: run as an unprivileged user" in lines[0]
    assert "SERVE_AS_ROOT=on" in lines[0]
    assert "Traceback" not in result.stdout + result.stderr


@needs_root
def test_serve_as_root_is_an_explicit_choice(tmp_path: Path) -> None:
    """SERVE_AS_ROOT=on: a warning, then the supervisor goes on (to a busy port here); "maybe":
    no."""
    refused = _run_as_root(tmp_path, SERVE_AS_ROOT="maybe")
    assert refused.returncode == 1
    assert "SERVE_AS_ROOT='maybe' is refused" in refused.stdout

    busy, port = _listener()
    with busy:
        allowed = _run_as_root(tmp_path, SERVE_AS_ROOT="on", PORT=str(port))
    assert "serving as root (SERVE_AS_ROOT=on)" in allowed.stdout
    # Past the privilege check, it stops at the port: what it said otherwise, whole.
    assert f"port {port} in use" in allowed.stdout, allowed.stdout
