"""Faults around the requests: a full run directory, dead workers' metric files, the metrics
listener's clients and death.

Issue 19's findings 1 (the SIGBUS part), 3, 4 and 5, against the live stack (real nginx,
gunicorn with 2 workers, the metrics listener on METRICS_PORT). One stack serves the module's
tests but the full-disk one, which mounts a 3 MB tmpfs for RUN_DIR (as root: skipped, saying
so, where mounting is not permitted). Inputs: the battery's fixtures (conftest.py); /proc for
threads, memory and worker pids; `mount`/`umount` from util-linux.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness import procfs
from harness.clients import get
from harness.ports import wait_for
from harness.stack import RunningStack

from .conftest import FAULT_APP, Identity, Stacks, lines_of, worker_pids

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.live

COUNT = "http_server_request_duration_seconds_count"
BUCKET = "http_server_request_duration_seconds_bucket"


@pytest.fixture(scope="module")
def side_stack(nginx_bin: str, identity: Identity) -> Iterator[RunningStack]:
    """One stack for the module; each test leaves it serving."""
    started = Stacks(nginx_bin, identity)
    stack = started.start(FAULT_APP)
    wait_for(lambda: scrape(stack) is not None, 30, "the metrics listener to answer")
    yield stack
    started.stop_all()


def scrape(stack: RunningStack) -> str | None:
    """The listener's exposition, or None when it does not answer 200."""
    url = f"http://127.0.0.1:{stack.metrics_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode() if response.status == 200 else None
    except OSError:
        return None


def series(text: str, name: str, **labels: str) -> dict[str, float]:
    """Every sample of a name whose labels include these: {label text: value}."""
    found = {}
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if not head.startswith(f"{name}{{") or not all(
            f'{key}="{wanted}"' in head for key, wanted in labels.items()
        ):
            continue
        assert head not in found, f"duplicate series {head}"  # Prometheus would reject it
        found[head] = float(value)
    return found


def current_gunicorn(stack: RunningStack) -> int:
    """The pid of gunicorn's master."""
    started = [
        line["pid"]
        for line in lines_of(stack, "supervisor")
        if str(line.get("message", "")).startswith("started gunicorn")
    ]
    assert started, stack.log_text()
    pid = started[-1]
    assert isinstance(pid, int)
    return pid


def workers(stack: RunningStack) -> set[int]:
    """gunicorn's workers."""
    return worker_pids(stack, current_gunicorn(stack))


def kill_workers(stack: RunningStack, count: int) -> None:
    """SIGKILL a worker count times, each time waiting until gunicorn has replaced it."""
    for _ in range(count):
        before = workers(stack)
        victim, size = min(before), len(before)
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda victim=victim, size=size: (
                victim not in (now := workers(stack)) and len(now) == size
            ),
            30,
            f"gunicorn to replace worker {victim}",
        )


def metric_files(stack: RunningStack) -> list[Path]:
    return sorted((stack.run_dir / "metrics").glob("*.db"))


def listener_pid(stack: RunningStack) -> int:
    """The pid of the metrics listener started last."""
    started = [
        line["pid"]
        for line in lines_of(stack, "supervisor")
        if line.get("message") == "started metrics"
    ]
    assert started, stack.log_text()
    pid = started[-1]
    assert isinstance(pid, int)
    return pid


def closed(conn: socket.socket) -> bool:
    """Whether the peer closed a non-blocking connection."""
    try:
        return conn.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


def not_json(stack: RunningStack) -> list[str]:
    return [line for line in stack.log_text().splitlines() if not line.startswith("{")]


# --- 1. a full run directory ------------------------------------------------------------------


@pytest.fixture
def small_tmpfs(identity: Identity) -> Iterator[Path]:
    """A 3 MB tmpfs the stack's user owns, unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (mount -t tmpfs)")
    point = Path(tempfile.mkdtemp(prefix="battery-tmpfs-"))
    point.chmod(0o755)
    options = f"size=3m,mode=0755,uid={identity.uid},gid={identity.gid}"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        point.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield point
    subprocess.run(["umount", "-l", str(point)], check=False)
    point.rmdir()


def fill(directory: Path) -> None:
    """Write zeros into directory until its filesystem is full (the write that fails with
    ENOSPC ends it; the statvfs check below proves that was the reason)."""
    chunk = bytes(65536)
    with contextlib.suppress(OSError), (directory / "filler").open("wb") as filler:
        while True:
            filler.write(chunk)
            filler.flush()
    assert os.statvfs(directory).f_bavail == 0


def test_a_full_run_directory_never_kills_a_worker(stacks: Stacks, small_tmpfs: Path) -> None:
    """RUN_DIR on a full 3 MB tmpfs: requests making new metric series, and workers booting
    on the full disk, all answer; no worker dies of SIGBUS; the failure is one JSON line."""
    stack = stacks.start(RUN_DIR=str(small_tmpfs))
    fill(small_tmpfs)
    # Each (method, route, status) is a new series in the worker's histogram file.
    paths = ["/livez", "/fault/pid", "/fault/whoami", "/fault/headers", "/no/such/path"]
    statuses = [get(stack.port, path)[0] for _ in range(6) for path in paths]
    kill_workers(stack, 2)  # their replacements boot on the full filesystem
    statuses += [get(stack.port, path)[0] for _ in range(6) for path in paths]

    assert statuses == [200, 200, 200, 200, 404] * 12, stack.log_text()[-4000:]
    assert "SIGBUS" not in stack.log_text()
    assert stack.process.poll() is None
    # Each worker that booted on the full filesystem said so, once: the first replacement,
    # and the second unless the metrics listener had archived the dead workers' files by then,
    # freeing room for its own (about one run in 25).
    full = [
        line
        for line in stack.log_lines()
        if str(line.get("message", "")).startswith("metric files cannot be allocated")
    ]
    assert len(full) in {1, 2}, full
    assert {line["level"] for line in full} == {"error"}
    assert not_json(stack) == []


# --- 2. dead workers' metric files ------------------------------------------------------------


def test_dead_workers_counts_are_archived_and_their_files_removed(side_stack: RunningStack) -> None:
    """Requests, then 4 worker kills: the counts and buckets are unchanged, and
    only the live workers' files are left (the dead ones' values are in the archive)."""
    stack = side_stack
    requests = 25
    for _ in range(requests):
        assert get(stack.port, "/fault/pid")[0] == 200
    before = scrape(stack)
    assert before is not None
    route = {"route": "/fault/pid"}
    assert sum(series(before, COUNT, **route).values()) == requests
    buckets_before = series(before, BUCKET, **route)

    kill_workers(stack, 4)
    after = scrape(stack)

    assert after is not None
    assert sum(series(after, COUNT, **route).values()) == requests
    assert series(after, BUCKET, **route) == buckets_before
    # The archive holds the dead, a file of each kind in prometheus_client's format: the
    # others are the live workers' (and the supervisor's, where it counts nginx's refusals), a
    # few kinds each.
    files = metric_files(stack)
    archive = [path.name for path in files if path.stem.endswith("_archive")]
    owners = {int(path.stem.rsplit("_", 1)[1]) for path in files if path.name not in archive}
    assert owners <= workers(stack) | {stack.process.pid}, (
        owners,
        workers(stack),
    )
    assert len(files) - len(archive) <= 3 * len(owners)
    assert "histogram_archive.db" in archive


# --- 3. the metrics listener's clients --------------------------------------------------------


def test_the_metrics_listener_bounds_its_threads_and_times_out_idle_clients(
    side_stack: RunningStack,
) -> None:
    """300 idle connections: a bounded number of threads, and each is closed (at once past
    the listener's slots, else after its socket timeout); clients hanging up mid-answer log
    nothing; scrapes work after."""
    stack = side_stack
    pid = listener_pid(stack)
    idle = [
        socket.create_connection(("127.0.0.1", stack.metrics_port), timeout=30) for _ in range(300)
    ]
    try:
        time.sleep(1)  # let the listener accept what it will
        threads = int(procfs.status(pid)["Threads"])
        assert threads <= 20, f"{threads} threads for 300 idle connections"
        # Those past the listener's few slots are closed at once, the others after its
        # socket timeout: none is kept for ever.
        for conn in idle:
            conn.setblocking(False)
        wait_for(lambda: all(map(closed, idle)), 30, "the listener to close every idle client")
    finally:
        for conn in idle:
            conn.close()
    # Clients that ask and hang up at once (RST): not an error, nothing logged.
    for _ in range(20):
        conn = socket.create_connection(("127.0.0.1", stack.metrics_port), timeout=10)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        conn.close()
    wait_for(lambda: scrape(stack) is not None, 30, "a scrape after the idle clients left")

    assert not_json(stack) == []
    said = [line for line in lines_of(stack, "metrics") if line.get("level") != "info"]
    assert said == []


# --- 4. a dead metrics listener ---------------------------------------------------------------


def test_a_killed_metrics_listener_is_restarted_alone(side_stack: RunningStack) -> None:
    """kill -9 of the listener: the public port keeps answering, the supervisor restarts the
    listener (a log line), scrapes work again, nginx and gunicorn are the same processes."""
    stack = side_stack
    old, nginx, gunicorn = listener_pid(stack), stack.child_pid("nginx"), current_gunicorn(stack)
    os.kill(old, signal.SIGKILL)
    statuses = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (listener_pid(stack) == old or scrape(stack) is None):
        statuses.append(get(stack.port, "/livez")[0])
        time.sleep(0.1)

    assert stack.process.poll() is None, stack.log_text()[-3000:]
    assert listener_pid(stack) != old
    assert scrape(stack) is not None
    assert set(statuses) <= {200}
    assert (stack.child_pid("nginx"), current_gunicorn(stack)) == (nginx, gunicorn)
    serve = lines_of(stack, "supervisor")
    restarting = [line for line in serve if "restarting" in str(line.get("message", ""))]
    assert len(restarting) == 1, restarting


# --- 5. a fault after a reload's swap ---------------------------------------------------------
