"""The Markdown report: one table per experiment, the budgets, a warning on noisy runs."""

from __future__ import annotations

from lab.budgets import load_budgets
from lab.report import advice, markdown
from lab.results import ConfigResult, ExperimentResult, Results
from lab.wrk import WrkResult

MACHINE = {"cpus": 2, "platform": "Linux", "versions": {"nginx": "1.22.1"}}
SETTINGS = {
    "runs": 3,
    "warmup_s": 1,
    "duration_s": 2,
    "connections": 64,
    "wrk_threads": 1,
    "default_workers": 2,
}


def config(config_id: str, *rates: float) -> ConfigResult:
    return ConfigResult(
        config_id, config_id, [WrkResult(r, 1.0, 9.0, 100, 1.0, 0, 0) for r in rates]
    )


def run_results(bare_spread: float = 10.0) -> Results:
    middleware = ExperimentResult(
        "middleware",
        "Middleware",
        "q",
        "bare",
        [
            config("bare", 1000, 1000 + bare_spread, 1000 - bare_spread),
            config("default", 980, 985, 975),
            config("default-access-log", 500, 510, 490),
        ],
    )
    return Results("full", "./scripts/bench my-service", "s", "f", MACHINE, SETTINGS, [middleware])


def test_a_quiet_run_needs_no_note() -> None:
    """Runs that agree within 20 % leave nothing to warn about."""
    assert advice(run_results()) == []


def test_a_noisy_run_is_flagged() -> None:
    """A configuration whose runs spread by 40 % makes the report say so."""
    (note,) = advice(run_results(bare_spread=200.0))
    assert "varied by up to 40%" in note


def test_report_has_tables_and_budgets() -> None:
    """Each experiment gets a table with the baseline marked and the change to it."""
    text = markdown(run_results(), load_budgets(), chart="benchmark.png")
    assert "| bare | 1,000 | 990 - 1,010 |" in text
    assert (
        "| default-access-log | 500 | 490 - 510 | 1.00 | 9.00 | 0 | -50.0 % (0.50 x, slower) |"
        in text
    )
    assert "| default middleware stack | 0.980 x | 0.60 x | pass |" in text
    # The nginx hop's experiment did not run (--only middleware): no verdict on it.
    assert "nginx hop" not in text
    assert "![benchmark chart](benchmark.png)" in text
