"""Run by test_metric_writes.py in a process of its own, with PROMETHEUS_MULTIPROC_DIR set.

    python multiprocess_writes.py ours|theirs

Makes the same changes to the request metrics either through metric_writes.py (``ours``,
what the middleware does) or through prometheus_client's own calls (``theirs``): observations
on bucket bounds and between them, past the last bound, the in-flight gauge up and down; a
forked child that writes and exits, then the parent writing again; then enough other values
that prometheus_client grows (re-maps) the histogram file, and writing after that.
"""

import os
import sys

from prometheus_client import CollectorRegistry, Histogram

from {{ cookiecutter.package_name }}.middleware.metric_writes import Writes
from {{ cookiecutter.package_name }}.middleware.metrics import RequestMetrics

# Bounds for a 2.5 s deadline: 0.005 ... 1.0, 2.5, +Inf. Values on a bound, between two,
# below the first and past the last.
AMOUNTS = (0.0, 1e-9, 0.005, 0.0051, 0.3, 1.0, 2.5, 2.6, 7.0)
KEYS = (("GET", "/livez", 200), ("POST", "/items", 201), ("GET", "unmatched", 404))


def change(metrics: RequestMetrics, writes: Writes | None, rounds: int) -> None:
    for number in range(rounds):
        for key in KEYS:
            for amount in AMOUNTS:
                if writes is None:
                    method, route, status = key
                    metrics.duration.labels(method, route, str(status)).observe(amount)
                else:
                    writes.current().histogram(key).observe(amount)
        # In flight: up twice, down once per round.
        for step in (1.0, 1.0, -1.0):
            if writes is None:
                metrics.active.inc(step)
            else:
                writes.current().add_active(step)
        del number


def main(mode: str) -> None:
    metrics = RequestMetrics(deadline_seconds=2.5)
    writes = Writes(metrics.duration, metrics.active) if mode == "ours" else None
    change(metrics, writes, rounds=3)

    child = os.fork()
    if child == 0:
        change(metrics, writes, rounds=2)
        os._exit(0)
    os.waitpid(child, 0)
    change(metrics, writes, rounds=1)

    # Thousands of new series grow the histogram file past its first megabyte.
    other = Histogram("padding_seconds", "Grows the file.", ("n",), registry=CollectorRegistry())
    for number in range(6000):
        other.labels(str(number)).observe(1.0)
    change(metrics, writes, rounds=1)


if __name__ == "__main__":
    main(sys.argv[1])
