"""Budget checks on results: ratios from one run, errors, missing configurations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from lab.budgets import Budget, BudgetSet, check_budgets, load_budgets
from lab.experiments import experiments
from lab.results import ConfigResult, ExperimentResult, Results
from lab.wrk import WrkResult

if TYPE_CHECKING:
    from pathlib import Path

BUDGET = Budget("stack", "middleware", "default", "bare", 0.95, "because")
BUDGETS = BudgetSet((BUDGET,), max_error_fraction=0.001)


def results(default: float, bare: float = 1000.0, default_errors: int = 0) -> Results:
    def config(config_id: str, rps: float, errors: int = 0) -> ConfigResult:
        runs = [WrkResult(rps, 1.0, 2.0, 10_000, 1.0, errors, 0) for _ in range(3)]
        return ConfigResult(config_id, config_id, runs)

    experiment = ExperimentResult(
        "middleware",
        "t",
        "q",
        "bare",
        [config("bare", bare), config("default", default, default_errors)],
    )
    return Results("quick", "cmd", "start", "end", {}, {}, [experiment])


def test_ratio_at_budget_passes() -> None:
    """A candidate at exactly the minimum ratio passes."""
    (outcome,) = check_budgets(results(default=950.0), BUDGETS)
    assert outcome.passed
    assert outcome.ratio == pytest.approx(0.95)


def test_ratio_below_budget_fails() -> None:
    """Below the minimum ratio the budget fails and says by how much."""
    (outcome,) = check_budgets(results(default=940.0), BUDGETS)
    assert not outcome.passed
    assert "0.940 x (at best 0.940 x across runs) is below the budget 0.95 x" in outcome.message


def test_a_median_below_budget_within_noise_passes() -> None:
    """A median ratio under the budget passes while the candidate's best run reaches it
    against the baseline's worst: noise, not a finding."""
    noisy = results(default=900.0)
    bare, default = noisy.experiments[0].configs
    bare.runs[0] = WrkResult(900.0, 1.0, 2.0, 10_000, 1.0, 0, 0)
    default.runs[0] = WrkResult(960.0, 1.0, 2.0, 10_000, 1.0, 0, 0)
    (outcome,) = check_budgets(noisy, BUDGETS)
    assert outcome.ratio == pytest.approx(0.9)
    assert outcome.passed


def test_errors_fail_a_fast_candidate() -> None:
    """A fast configuration answering errors (a 502 is fast) fails its budget."""
    (outcome,) = check_budgets(results(default=2000.0, default_errors=100), BUDGETS)
    assert not outcome.passed
    assert "errors" in outcome.message


def test_an_experiment_left_out_is_not_judged() -> None:
    """--only or a project without a database leaves experiments out: no verdict on them."""
    empty = Results("quick", "cmd", "start", "end", {}, {}, [])
    assert check_budgets(empty, BUDGETS) == []


def test_missing_configuration_fails() -> None:
    """A budget whose experiment ran without its configurations fails, not passes silently."""
    partial = results(default=990.0)
    partial.experiments[0].configs.pop()
    (outcome,) = check_budgets(partial, BUDGETS)
    assert not outcome.passed
    assert outcome.ratio is None


def test_shipped_budgets_are_the_documented_ones() -> None:
    """budgets.toml holds the floors the template README documents."""
    budgets = {b.name: b for b in load_budgets().budgets}
    assert budgets["default middleware stack"].min_ratio == 0.60
    assert budgets["nginx hop, small JSON"].min_ratio == 0.50
    assert budgets["nginx hop, 1 MiB"].min_ratio == 0.45


def test_quick_mode_measures_every_budget() -> None:
    """Each budget's two configurations exist and are part of quick mode (--quick)."""
    # The item id only forms the read configurations' paths.
    chosen = experiments(cpus=2, default_workers=2, package="my_service", item_id=1)
    by_id = {e.id: e for e in chosen}
    for budget in load_budgets().budgets:
        experiment = by_id[budget.experiment]
        assert experiment.config(budget.candidate).quick, budget
        assert experiment.config(budget.baseline).quick, budget


def test_results_file_round_trips(tmp_path: Path) -> None:
    """What `run` writes, `check` reads back unchanged."""
    original = results(default=990.0)
    path = tmp_path / "benchmark.json"
    path.write_text(original.to_json(), encoding="utf-8")
    assert Results.read(path) == original
