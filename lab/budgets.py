"""Check a results file against the throughput budgets in lab/budgets.toml.

Pure logic (no processes): `check_budgets` returns one outcome per budget whose experiment
ran; the CLI prints them and exits non-zero when any failed.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.stats import ratio

if TYPE_CHECKING:
    from lab.results import Results

BUDGETS_FILE = Path(__file__).with_name("budgets.toml")


@dataclass(frozen=True)
class Budget:
    name: str
    experiment: str
    candidate: str
    baseline: str
    min_ratio: float
    why: str


@dataclass(frozen=True)
class BudgetSet:
    budgets: tuple[Budget, ...]
    max_error_fraction: float


@dataclass(frozen=True)
class Outcome:
    budget: Budget
    passed: bool
    ratio: float | None  # None when the run lacks one of the configurations
    message: str


def load_budgets(path: Path = BUDGETS_FILE) -> BudgetSet:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    budgets = tuple(Budget(**entry) for entry in data["budget"])
    return BudgetSet(budgets, float(data["max_error_fraction"]))


def check_budgets(results: Results, budgets: BudgetSet) -> list[Outcome]:
    """Judge every budget whose experiment ran (`--only`, or no database: the others are
    left out); a configuration missing from an experiment that ran fails its budget."""
    outcomes = []
    for budget in budgets.budgets:
        experiment = results.experiment(budget.experiment)
        if experiment is None:
            continue
        candidate = experiment.config(budget.candidate) if experiment else None
        baseline = experiment.config(budget.baseline) if experiment else None
        if candidate is None or baseline is None:
            missing = (
                f"{budget.experiment}/{budget.candidate} and {budget.experiment}/{budget.baseline}"
            )
            message = f"not measured in this run ({missing})"
            outcomes.append(Outcome(budget, passed=False, ratio=None, message=message))
            continue
        found = ratio(candidate.summary, baseline.summary)
        # The kindest pairing of runs: the candidate's best against the baseline's worst. A
        # budget fails only when even that misses it, so run-to-run noise (+-20 % and more on
        # a shared machine) cannot fail a run; a stack that is broken can.
        best = candidate.summary.high / baseline.summary.low if baseline.summary.low else found
        problems = []
        if best < budget.min_ratio:
            problems.append(
                f"{found:.3f} x (at best {best:.3f} x across runs) is below the budget "
                f"{budget.min_ratio:.2f} x"
            )
        for config in (candidate, baseline):
            summary = config.summary
            if summary.error_fraction > budgets.max_error_fraction:
                problems.append(
                    f"{config.label}: {summary.errors} errors in {summary.requests} requests"
                )
        if problems:
            message = "; ".join(problems)
        elif found < budget.min_ratio:
            message = (
                f"{found:.3f} x, within noise of the budget {budget.min_ratio:.2f} x "
                f"(at best {best:.3f} x across runs)"
            )
        else:
            message = f"{found:.3f} x (budget {budget.min_ratio:.2f} x)"
        outcomes.append(Outcome(budget, passed=not problems, ratio=found, message=message))
    return outcomes
