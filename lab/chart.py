"""Draw the results as one PNG: one panel per experiment, bars with min-max whiskers, and the
worker count as a line.

Needs matplotlib in the measured project's environment, optional (`pip install matplotlib`):
the CLI imports this module only when matplotlib is importable and says so otherwise.
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

# The object API, not pyplot: no GUI backend is chosen, nothing global is touched.
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.axes import Axes

    from lab.results import ExperimentResult, Results

BASELINE_COLOUR = "#8c8c8c"
COLOUR = "#2a6fb0"


def _bars(axes: Axes, experiment: ExperimentResult) -> None:
    configs = [c for c in experiment.configs if c.runs]
    summaries = [c.summary for c in configs]
    positions = range(len(configs))
    axes.barh(
        positions,
        [s.median for s in summaries],
        xerr=[[s.median - s.low for s in summaries], [s.high - s.median for s in summaries]],
        color=[BASELINE_COLOUR if c.id == experiment.baseline else COLOUR for c in configs],
        capsize=3,
    )
    axes.set_yticks(list(positions), [c.label for c in configs], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("requests/s (median, min-max)")


def _line(axes: Axes, experiment: ExperimentResult, at: int) -> None:
    points = sorted(
        (experiment.x_values[c.id], c.summary)
        for c in experiment.configs
        if c.id in experiment.x_values and c.runs
    )
    xs = [x for x, _ in points]
    axes.plot(xs, [s.median for _, s in points], marker="o", color=COLOUR, label="workers")
    axes.fill_between(
        xs, [s.low for _, s in points], [s.high for _, s in points], color=COLOUR, alpha=0.2
    )
    for config in experiment.configs:
        if config.id in experiment.x_values or not config.runs:
            continue
        # A single data point (threads) drawn at its worker count, over the line.
        s = config.summary
        axes.errorbar(
            [at],
            [s.median],
            yerr=[[s.median - s.low], [s.high - s.median]],
            fmt="s",
            color="#d9822b",
            capsize=3,
            label=config.label,
        )
    axes.set_xticks(xs)
    axes.set_xlabel("gunicorn workers")
    axes.set_ylabel("requests/s")
    axes.legend(fontsize=8)


def draw(results: Results, path: Path) -> None:
    """Write the chart of results to path (PNG)."""
    experiments = [e for e in results.experiments if any(c.runs for c in e.configs)]
    columns = 2 if len(experiments) > 1 else 1
    rows = math.ceil(len(experiments) / columns)
    figure = Figure(figsize=(7 * columns, 3.2 * rows))
    grid = figure.subplots(rows, columns, squeeze=False)
    for axes, experiment in zip(grid.flat, experiments, strict=False):
        if experiment.line:
            _line(axes, experiment, int(results.settings["default_workers"]))
        else:
            _bars(axes, experiment)
        axes.set_title(textwrap.fill(experiment.title, 60), fontsize=9)
        axes.grid(axis="x" if not experiment.line else "y", alpha=0.3)
    for axes in list(grid.flat)[len(experiments) :]:
        axes.set_visible(False)
    figure.suptitle(
        f"{results.mode} run, {results.machine['cpus']} CPUs, {results.started}", fontsize=10
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
