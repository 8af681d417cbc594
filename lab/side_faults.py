"""Issue 19's figures through a project's live stack: what the worst POST /items body costs the
workers, the metrics listener under idle connections, the metrics directory after worker
deaths.

    ./scripts/bench PROJECT_DIR --side-faults [--out DIR]

Starts the project's own stack (`python -m <stack>`, as `make serve`) on 127.0.0.1 with 2
workers and RATE_LIMIT=0, then, in order:

- POST /items with the worst body under the route's limit (8 KiB) and under nginx's global
  one (1 MiB), BODY_REPEATS times each: the status and the workers' CPU per request (/proc);
- IDLE_CONNECTIONS connections to the metrics port that send nothing: the listener's threads
  and resident memory before, while they are open, and after they close;
- the metrics directory (files, bytes) and the median scrape time, at start, after
  WORKER_KILLS SIGKILLs of a worker that has served (each replaced before the next), one GET
  /items/{item_id} after each; and how many of the app's answers to those the scrape counts
  (none may be lost with a dead worker's file). Issue 19 also measured reloads (SIGHUP): the
  stack has had none since serving-stack 0.3.0 (a deploy replaces the container).

A figure the stack cannot give (an older stack, a step that times out) is "n/a" with the
reason. One markdown table, written to DIR/side-faults.md (lab/results.py). The stack starts
through the shared harness (harness/stack.py). Runs in the project's Python; needs nginx, Linux.
"""

from __future__ import annotations

import collections
import datetime
import http.client
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness import clients, procfs
from harness import stack as stacks
from harness.ports import wait_for
from harness.processes import Processes

if TYPE_CHECKING:
    from harness.stack import RunningStack
    from lab.project import Project

ROUTE_LIMIT = 8 * 1024  # POST /items's own client_max_body_size (api/items.py, nginx.conf)
GLOBAL_LIMIT = 1024 * 1024 - 1  # the largest body under nginx's client_max_body_size 1m
BODY_REPEATS = 10  # /proc counts CPU in ticks (10 ms): enough requests to see a few ms each
IDLE_CONNECTIONS = 1500
WORKER_KILLS = 50
WORKERS = 2  # as issue 19 measured, whatever the machine's CPU count
SCRAPES = 20
# Longer than the listener's tend interval (5 s): dead workers' files are archived by then.
SETTLE_S = 6.0
STEP_TIMEOUT_S = 120.0  # one worker's replacement: far longer than it takes
ITEM_ROUTE = "/items/{item_id}"
COUNT = "http_server_request_duration_seconds_count"
NO_ANSWER = 0  # the status of a request whose connection closed without one

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

Rows = list[tuple[str, str]]


class UnavailableError(RuntimeError):
    """What the stack could not do; its row says n/a and this message."""


# What a part of the run may meet on an older stack or a busy machine (a step's deadline is
# a TimeoutError, an OSError): its row says n/a.
FAILURES = (UnavailableError, OSError, http.client.HTTPException)


def key(number: int) -> str:
    """The number-th shortest key over ALPHABET: 62 of one character, then 62 x 62 of two..."""
    width, first = 1, 0
    while number >= first + len(ALPHABET) ** width:
        first += len(ALPHABET) ** width
        width += 1
    number -= first
    digits = ""
    for _ in range(width):
        number, digit = divmod(number, len(ALPHABET))
        digits = ALPHABET[digit] + digits
    return digits


def worst_items_body(size: int) -> bytes:
    """The body issue 19 measured as the costliest for POST /items under a size: as many
    unique short unknown keys as fit, each with [] (every one a validation error)."""
    parts, length, index = [], 2, 0
    while True:
        part = f'"{key(index)}":[]'
        if length + len(part) + 1 > size:
            break
        parts.append(part)
        length += len(part) + 1
        index += 1
    return ("{" + ",".join(parts) + "}").encode()


def counted(exposition: str, route: str) -> float:
    """The requests a Prometheus exposition counts for a route, over methods and statuses."""
    total = 0.0
    for line in exposition.splitlines():
        head, _, value = line.rpartition(" ")
        if head.startswith(f"{COUNT}{{") and f'route="{route}"' in head:
            total += float(value)
    return total


def markdown(rows: Rows) -> str:
    lines = ["| through the live stack | measured |", "|---|---|"]
    lines += [f"| {what} | {result} |" for what, result in rows]
    return "\n".join(lines)


def start(project: Project, processes: Processes, workdir: Path) -> RunningStack:
    """The project's stack, as `make serve` starts it, stopped with processes."""
    env = {
        "WEB_CONCURRENCY": str(WORKERS),
        "APP_MODULE": project.app_module,
        "RATE_LIMIT": "0",  # the requests below are one client's, faster than its rate
    }
    if os.geteuid() == 0:  # as lab/peers.py: root in CI containers serves as root
        env["SERVE_AS_ROOT"] = "on"
    stack = stacks.start(processes, workdir, env, python=sys.executable, cwd=project.root)
    stack.wait_ready("/livez", 60)
    stack.wait_ready("/metrics", 60, metrics=True)
    return stack


def get(stack: RunningStack, path: str, *, metrics: bool = False) -> tuple[int, bytes]:
    """GET path through nginx (or on the metrics port); status 0 when nothing came back."""
    status, _, body = clients.get(stack.metrics_port if metrics else stack.port, path, timeout=30)
    return status, body


def gunicorn(stack: RunningStack) -> int:
    """The serving gunicorn master."""
    masters = procfs.children(stack.process.pid, "-m gunicorn")
    if len(masters) != 1:
        raise UnavailableError(f"{len(masters)} gunicorn masters under the supervisor")
    return masters[0]


def workers(stack: RunningStack) -> list[int]:
    return procfs.children(gunicorn(stack))


def listener(stack: RunningStack) -> int:
    found = procfs.children(stack.process.pid, "metrics_listener")
    if len(found) != 1:
        raise UnavailableError(f"{len(found)} metrics listeners under the supervisor")
    return found[0]


def post(port: int, body: bytes) -> str:
    """POST /items on a connection of its own; the status, or why there is none. nginx may
    answer 413 and close before it has the whole body: the answer is read all the same."""
    headers = {"Content-Type": "application/json"}
    status = clients.request(port, "POST", "/items", body, headers=headers, timeout=60)[0]
    return str(status) if status else "no answer"


def workers_cpu(stack: RunningStack) -> float:
    """CPU seconds the serving workers have used, from /proc."""
    return procfs.cpu_seconds(workers(stack))


def body_rows(stack: RunningStack) -> Rows:
    rows = []
    for limit, name in ((ROUTE_LIMIT, "8 KiB"), (GLOBAL_LIMIT, "1 MiB")):
        body = worst_items_body(limit)
        keys = len(json.loads(body))
        before = workers_cpu(stack)
        statuses = {post(stack.port, body) for _ in range(BODY_REPEATS)}
        time.sleep(0.5)  # a refused body's worker CPU, if any, is counted by now
        spent = (workers_cpu(stack) - before) / BODY_REPEATS
        what = f"POST /items, the worst body under {name} ({len(body):,} B, {keys:,} unknown keys)"
        status = "/".join(sorted(statuses))
        rows.append(
            (what, f"{status}; {spent:.3f} s of worker CPU per request ({BODY_REPEATS} sent)")
        )
    return rows


def threads_and_rss(pid: int) -> str:
    fields = procfs.status(pid)
    rss = int(fields["VmRSS"].split()[0]) / 1024
    return f"threads {int(fields['Threads'])}, RSS {rss:.0f} MiB"


def listener_rows(stack: RunningStack) -> Rows:
    pid = listener(stack)
    rows = [("metrics listener, idle", threads_and_rss(pid))]
    idle, refused = [], 0
    try:
        for _ in range(IDLE_CONNECTIONS):
            try:
                idle.append(socket.create_connection(("127.0.0.1", stack.metrics_port), 5))
            except OSError:
                refused += 1
        time.sleep(2)  # the listener accepts what it will
        opened = f"{IDLE_CONNECTIONS:,} idle connections open ({refused} not connected)"
        rows.append((f"metrics listener, {opened}", threads_and_rss(pid)))
    finally:
        for conn in idle:
            conn.close()
    time.sleep(2)
    status = get(stack, "/metrics", metrics=True)[0]
    rows.append(
        ("metrics listener, 2 s after they closed", f"{threads_and_rss(pid)}; scrape {status}")
    )
    return rows


def directory(stack: RunningStack, statuses: list[int]) -> str:
    """Files and bytes in the metrics directory, the median scrape, and how many of the app's
    answers to GET /items/{item_id} (``statuses``: 404) the scrape counts."""
    get(stack, "/metrics", metrics=True)
    time.sleep(SETTLE_S)
    files = [path for path in (stack.run_dir / "metrics").iterdir() if path.is_file()]
    size = sum(path.stat().st_size for path in files)
    times, exposition = [], b""
    for _ in range(SCRAPES):
        began = time.perf_counter()
        status, exposition = get(stack, "/metrics", metrics=True)
        times.append((time.perf_counter() - began) * 1000)
        if status != 200:
            raise UnavailableError(f"a scrape answered {status}")
    seen = counted(exposition.decode(), ITEM_ROUTE)
    return (
        f"{len(files)} files, {size / 1e6:.2f} MB; scrape {statistics.median(times):.1f} ms; "
        f"{seen:.0f} of the app's {statuses.count(404)} answers counted{others(statuses)}"
    )


def others(statuses: list[int]) -> str:
    """The answers that were not the app's 404, as " (besides: 502 x 2)"; empty when none."""
    counts = collections.Counter(status for status in statuses if status != 404)
    listed = ", ".join(f"{status or 'no answer'} x {n}" for status, n in sorted(counts.items()))
    return f" (besides: {listed})" if listed else ""


def kill_worker(stack: RunningStack) -> None:
    """SIGKILL the oldest worker that has served (it has a histogram file, as a recycled or
    crashed worker has) and wait until gunicorn has replaced (and reaped) it."""
    time.sleep(0.5)  # the app counts a request after answering it: let the last be counted
    before = workers(stack)
    metrics = stack.run_dir / "metrics"
    served = [pid for pid in before if (metrics / f"histogram_{pid}.db").exists()]
    victim = min(served or before)
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: victim not in (now := workers(stack)) and len(now) == len(before),
        STEP_TIMEOUT_S,
        "a worker's replacement",
    )


def metrics_rows(stack: RunningStack) -> Rows:
    statuses: list[int] = []

    def request() -> None:
        # The app's 404, counted under /items/{item_id}; nginx's own 502 is counted nowhere.
        try:
            statuses.append(get(stack, f"/items/side-faults-{len(statuses)}")[0])
        except FAILURES:
            statuses.append(NO_ANSWER)

    for _ in range(200):
        request()
    rows = [("metrics directory at start", directory(stack, statuses))]
    try:
        for _ in range(WORKER_KILLS):
            kill_worker(stack)
            request()
        result = directory(stack, statuses)
    except FAILURES as exc:
        result = f"n/a: {type(exc).__name__}: {exc}"
    rows.append((f"metrics directory after {WORKER_KILLS} worker kills", result))
    return rows


def measure(project: Project) -> Rows:
    """Every row, from one stack; a part the stack cannot do is n/a with the reason."""
    processes = Processes()
    with tempfile.TemporaryDirectory(prefix="side-faults-") as workdir:
        try:
            stack = start(project, processes, Path(workdir))
            rows: Rows = []
            for part, name in (
                (body_rows, "POST /items"),
                (listener_rows, "metrics listener"),
                (metrics_rows, "metrics directory"),
            ):
                try:
                    rows += part(stack)
                except FAILURES as exc:
                    rows.append((name, f"n/a: {type(exc).__name__}: {exc}"))
        finally:
            processes.stop_all()
    return rows


def report(project: Project) -> str:
    """The table, under the facts of the run (project, time, CPUs, load)."""
    began = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    print(
        f"side faults of {project.root.name}: its stack, {WORKERS} workers, RATE_LIMIT=0",
        flush=True,
    )
    rows = measure(project)
    facts = (
        f"{project.root.name}, {began}, {len(os.sched_getaffinity(0))} CPUs, load average "
        f"{load:.1f} at start, {os.getloadavg()[0]:.1f} at end"
    )
    return f"{facts}\n\n{markdown(rows)}\n"
