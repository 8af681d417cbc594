"""Turn a results file into Markdown: one table per experiment, the budgets, and a warning
when the run was too noisy to read.

Pure functions of `Results` (lab/results.py). The seeds' findings and the worker-count
recommendation belong to the template's experiment grid (scripts/experiments), which reuses
this module for its tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lab.budgets import BudgetSet, check_budgets
from lab.stats import compare, percent_change, ratio

if TYPE_CHECKING:
    from lab.results import ExperimentResult, Results


def _rps(value: float) -> str:
    return f"{value:,.0f}"


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def experiment_table(experiment: ExperimentResult) -> str:
    """The seeds' table shape: requests/s (median, min-max), latency, difference to baseline."""
    baseline = experiment.config(experiment.baseline)
    rows = [
        (
            "| configuration | requests/s (median) | min - max | p50 ms | p99 ms | errors "
            "| vs baseline |"
        ),
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for config in experiment.configs:
        if not config.runs:
            continue
        s = config.summary
        if config.id == experiment.baseline or baseline is None:
            versus = "baseline"
        else:
            b = baseline.summary
            versus = f"{percent_change(s, b):+.1f} % ({ratio(s, b):.2f} x, {compare(s, b).value})"
        rows.append(
            f"| {config.label} | {_rps(s.median)} | {_rps(s.low)} - {_rps(s.high)} "
            f"| {_ms(s.p50_ms)} | {_ms(s.p99_ms)} | {s.errors} | {versus} |"
        )
    return "\n".join(rows)


# Above this spread (max - min over median) a configuration's runs disagree too much to trust.
NOISY_SPREAD = 0.2


def spread_warning(results: Results) -> str | None:
    """A warning when some configuration's runs varied widely (a busy or throttled machine)."""
    spreads = [
        ((s.high - s.low) / s.median, f"{e.id} / {c.label}")
        for e in results.experiments
        for c in e.configs
        if c.runs and (s := c.summary).median > 0
    ]
    if not spreads:
        return None
    worst, where = max(spreads)
    if worst <= NOISY_SPREAD:
        return None
    return (
        f"- Runs of one configuration varied by up to {worst:.0%} ({where}): the machine was "
        "busy or throttling. Differences marked *within noise* are not findings; re-run on "
        "an idle machine before changing a setting."
    )


def advice(results: Results) -> list[str]:
    """Warnings about this run, as Markdown bullet lines."""
    warning = spread_warning(results)
    return [warning] if warning else []


def budgets_table(results: Results, budgets: BudgetSet) -> str:
    rows = ["| budget | ratio here | minimum | result |", "|---|---:|---:|---|"]
    for outcome in check_budgets(results, budgets):
        found = "-" if outcome.ratio is None else f"{outcome.ratio:.3f} x"
        if outcome.ratio is None:
            result = "not measured in this run"
        else:
            result = "pass" if outcome.passed else f"FAIL: {outcome.message}"
            if outcome.passed and outcome.ratio < outcome.budget.min_ratio:
                result = "pass, within noise: " + outcome.message.partition("(")[2].rstrip(")")
        rows.append(
            f"| {outcome.budget.name} | {found} | {outcome.budget.min_ratio:.2f} x | {result} |"
        )
    return "\n".join(rows)


def markdown(results: Results, budgets: BudgetSet, chart: str | None) -> str:
    """The whole report: what ran, one section per experiment, budgets, findings, advice."""
    m, s = results.machine, results.settings
    versions = ", ".join(f"{name} {version}" for name, version in m["versions"].items())
    parts = [
        "# Benchmark results",
        "",
        (
            f"Produced by `{results.command}` ({results.mode} mode) from {results.started} to "
            f"{results.finished}, on {m['cpus']} CPUs ({m['platform']}), with {versions}."
        ),
        "",
        (
            f"Each configuration ran {s['runs']} times, interleaved with the others of its "
            f"experiment so machine drift hits all alike: {s['warmup_s']} s of warm-up, then "
            f"{s['duration_s']} s measured, by wrk with {s['wrk_threads']} thread and "
            f"{s['connections']} keep-alive connections, on 127.0.0.1. Medians of the runs, "
            "min - max across runs; p50/p99 latency are medians of the runs' percentiles. "
            "Errors are responses with status >= 400 plus socket errors. A difference counts only "
            "when the two min - max ranges do not overlap; otherwise it is *within noise*."
        ),
        "",
        (
            "Re-measure: `./scripts/bench PROJECT_DIR` from the template's checkout (about 4 "
            "minutes on 2 CPUs, 6 with the items experiment; `--quick` for 1-second runs, about "
            "a minute); it needs wrk, nginx and valgrind (`apt-get install wrk nginx-light "
            "valgrind`), the chart matplotlib in the project's environment. Throughput budgets "
            "are floors that only a broken stack misses (short runs on a shared machine move "
            "by +-20 %); the cost gate counts the middleware's instructions, which a busy "
            "machine cannot move."
        ),
        "",
    ]
    if chart:
        parts += [f"![benchmark chart]({chart})", ""]
    for number, experiment in enumerate(results.experiments, start=1):
        parts += [
            f"## {number}. {experiment.title}",
            "",
            experiment.question,
            "",
            experiment_table(experiment),
            "",
        ]
    parts += [
        "## Throughput budgets (lab/budgets.toml)",
        "",
        budgets_table(results, budgets),
        "",
    ]
    notes = advice(results)
    if notes:
        parts += ["## Notes on this run", "", *notes, ""]
    return "\n".join(parts)
