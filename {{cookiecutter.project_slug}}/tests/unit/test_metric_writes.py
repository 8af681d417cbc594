"""metric_writes.py writes exactly what prometheus_client's own calls would, under gunicorn's mode.

The middleware skips prometheus_client's per-change lock and fork check by writing its
memory-mapped values itself (metric_writes.py). These tests run the same changes both ways,
each in a process of its own with PROMETHEUS_MULTIPROC_DIR set (prometheus_client picks its
multiprocess mode at import), and compare what the metrics listener would read: the files
the two leave behind, merged as deploy/metrics.py merges them.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from {{ cookiecutter.package_name }}.middleware.metric_writes import Writes, add_to

SCENARIO = Path(__file__).with_name("multiprocess_writes.py")
# (sample name, its labels sorted) -> value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def run_scenario(mode: str, directory: Path) -> Samples:
    """Run multiprocess_writes.py in ``mode``; every sample the files hold, merged."""
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    subprocess.run([sys.executable, str(SCENARIO), mode], env=environment, check=True, timeout=120)
    registry = CollectorRegistry()
    # prometheus_client leaves this constructor unannotated.
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if not sample.name.startswith("padding_")
    }


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Samples, Samples]:
    ours = run_scenario("ours", tmp_path_factory.mktemp("ours"))
    theirs = run_scenario("theirs", tmp_path_factory.mktemp("theirs"))
    return ours, theirs


def test_every_sample_matches_prometheus_clients_own_writes(both: tuple[Samples, Samples]) -> None:
    """Buckets, sums, counts and the gauge: the same series with the same values."""
    ours, theirs = both
    assert ours == theirs


def test_the_scenario_counted_what_it_did(both: tuple[Samples, Samples]) -> None:
    """Seven rounds of nine observations per series (three before the fork, two in the
    child, one after it, one after the file grew), and the in-flight gauge at +1 per live
    round: the comparison above is not between two empty sets."""
    ours, _ = both
    count = ours[
        (
            "http_server_request_duration_seconds_count",
            (("method", "GET"), ("route", "/livez"), ("status", "200")),
        )
    ]
    on_the_deadline = ours[
        (
            "http_server_request_duration_seconds_bucket",
            (("le", "2.5"), ("method", "GET"), ("route", "/livez"), ("status", "200")),
        )
    ]
    assert count == 7 * 9
    # 0.0, 1e-9, 0.005, 0.0051, 0.3, 1.0 and 2.5 are at or below 2.5; 2.6 and 7.0 are not.
    assert on_the_deadline == 7 * 7
    # The gauge is livesum: the exited child's file still counts until gunicorn's
    # child_exit marks it dead (not done here), so +1 per round, seven rounds.
    assert ours[("http_server_active_requests", ())] == 7


# --- another prometheus_client: internals renamed, public calls the same --------------------
# No such release exists to install, so these stand-ins have only the public calls (and the
# multiprocess flag): what metric_writes.py must fall back to when its internals are gone.


class ValueOfAnotherVersion:
    _multiprocess = True

    def __init__(self) -> None:
        self.total = 0.0

    def get(self) -> float:
        return self.total

    def inc(self, amount: float) -> None:
        self.total += amount


class ChildOfAnotherVersion:
    def __init__(self) -> None:
        self.observed: list[float] = []

    def observe(self, amount: float) -> None:
        self.observed.append(amount)


class HistogramOfAnotherVersion:
    def __init__(self) -> None:
        self.children: dict[tuple[str, ...], ChildOfAnotherVersion] = {}

    def labels(self, *values: str) -> ChildOfAnotherVersion:
        return self.children.setdefault(values, ChildOfAnotherVersion())


def test_a_value_without_the_known_internals_is_changed_by_its_own_inc() -> None:
    """Slower, never wrong: the value's own inc does the change."""
    value = ValueOfAnotherVersion()
    add = add_to(value)
    add(2.5)
    add(-1.0)
    assert value.get() == 1.5


def test_the_middlewares_writers_fall_back_to_the_public_calls() -> None:
    """The gauge's own inc and the histogram child's own observe, not an error per request."""
    gauge, histogram = ValueOfAnotherVersion(), HistogramOfAnotherVersion()
    # The stand-ins have the public calls Writes uses, not prometheus_client's classes.
    writes = Writes(histogram, gauge).current()  # type: ignore[arg-type]
    writes.add_active(1.0)
    writes.histogram(("GET", "/livez", 200)).observe(0.25)
    writes.add_active(-1.0)
    assert gauge.get() == 0.0
    assert histogram.children[("GET", "/livez", "200")].observed == [0.25]
