"""Command line of the benchmark: `python -m bench run|check|report` from the project root.

    python -m bench run [--quick] [--only EXPERIMENT ...] [--out DIR]
        measure; write DIR/benchmark.json, DIR/benchmark.md and (with matplotlib)
        DIR/benchmark.png; print the tables. `make bench` / `make bench-quick`.
    python -m bench check [--factory MODULE:FUNCTION] [--out DIR] [--no-breakdown]
        count instructions per request with valgrind (bench/cost.py): bare app, each
        middleware, default stack; write DIR/cost.json; exit 1 when the default stack
        exceeds its budget in bench/budgets.toml. `make bench-check`, blocking in CI.
    python -m bench report [RESULTS] [--out DIR]
        redraw the tables and the chart from a results file, without measuring.

`run` needs wrk (`apt-get install wrk`) and nginx (`apt-get install nginx-light`) on PATH
or in /usr/sbin{% if cookiecutter.database == "postgresql" %}, and DATABASE_URL naming a migrated scratch database
(`DATABASE_URL=... make migrate bench`: the app needs it, the items experiment writes rows
there){% endif %}; `check` needs valgrind (`apt-get install valgrind`); both need the
project's dependencies in the running Python. The chart needs matplotlib
(`pip install --group bench`).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench import cost
from bench.budgets import load_budgets
{%- if cookiecutter.database == "postgresql" %}
from bench.database import DatabaseError, prepare
{%- endif %}
from bench.drive import DEFAULT_FACTORY
from bench.experiments import experiments, select
from bench.nginx import NginxConfigError, nginx_binary
from bench.report import markdown
from bench.results import Results
from bench.runner import FULL, QUICK, RunSettings, run_experiments
from bench.servers import ServerError, shipped_worker_count
from bench.wrk import WrkError, find_wrk

if TYPE_CHECKING:
    from types import FrameType

PROJECT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = Path("build/bench")
RESULTS_NAME = "benchmark.json"


def _write_outputs(results: Results, out: Path) -> Path:
    """benchmark.json, benchmark.png (when matplotlib is there) and benchmark.md in out."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_NAME
    results.write(path)
    chart: str | None = "benchmark.png"
    try:
        from bench.chart import draw  # noqa: PLC0415 - matplotlib is optional
    except ImportError:
        print("chart skipped: matplotlib is not installed (pip install --group bench)")
        chart = None
    else:
        draw(results, out / "benchmark.png")
    report = markdown(results, load_budgets(), chart)
    counted = out / "cost.json"
    if counted.is_file():
        # `make bench-check` wrote it into the same directory: show the gate's figures too.
        report += (
            "\n## Instructions per request (`make bench-check`, the gate)\n\n"
            + cost.table(cost.Cost.from_json(counted.read_text(encoding="utf-8")))
            + "\n"
        )
    (out / "benchmark.md").write_text(report, encoding="utf-8")
    print(report)
    print(f"wrote {path}, {out / 'benchmark.md'}" + (f", {out / chart}" if chart else ""))
    return path


def _stop_on_term(signum: int, _: FrameType | None) -> None:
    # SystemExit unwinds through the runner's `finally`, which stops every server.
    print("terminated: stopping every server, no results written", file=sys.stderr)
    raise SystemExit(128 + signum)


def cmd_run(args: argparse.Namespace, argv: list[str]) -> int:
    base = QUICK if args.quick else FULL
    settings = RunSettings(
        runs=args.runs or base.runs,
        warmup_s=args.warmup if args.warmup is not None else base.warmup_s,
        duration_s=args.duration or base.duration_s,
        connections=args.connections or base.connections,
    )
    if settings.runs < 3:
        print("error: at least 3 runs per configuration (median and range)", file=sys.stderr)
        return 2
    find_wrk()
    nginx_binary(PROJECT)  # fail now with the install command, not after minutes of runs
    cpus, workers = _cpus(), shipped_worker_count(PROJECT)
{%- if cookiecutter.database == "postgresql" %}
    # Every experiment's app needs its database: check it now, not after a server fails.
    chosen = experiments(cpus, workers, item_id=prepare())
{%- else %}
    chosen = experiments(cpus, workers)
{%- endif %}
    try:
        chosen = select(chosen, args.only, quick=args.quick)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _stop_on_term)
    results = run_experiments(
        PROJECT,
        chosen,
        settings,
        mode="quick" if args.quick else "partial" if args.only else "full",
        command=shlex.join(["python", "-m", "bench", *argv]),
        default_workers=workers,
    )
    _write_outputs(results, args.out)
    return 0


def _cpus() -> int:
    import os  # noqa: PLC0415

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cmd_check(args: argparse.Namespace) -> int:
    budget = cost.load_budget(args.budgets)
    print(f"counting instructions per request under valgrind ({args.factory}, GET {budget.path})")
    measured = cost.measure(
        PROJECT, factory=args.factory, path=budget.path, each=not args.no_breakdown
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cost.json").write_text(measured.to_json() + "\n", encoding="utf-8")
    print(cost.table(measured))
    passed, line = cost.check(measured, budget)
    print(f"{'pass' if passed else 'FAIL'}  {line}")
    if not passed:
        print(f"      why this budget: {budget.why}")
    return 0 if passed else 1


def cmd_report(args: argparse.Namespace) -> int:
    results = Results.read(args.results)
    _write_outputs(results, args.out or args.results.parent)
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="measure and write the results, tables and chart")
    run.add_argument(
        "--quick", action="store_true", help="the budgets' configurations only, short runs (< 60 s)"
    )
    run.add_argument("--only", nargs="+", metavar="EXPERIMENT", help="run only these experiments")
    run.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory [{DEFAULT_OUT}]"
    )
    run.add_argument("--runs", type=int, help="runs per configuration [3]")
    run.add_argument("--duration", type=int, help="seconds per measured run [quick 2, full 8]")
    run.add_argument(
        "--warmup", type=int, help="seconds of warm-up before each run [quick 1, full 2]"
    )
    run.add_argument("--connections", type=int, help="wrk keep-alive connections [64]")
    check = sub.add_parser(
        "check", help="count instructions per request; exit 1 when the stack is over budget"
    )
    check.add_argument("--factory", default=DEFAULT_FACTORY, help="the app factory [%(default)s]")
    check.add_argument("--budgets", type=Path, default=cost.BUDGETS_FILE)
    check.add_argument(
        "--no-breakdown",
        action="store_true",
        help="count only the bare app and the default stack, not each middleware (faster)",
    )
    check.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"where cost.json goes [{DEFAULT_OUT}]"
    )
    report = sub.add_parser("report", help="redraw tables and chart from a results file")
    report.add_argument("results", type=Path, nargs="?", default=DEFAULT_OUT / RESULTS_NAME)
    report.add_argument("--out", type=Path)
    return top


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args, argv)
        if args.command == "check":
            return cmd_check(args)
        return cmd_report(args)
{%- if cookiecutter.database == "postgresql" %}
    except (WrkError, ServerError, NginxConfigError, cost.CostError, DatabaseError) as exc:
{%- else %}
    except (WrkError, ServerError, NginxConfigError, cost.CostError) as exc:
{%- endif %}
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # The runner's `finally` has already stopped every server by the time we get here.
        print("interrupted: every server was stopped, no results written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
