"""Dead workers' metrics in one archive file, and the collector that adds it to the live files.

Every gunicorn worker (of every generation) writes its values to files of its own in
PROMETHEUS_MULTIPROC_DIR (metrics_files.py). A worker that dies (recycled by MAX_REQUESTS,
killed, replaced by a reload) would leave its files for as long as the stack runs, read at
every scrape: 50 worker kills left 29 files, 20 reloads 72 (issue 19). Here the metrics
listener, the only process that reads the directory, also tends it, on each scrape and every
TEND_INTERVAL seconds:

- the files of a process that no longer exists are merged into ``archive.json`` (written
  atomically) and removed, after prometheus_client's ``mark_process_dead`` dropped its live
  gauges: the directory holds the live workers' files and one archive;
- counters, histograms and summaries add up, so their totals survive the worker. A gauge
  in a mode that keeps a dead process's value (``all``, prometheus_client's default, ``sum``,
  ``min``, ``max``, ``mostrecent``) keeps its file, as prometheus_client defines those
  modes: prefer the ``live*`` modes, as the template's own gauge does;
- the collector reads the live files with prometheus_client's public
  ``MultiProcessCollector.merge`` (raw, per bucket), adds the archive sample by sample, and
  accumulates histogram buckets once: one series per label set, never a duplicate;
- every file's next doubling is reserved (metrics_files.reserve_growth).

One process (this one) writes the archive and removes files, under one lock with the reads:
a scrape never counts a worker twice nor misses one. A process is dead when kill(pid, 0)
says so; a zombie counts as alive until gunicorn reaps it. Depends on prometheus_client's
public API, metrics_files.py and jsonlog.py.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric, Sample
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from .metrics_files import ARCHIVE, file_pid, reserve_growth

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path

# Often enough that a dead worker's files go within seconds, and a file's next doubling is
# reserved before a worker fills the current one (64 KiB: ~18 label sets of the request
# histogram); cheap: a glob, a stat and a kill(pid, 0) per file.
TEND_INTERVAL = 5.0
# The kinds whose values add up across processes (prometheus_client's file kinds).
ADDITIVE = frozenset({"counter", "histogram", "summary"})

# (sample name, sorted label pairs) -> value
Values = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def alive(pid: int) -> bool:
    """Whether a process exists (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Archive:
    """The metrics directory: its live files, its archive, and the lock over both."""

    def __init__(self, directory: Path, say: Callable[..., None]) -> None:
        self.directory = directory
        self.path = directory / ARCHIVE
        self.lock = threading.Lock()
        self.say = say
        self.problem = ""

    def load(self) -> dict[str, Any]:
        """The archive: {"kinds": [...], "metrics": {name: {"type", "help", "samples"}}}."""
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"kinds": [], "metrics": {}}
        if not isinstance(loaded, dict) or not isinstance(loaded.get("metrics"), dict):
            raise ValueError(f"{self.path} is not an archive of metrics")  # noqa: TRY004 - bad data, as json's own errors
        return loaded

    def files(self) -> list[Path]:
        return sorted(path for path in self.directory.glob("*.db") if file_pid(path))

    def tend(self) -> None:
        """Archive the dead processes' files and reserve growth; a failure (a full
        filesystem) is said once, and the files stay until a later pass succeeds."""
        try:
            self.load()  # a damaged archive is said here, once, not at every scrape
            self.archive_dead()
            for path in self.files():
                reserve_growth(path)
        except (OSError, ValueError) as exc:
            self.report(exc)
            return
        self.report(None)

    def report(self, exc: Exception | None) -> None:
        """Say a problem once, and once that it is over (a pass every few seconds)."""
        problem = f"{type(exc).__name__}: {exc}" if exc else ""
        if problem and problem != self.problem:
            self.say("error", "cannot tend the metric files", error=problem)
        elif self.problem and not problem:
            self.say("info", "the metric files are tended again")
        self.problem = problem

    def archive_dead(self) -> None:
        dead = {pid for pid in map(file_pid, self.files()) if pid and not alive(pid)}
        if not dead:
            return
        for pid in dead:
            mark_process_dead(pid, str(self.directory))  # type: ignore[no-untyped-call]  # unannotated upstream
        merged = [
            path for path in self.files()
            if file_pid(path) in dead and path.stem.rpartition("_")[0] in ADDITIVE
        ]  # fmt: skip
        if not merged:
            return
        archive = self.load()
        metrics = archive["metrics"]
        for metric in _merge(merged):
            entry = metrics.get(metric.name)
            if entry is None or entry["type"] != metric.type:  # a redefined metric: newest
                entry = metrics[metric.name] = {
                    "type": metric.type, "help": metric.documentation, "samples": [],
                }  # fmt: skip
            values = _values(entry["samples"])
            _add(values, ((s.name, s.labels, s.value) for s in metric.samples))
            entry["samples"] = [[n, dict(labels), v] for (n, labels), v in values.items()]
        kinds = {path.stem.rpartition("_")[0] for path in merged}
        archive["kinds"] = sorted(set(archive.get("kinds", [])) | kinds)
        partial = self.path.with_suffix(".json.tmp")
        try:
            partial.write_text(json.dumps(archive, separators=(",", ":")), encoding="utf-8")
            partial.replace(self.path)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
        for path in merged:
            path.unlink()

    def collect(self) -> Iterator[Metric]:
        """The live files plus the archive, each series once (what a scrape renders)."""
        with self.lock:
            self.tend()
            live = _merge(self.files())
            try:
                archived: dict[str, Any] = self.load()["metrics"]
            except (OSError, ValueError):  # said by tend(); the live values still count
                archived = {}
        families: dict[str, tuple[str, str, Values]] = {}
        for metric in live:
            values = families.setdefault(metric.name, (metric.type, metric.documentation, {}))[2]
            _add(values, ((s.name, s.labels, s.value) for s in metric.samples))
        for name, entry in archived.items():
            typ, _, values = families.setdefault(name, (entry["type"], entry["help"], {}))
            if typ == entry["type"]:  # else the running code redefined it: its values alone
                _add(values, ((n, labels, value) for n, labels, value in entry["samples"]))
        for name, (typ, documentation, values) in families.items():
            metric = Metric(name, documentation, typ)
            samples = _accumulated(name, values) if typ == "histogram" else values
            metric.samples = [Sample(n, dict(labels), v) for (n, labels), v in samples.items()]
            yield metric


def _merge(files: list[Path]) -> Iterable[Metric]:
    """Each metric of these files, samples added up across them, histogram buckets raw."""
    merged: Iterable[Metric] = MultiProcessCollector.merge(  # type: ignore[no-untyped-call]  # unannotated upstream
        [str(path) for path in files], accumulate=False
    )
    return merged


def _values(samples: Iterable[list[Any]]) -> Values:
    values: Values = {}
    _add(values, ((name, labels, value) for name, labels, value in samples))
    return values


def _add(values: Values, samples: Iterable[tuple[str, dict[str, str], float]]) -> None:
    for name, labels, value in samples:
        key = (name, tuple(sorted(labels.items())))
        values[key] = values.get(key, 0.0) + value


def _accumulated(name: str, values: Values) -> Values:
    """Raw per-bucket counts made cumulative, with each label set's ``_count``, in the order
    prometheus_client's own collector renders a histogram."""
    buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, str, float]]]
    buckets = defaultdict(list)
    others: dict[tuple[tuple[str, str], ...], Values] = defaultdict(dict)
    for (sample, labels), value in values.items():
        le = dict(labels).get("le")
        rest = tuple(pair for pair in labels if pair[0] != "le")
        if sample == f"{name}_bucket" and le is not None:
            buckets[rest].append((float(le), le, value))
        else:
            others[rest][(sample, labels)] = value
    out: Values = {}
    for rest in sorted(buckets.keys() | others.keys()):
        total = 0.0
        for _, le, value in sorted(buckets[rest]):
            total += value
            out[(f"{name}_bucket", (*rest, ("le", le)))] = total  # le last, as upstream
        if buckets[rest]:
            out[(f"{name}_count", rest)] = total
        out.update(others[rest])
    return out
