"""The metrics directory, written by real prometheus_client processes: each worker's files
allocated before it writes, dead processes' values kept in the archive (their files removed)."""

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from serving_stack.metrics_files import INITIAL_SIZE, KINDS
from serving_stack.metrics_listener import Archive

# A worker allocating its files, then writing a counter, a histogram (two label sets) and a
# livesum gauge, as prometheus_client does in multiprocess mode; argv[1]: "wait" or "exit".
WORKER = """
import os, sys
from pathlib import Path
from serving_stack.metrics_files import prepare_worker
assert prepare_worker(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]), os.getpid()) is None
from prometheus_client import Counter, Gauge, Histogram
Counter("jobs", "Jobs.", ["kind"]).labels("a").inc(3)
duration = Histogram("took_seconds", "Time.", ["route"], buckets=(0.1, 1.0))
for value in (0.05, 0.5, 5.0):
    duration.labels("/a").observe(value)
duration.labels("/b").observe(0.5)
Gauge("busy", "Busy.", multiprocess_mode="livesum").set(1)
if sys.argv[1] == "wait":
    print("written", flush=True)
    sys.stdin.read()
"""


def worker(directory: Path, wait: str = "exit") -> subprocess.Popen[str]:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    pipe = subprocess.PIPE if wait == "wait" else subprocess.DEVNULL
    command = [sys.executable, "-c", WORKER, wait]
    return subprocess.Popen(command, env=env, stdin=pipe, stdout=pipe, text=True)


def exposition(collector: object) -> set[str]:
    """The sample lines a scrape of this collector renders (comments and order aside)."""
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]  # any object with collect()
    text = generate_latest(registry).decode()
    return {line for line in text.splitlines() if line and not line.startswith("#")}


def test_dead_workers_values_stay_counted_from_one_archive(tmp_path: Path) -> None:
    """Two dead workers, then a live one: its files, of every kind the stack knows (those it
    never writes too), are allocated before it writes, at prometheus_client's size, which it
    keeps. After tending, the same counts and buckets are served, the dead ones' files are gone
    and archive files hold their values; the dead's gauges drop."""
    dead = [worker(tmp_path) for _ in range(2)]  # side by side: mostly interpreter start-ups
    assert [process.wait(timeout=30) for process in dead] == [0, 0]
    live = worker(tmp_path, "wait")
    assert live.stdout is not None
    assert live.stdout.readline() == "written\n"
    # prometheus_client's own files are sparse: fewer blocks than their size, until written.
    mine = {path.name: path.stat() for path in tmp_path.glob(f"*_{live.pid}.db")}
    assert sorted(mine) == sorted(f"{kind}_{live.pid}.db" for kind in KINDS)
    assert all(s.st_size == INITIAL_SIZE <= s.st_blocks * 512 for s in mine.values()), mine
    # prometheus_client's own collector, before anything is archived; the dead workers'
    # live gauges would still count there.
    own = MultiProcessCollector(None, path=str(tmp_path))  # type: ignore[no-untyped-call]  # unannotated upstream
    before = {line for line in exposition(own) if not line.startswith("busy")}
    archive = Archive(tmp_path)
    try:
        after = exposition(archive)
        files = {path.name.rpartition("_")[2] for path in tmp_path.glob("*.db")}
        assert files == {f"{live.pid}.db", "archive.db"}
    finally:
        live.communicate("")

    assert after == before | {"busy 1.0"}
    # Each of the 3 workers observed 2 values up to 1 s on /a, and counted 3 jobs.
    assert 'took_seconds_bucket{le="1.0",route="/a"} 6.0' in after
    assert 'jobs_total{kind="a"} 9.0' in after
    # The last one dead: nothing but the archive, its blocks allocated, and the same totals,
    # as prometheus_client's own collector reads them too.
    assert exposition(archive) == before == exposition(own)
    archived = sorted(tmp_path.iterdir())
    assert [path.name for path in archived] == ["counter_archive.db", "histogram_archive.db"]
    assert all(path.stat().st_blocks * 512 >= path.stat().st_size for path in archived)
