"""Medians, ranges and comparisons of repeated runs."""

from __future__ import annotations

import pytest

from lab.stats import Outcome, best_within, compare, percent_change, ratio, summarize
from lab.wrk import WrkResult


def run(rps: float, *, p50: float = 1.0, p99: float = 5.0, errors: int = 0) -> WrkResult:
    return WrkResult(rps, p50, p99, int(rps), 1.0, errors, 0)


def test_summary_is_median_and_range() -> None:
    """The median resists one disturbed run; min and max show the spread."""
    summary = summarize([run(100), run(10), run(110)])
    assert (summary.median, summary.low, summary.high) == (100, 10, 110)
    assert summary.runs == 3


def test_summary_latency_is_median_of_runs_and_errors_add_up() -> None:
    """p50/p99 are medians over runs; errors and requests are summed."""
    summary = summarize([run(100, p99=5, errors=1), run(100, p99=50), run(100, p99=7, errors=2)])
    assert summary.p99_ms == 7
    assert summary.errors == 3
    assert summary.error_fraction == pytest.approx(3 / 300)


def test_no_runs_is_an_error() -> None:
    """An empty configuration cannot be summarized."""
    with pytest.raises(ValueError, match="no runs"):
        summarize([])


def test_ratio_and_percent_change() -> None:
    """Ratios are of medians; the percent change is the seeds' "difference to baseline"."""
    base = summarize([run(100), run(100), run(100)])
    faster = summarize([run(130), run(125), run(140)])
    assert ratio(faster, base) == pytest.approx(1.3)
    assert percent_change(faster, base) == pytest.approx(30.0)


def test_compare_needs_disjoint_ranges() -> None:
    """Only non-overlapping min-max ranges count as faster or slower."""
    base = summarize([run(90), run(100), run(110)])
    assert compare(summarize([run(111), run(120), run(130)]), base) is Outcome.FASTER
    assert compare(summarize([run(60), run(70), run(89)]), base) is Outcome.SLOWER
    assert compare(summarize([run(105), run(120), run(130)]), base) is Outcome.SAME


def test_best_within_prefers_fewer_when_close() -> None:
    """The smallest key within the tolerance of the best wins (fewer workers, same throughput)."""
    points = [(n, summarize([run(rps)] * 3)) for n, rps in [(1, 50), (2, 98), (3, 100), (4, 90)]]
    assert best_within(points, 0.03) == 2
    assert best_within(points, 0.0) == 3
