"""--only and --quick: which experiments and configurations a run measures (lab/experiments)."""

import pytest

from lab.experiments import Config, Experiment, ServerSet, select

STACK = ServerSet()
WITH_QUICK = Experiment(
    "middleware",
    "t",
    "q",
    "bare",
    (Config("bare", "bare", STACK, quick=True), Config("grid", "grid", STACK)),
)
FULL_ONLY = Experiment("workers", "t", "q", "one", (Config("one", "one", STACK),))
ALL = [WITH_QUICK, FULL_ONLY]


def test_everything_by_default() -> None:
    """No --only, no --quick: every experiment with every configuration."""
    assert select(ALL, None, quick=False) == ALL


def test_only_keeps_the_named_experiments() -> None:
    assert select(ALL, ["workers"], quick=False) == [FULL_ONLY]


def test_quick_keeps_quick_configurations_and_drops_experiments_left_empty() -> None:
    """Quick mode measures what the budgets need; an experiment without any is skipped."""
    [kept] = select(ALL, None, quick=True)
    assert kept.id == "middleware"
    assert [config.id for config in kept.configs] == ["bare"]


def test_only_and_quick_together_can_leave_nothing() -> None:
    assert select(ALL, ["workers"], quick=True) == []


def test_an_unknown_name_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"unknown experiment\(s\) \['nope'\]"):
        select(ALL, ["middleware", "nope"], quick=False)
