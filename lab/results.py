"""The results file: every run of every configuration, with what is needed to judge them.

Written by `./scripts/bench` as benchmark.json, read back for the report, so the tables, the
chart and the budget check always come from one and the same run. Only raw runs
are stored; summaries are recomputed (lab/stats.py) when read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lab.stats import Summary, summarize
from lab.wrk import WrkResult

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = 1


@dataclass
class ConfigResult:
    id: str
    label: str
    runs: list[WrkResult] = field(default_factory=list)

    @property
    def summary(self) -> Summary:
        return summarize(self.runs)


@dataclass
class ExperimentResult:
    id: str
    title: str
    question: str
    baseline: str
    configs: list[ConfigResult]
    line: bool = False
    x_values: dict[str, int] = field(default_factory=dict)

    def config(self, config_id: str) -> ConfigResult | None:
        return next((c for c in self.configs if c.id == config_id and c.runs), None)


@dataclass
class Results:
    mode: str  # "quick", "full", or "partial" (--only)
    command: str  # what a person types to get the same run
    started: str  # UTC, ISO 8601
    finished: str
    machine: dict[str, Any]  # CPUs, OS, versions of the measured software
    settings: dict[str, Any]  # runs, durations, connections
    experiments: list[ExperimentResult]

    def experiment(self, experiment_id: str) -> ExperimentResult | None:
        return next((e for e in self.experiments if e.id == experiment_id), None)

    def to_json(self) -> str:
        data = {
            "schema": SCHEMA,
            "mode": self.mode,
            "command": self.command,
            "started": self.started,
            "finished": self.finished,
            "machine": self.machine,
            "settings": self.settings,
            "experiments": [
                {
                    "id": e.id,
                    "title": e.title,
                    "question": e.question,
                    "baseline": e.baseline,
                    "line": e.line,
                    "x_values": e.x_values,
                    "configs": [
                        {"id": c.id, "label": c.label, "runs": [r.as_dict() for r in c.runs]}
                        for c in e.configs
                    ],
                }
                for e in self.experiments
            ],
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Results:
        data = json.loads(text)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"results schema {data.get('schema')!r}, expected {SCHEMA}")
        return cls(
            mode=data["mode"],
            command=data["command"],
            started=data["started"],
            finished=data["finished"],
            machine=data["machine"],
            settings=data["settings"],
            experiments=[
                ExperimentResult(
                    id=e["id"],
                    title=e["title"],
                    question=e["question"],
                    baseline=e["baseline"],
                    line=e["line"],
                    x_values=e["x_values"],
                    configs=[
                        ConfigResult(c["id"], c["label"], [WrkResult(**r) for r in c["runs"]])
                        for c in e["configs"]
                    ],
                )
                for e in data["experiments"]
            ],
        )

    @classmethod
    def read(cls, path: Path) -> Results:
        return cls.from_json(path.read_text(encoding="utf-8"))


def draw_chart(results: Results, path: Path) -> str | None:
    """The chart's file name, drawn where matplotlib is installed; None where it is not."""
    try:
        from lab.chart import draw  # noqa: PLC0415 - matplotlib is optional
    except ImportError:
        print("chart skipped: matplotlib is not installed in the project's environment")
        return None
    draw(results, path)
    return path.name


def publish(out: Path, name: str, report: str = "", data: str = "") -> None:
    """Every result of the lab leaves this way: out/NAME.json, the raw data (what is read
    back, as Results.read), and out/NAME.md, the report, which is printed too."""
    out.mkdir(parents=True, exist_ok=True)
    if data:
        (out / f"{name}.json").write_text(data.rstrip("\n") + "\n", encoding="utf-8")
    if report:
        (out / f"{name}.md").write_text(report, encoding="utf-8")
        print(report)
