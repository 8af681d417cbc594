"""Summaries of repeated runs: median and min-max, and how two configurations compare.

Pure functions over `WrkResult`s (lab/wrk.py); no I/O. The median of a few runs resists one
disturbed run; the min-max range shows how far to trust the difference between two medians.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lab.wrk import WrkResult


@dataclass(frozen=True)
class Summary:
    """Requests/s of one configuration over its runs, with latency and errors."""

    runs: int
    median: float
    low: float
    high: float
    p50_ms: float  # median over runs of each run's p50
    p99_ms: float  # median over runs of each run's p99
    errors: int  # non-2xx responses + socket errors, summed over runs
    requests: int  # summed over runs

    @property
    def error_fraction(self) -> float:
        return self.errors / self.requests if self.requests else 1.0


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The sample at ``fraction`` (0.5: the median, 0.99: p99); at least two samples."""
    return statistics.quantiles(samples, n=100, method="inclusive")[round(fraction * 100) - 1]


def summarize(results: Sequence[WrkResult]) -> Summary:
    """Summarize the runs of one configuration (at least one)."""
    if not results:
        raise ValueError("no runs to summarize")
    rates = [r.requests_per_s for r in results]
    return Summary(
        runs=len(results),
        median=statistics.median(rates),
        low=min(rates),
        high=max(rates),
        p50_ms=statistics.median(r.p50_ms for r in results),
        p99_ms=statistics.median(r.p99_ms for r in results),
        errors=sum(r.errors for r in results),
        requests=sum(r.requests for r in results),
    )


def ratio(candidate: Summary, baseline: Summary) -> float:
    """candidate's median requests/s as a multiple of baseline's."""
    if baseline.median <= 0:
        return float("inf") if candidate.median > 0 else 1.0
    return candidate.median / baseline.median


def percent_change(candidate: Summary, baseline: Summary) -> float:
    """The seeds' "difference to baseline", in percent."""
    return (ratio(candidate, baseline) - 1.0) * 100.0


class Outcome(Enum):
    """How candidate compares with baseline once run-to-run spread is taken into account."""

    FASTER = "faster"  # every run of candidate beat every run of baseline
    SLOWER = "slower"  # every run of candidate lost to every run of baseline
    SAME = "within noise"  # the min-max ranges overlap


def compare(candidate: Summary, baseline: Summary) -> Outcome:
    """Classify by min-max ranges: only disjoint ranges count as a difference."""
    if candidate.low > baseline.high:
        return Outcome.FASTER
    if candidate.high < baseline.low:
        return Outcome.SLOWER
    return Outcome.SAME


def best_within(summaries: Sequence[tuple[int, Summary]], tolerance: float) -> int:
    """The smallest key whose median is within `tolerance` (a fraction) of the best median.

    Used for the worker count: beyond the point where more workers stop paying, fewer
    workers use less memory and leave CPU to nginx and the rest of the machine.
    """
    if not summaries:
        raise ValueError("nothing to choose from")
    best = max(s.median for _, s in summaries)
    return min(key for key, s in summaries if s.median >= best * (1.0 - tolerance))
