"""Run experiments: start their servers, run wrk on each configuration in interleaved rounds,
report progress with the time left, and collect a `Results`.

Interleaving: round r runs the configurations of an experiment in order rotated by r
(A B C, B C A, C A B), so slow drift of the machine (heat, other load) and any position
effect hit every configuration alike instead of one. Each measured run follows a short
warm-up run against the same URL, whose figures are thrown away (connections established,
code paths warm, CPU frequency up).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.processes import Processes
from lab.nginx import nginx_binary
from lab.results import ConfigResult, ExperimentResult, Results
from lab.servers import Launcher
from lab.wrk import WrkResult, find_wrk, run_wrk

if TYPE_CHECKING:
    from lab.experiments import Experiment
    from lab.project import Project

# Rough costs before anything is measured, for the first time-left estimate.
RUN_OVERHEAD_S = 0.3
STACK_START_S = 3.0


@dataclass(frozen=True)
class RunSettings:
    runs: int  # per configuration, at least 3 for a median with a range
    warmup_s: int
    duration_s: int
    connections: int  # wrk's keep-alive connections
    wrk_threads: int = 1  # one is plenty below ~50k req/s and leaves a CPU to the servers


# Quick: 6 configurations x 3 runs of 1 + 1 s, and 4 stacks to start: about a minute.
QUICK = RunSettings(runs=3, warmup_s=1, duration_s=1, connections=64)
FULL = RunSettings(runs=3, warmup_s=2, duration_s=8, connections=64)


def planned_seconds(experiments: list[Experiment], settings: RunSettings) -> float:
    runs = sum(len(e.configs) for e in experiments) * settings.runs
    stacks = sum(len({c.stack for c in e.configs}) for e in experiments)
    return (
        runs * (settings.warmup_s + settings.duration_s + RUN_OVERHEAD_S) + stacks * STACK_START_S
    )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"


class Progress:
    """One line per measured run: position, elapsed, estimated time left, the figures."""

    def __init__(
        self, experiments: list[Experiment], settings: RunSettings, stream: TextIO
    ) -> None:
        self.stream = stream
        self.run_s = settings.warmup_s + settings.duration_s + RUN_OVERHEAD_S
        self.total_runs = sum(len(e.configs) for e in experiments) * settings.runs
        self.stacks_left = sum(len({c.stack for c in e.configs}) for e in experiments)
        self.done_runs = 0
        self.run_time = 0.0
        self.stack_time = 0.0
        self.stacks_done = 0
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def stack_started(self, seconds: float) -> None:
        self.stacks_done += 1
        self.stacks_left -= 1
        self.stack_time += seconds

    def left_s(self) -> float:
        per_run = self.run_time / self.done_runs if self.done_runs else self.run_s
        per_stack = self.stack_time / self.stacks_done if self.stacks_done else STACK_START_S
        return (self.total_runs - self.done_runs) * per_run + self.stacks_left * per_stack

    def run_done(self, what: str, seconds: float, result: WrkResult) -> None:
        self.done_runs += 1
        self.run_time += seconds
        errors = f", {result.errors} errors" if result.errors else ""
        self.say(
            f"[{self.done_runs:>3}/{self.total_runs}  {_clock(time.monotonic() - self.started)}"
            f" elapsed, ~{_clock(self.left_s())} left]  {what}: "
            f"{result.requests_per_s:,.0f} req/s, p99 {result.p99_ms:.1f} ms{errors}"
        )


def _version(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=10)
    except OSError:
        return "missing"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


PACKAGES = ("fastapi", "starlette", "pydantic", "uvicorn", "uvicorn-worker", "gunicorn")


def machine_facts(packages: tuple[str, ...] = PACKAGES) -> dict[str, object]:
    """The CPUs, the platform and the versions of packages, Python, nginx and wrk."""
    versions = {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "missing"
    versions["Python"] = platform.python_version()
    versions["nginx"] = _version([nginx_binary(), "-v"]).rpartition("/")[2]
    versions["wrk"] = _version([find_wrk(), "-v"]).split()[1]
    return {
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "platform": platform.platform(terse=True),
        "versions": versions,
    }


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_experiments(  # noqa: PLR0913 - keyword-only, each named at the one call site
    project: Project,
    experiments: list[Experiment],
    settings: RunSettings,
    *,
    mode: str,
    command: str,
    default_workers: int,
    stream: TextIO = sys.stderr,
) -> Results:
    """Measure every configuration of every experiment; servers are stopped before returning."""
    wrk = find_wrk()
    progress = Progress(experiments, settings, stream)
    progress.say(
        f"benchmark ({mode}): {len(experiments)} experiments, {progress.total_runs} runs of "
        f"{settings.duration_s} s after {settings.warmup_s} s warm-up; about "
        f"{_clock(planned_seconds(experiments, settings))} in all"
    )
    started = _now()
    measured: list[ExperimentResult] = []
    processes = Processes()
    with tempfile.TemporaryDirectory(prefix="bench-") as workdir:
        # nginx's workers (another user when started as root) must reach the sockets inside.
        Path(workdir).chmod(0o755)
        launcher = Launcher(project, Path(workdir), processes)
        try:
            measured.extend(
                _run_experiment(experiment, settings, launcher, progress, wrk)
                for experiment in experiments
            )
        finally:
            processes.stop_all()
    return Results(
        mode=mode,
        command=command,
        started=started,
        finished=_now(),
        machine=machine_facts(),
        settings={**asdict(settings), "default_workers": default_workers},
        experiments=measured,
    )


def _run_experiment(
    experiment: Experiment,
    settings: RunSettings,
    launcher: Launcher,
    progress: Progress,
    wrk: str,
) -> ExperimentResult:
    progress.say(f"== {experiment.id}: {experiment.title}")
    urls = {}
    try:
        for stack in dict.fromkeys(c.stack for c in experiment.configs):
            began = time.monotonic()
            # Ready means the configurations' first path answers 200 through the whole stack.
            path = next(c.path for c in experiment.configs if c.stack == stack)
            urls[stack] = launcher.start(stack, path)
            progress.stack_started(time.monotonic() - began)
        results = {c.id: ConfigResult(c.id, c.label) for c in experiment.configs}
        configs = list(experiment.configs)
        for round_index in range(settings.runs):
            shift = round_index % len(configs)
            for config in configs[shift:] + configs[:shift]:
                url = urls[config.stack] + config.path
                began = time.monotonic()
                run_wrk(
                    wrk,
                    url,
                    duration_s=settings.warmup_s,
                    connections=settings.connections,
                    script=config.script,
                )
                result = run_wrk(
                    wrk,
                    url,
                    duration_s=settings.duration_s,
                    connections=settings.connections,
                    threads=settings.wrk_threads,
                    script=config.script,
                )
                results[config.id].runs.append(result)
                progress.run_done(
                    f"{experiment.id} / {config.label} (run {round_index + 1}/{settings.runs})",
                    time.monotonic() - began,
                    result,
                )
    finally:
        launcher.processes.stop_all()
    return ExperimentResult(
        id=experiment.id,
        title=experiment.title,
        question=experiment.question,
        baseline=experiment.baseline,
        configs=list(results.values()),
        line=experiment.line,
        x_values=experiment.x_values,
    )
