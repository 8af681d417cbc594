"""Measure a generated project: `./scripts/bench PROJECT_DIR [--quick] [--only ...] [--out DIR]`.

    python -m lab PROJECT_DIR [--quick] [--only EXPERIMENT ...] [--out DIR] [--budgets FILE]

Experiments (all by default; lab/experiments.py):
    middleware  requests/s of the bare app and the default middleware stack (wrk, 1 worker)
    hop         the whole stack (nginx -> unix socket -> gunicorn) against gunicorn directly
    items       the example resource in PostgreSQL, when the project has the database and
                DATABASE_URL names a migrated scratch database (rows are written there)
    cost        the cost gate: instructions per request with valgrind (lab/cost.py)

    python -m lab PROJECT_DIR --peers [--short] [--servers ...] [--conditions ...] [--out DIR]

--peers instead: the stack beside uvicorn, granian and gunicorn serving the same app, raw,
under attack and beside held streams and WebSockets (lab/peers.py); writes DIR/peers.json and
DIR/peers.md.

    python -m lab PROJECT_DIR --side-faults [--out DIR]

--side-faults instead: issue 19's figures through the project's live stack (lab/side_faults.py);
writes DIR/side-faults.md.

    python -m lab PROJECT_DIR --jobs [--out DIR]

--jobs instead: a jobs=procrastinate project's worker and queue on a throwaway PostgreSQL
(lab/jobs.py): jobs per second, enqueue cost, pickup, recovery, drain, memory, table sizes;
writes DIR/jobs.md and DIR/jobs.json.

    python -m lab PROJECT_DIR --rollout --image TAG [--drain SECONDS] [--retries N] [--out DIR]

--rollout instead: the image TAG's containers replaced one by one under load behind HAProxy
set up as the project's docs/deploy.md says (lab/rollout.py): requests, streams and WebSocket
sessions by outcome, the rollout's duration, latency before and during it; writes
DIR/rollout.md and DIR/rollout.json.

Writes DIR/benchmark.json, DIR/benchmark.md, DIR/cost.json and, with matplotlib in the
project's environment, DIR/benchmark.png; prints the tables and one line per check. Exits 1
when a check FAILs (a budget in lab/budgets.toml) or a tool is missing, 2 on a usage error.

Runs in the measured project's Python (scripts/bench picks it): the servers import the
project's packages and lab/apps.py. Needs wrk and nginx for the throughput experiments,
valgrind for the cost gate.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.processes import ServerError
from lab import cost, jobs, peers, rollout, side_faults
from lab.attacks import AttackError
from lab.budgets import check_budgets, load_budgets
from lab.experiments import experiments, select
from lab.haproxy import HAProxyError
from lab.nginx import NginxConfigError, nginx_binary
from lab.project import Project, ProjectError, discover
from lab.report import markdown
from lab.results import draw_chart, publish
from lab.runner import FULL, QUICK, RunSettings, run_experiments
from lab.servers import shipped_worker_count
from lab.wrk import WrkError, find_wrk

if TYPE_CHECKING:
    from types import FrameType

    from lab.experiments import Experiment
    from lab.results import Results

COST = "cost"
THROUGHPUT = ("middleware", "hop", "items")


def _stop_on_term(signum: int, _: FrameType | None) -> None:
    # SystemExit unwinds through the runner's `finally`, which stops every server.
    print("terminated: stopping every server, no results written", file=sys.stderr)
    raise SystemExit(128 + signum)


def _write_report(results: Results, out: Path, counted: cost.Cost | None) -> list[str]:
    """benchmark.json, .png (with matplotlib) and .md in out; the failed budgets' lines."""
    chart = draw_chart(results, out / "benchmark.png")
    budgets = load_budgets()
    report = markdown(results, budgets, chart)
    if counted is not None:
        report += "\n## Instructions per request (the cost gate)\n\n" + cost.table(counted) + "\n"
    publish(out, "benchmark", report, results.to_json())
    failed = []
    for outcome in check_budgets(results, budgets):
        line = f"{'pass' if outcome.passed else 'FAIL'}  {outcome.budget.name}: {outcome.message}"
        print(line)
        if not outcome.passed:
            failed.append(line)
    return failed


def _cost_gate(project: Project, args: argparse.Namespace) -> tuple[cost.Cost, bool]:
    budget = cost.load_budget(args.budgets)
    print(f"counting instructions per request under valgrind (GET {budget.path})", flush=True)
    # Quick: bare and default only; full: each middleware alone too.
    measured = cost.measure(project, path=budget.path, each=not args.quick, served=not args.quick)
    publish(args.out, "cost", data=measured.to_json())
    print(cost.table(measured))
    passed, line = cost.check(measured, budget)
    print(f"{'pass' if passed else 'FAIL'}  {line}")
    if not passed:
        print(f"      why this budget: {budget.why}")
    return measured, passed


def _settings(args: argparse.Namespace) -> RunSettings:
    base = QUICK if args.quick else FULL
    return RunSettings(
        runs=args.runs or base.runs,
        warmup_s=args.warmup if args.warmup is not None else base.warmup_s,
        duration_s=args.duration or base.duration_s,
        connections=args.connections or base.connections,
    )


def run_peers(project: Project, args: argparse.Namespace, argv: list[str]) -> int:
    """The peers experiment (lab/peers.py); its report printed and written to args.out."""
    settings = peers.SHORT if args.short else peers.FULL
    if args.runs:
        settings = replace(settings, rounds=args.runs)
    if args.duration:
        settings = replace(settings, duration_s=args.duration)
    servers = peers.choose_servers(args.servers)
    conditions = peers.choose_conditions(args.conditions, short=args.short)
    granian = None
    if any(server.kind == "granian" for server in servers):
        granian = peers.ensure_granian(Path(__file__).resolve().parent.parent)
    signal.signal(signal.SIGTERM, _stop_on_term)
    results = peers.run_peers(
        project,
        servers=servers,
        conditions=conditions,
        settings=settings,
        workers=shipped_worker_count(project),
        granian=granian,
        command=peers.command_line(project, argv[1:]),
    )
    publish(args.out, "peers", peers.markdown(results), json.dumps(results, indent=1))
    print(f"results in {args.out}")
    verdict = peers.check_held_memory(results, peers.load_held_budget(args.budgets))
    if verdict is None or args.short:  # too few held connections for a figure each
        return 0
    passed, line = verdict
    print(f"{'pass' if passed else 'FAIL'}  {line}")
    return 0 if passed else 1


def run_report(project: Project, args: argparse.Namespace, argv: list[str]) -> bool:
    """--jobs, --rollout or --side-faults, each one report written to args.out; whether one of
    them was asked for."""
    chosen = {"jobs": args.jobs, "rollout": args.rollout, "side-faults": args.side_faults}
    name = next((name for name, asked in chosen.items() if asked), None)
    if name is None:
        return False
    signal.signal(signal.SIGTERM, _stop_on_term)
    if name == "jobs":
        publish(args.out, name, *jobs.report(project))
    elif name == "rollout":
        command = shlex.join(["./scripts/bench", project.root.name, *argv[1:]])
        publish(args.out, name, *rollout.report(project, args, command))
    else:
        publish(args.out, name, side_faults.report(project))
    print(f"results in {args.out}")
    return True


def run(args: argparse.Namespace, argv: list[str]) -> int:
    project = discover(args.project)
    # The project's own .env and relative settings, as `make serve` reads them there.
    os.chdir(project.root)
    if args.peers:
        return run_peers(project, args, argv)
    if run_report(project, args, argv):
        return 0
    only = set(args.only or (*THROUGHPUT, COST))
    unknown = only - {*THROUGHPUT, COST}
    if unknown:
        print(f"error: unknown experiment(s) {sorted(unknown)}", file=sys.stderr)
        return 2
    settings = _settings(args)
    if settings.runs < 3:
        print("error: at least 3 runs per configuration (median and range)", file=sys.stderr)
        return 2
    print(f"measuring {project.root.name}: app {project.app_module}, stack {project.stack}")
    failed: list[str] = []
    counted = None
    chosen: list[Experiment] = []
    workers = 0
    if COST in only:
        counted, passed = _cost_gate(project, args)
        if not passed:
            failed.append("cost gate")
    wanted = only & set(THROUGHPUT)
    if wanted:
        find_wrk()
        nginx_binary()  # fail now with the install command, not after minutes of runs
        item_id = None
        if project.database:
            # The app needs its database to start at all: check it now, not after a server
            # fails. Imported only here: SQLAlchemy is in such a project's environment only.
            from lab.database import prepare  # noqa: PLC0415

            item_id = prepare(project.package)
        workers = shipped_worker_count(project)
        chosen = experiments(
            len(os.sched_getaffinity(0)), workers, package=project.package, item_id=item_id
        )
        available = {experiment.id for experiment in chosen}
        if args.only and "items" in wanted and "items" not in available:
            print("items skipped: the project has no database (database=postgresql)")
        chosen = select(chosen, wanted & available, quick=args.quick) if wanted & available else []
    if chosen:
        signal.signal(signal.SIGTERM, _stop_on_term)
        results = run_experiments(
            project,
            chosen,
            settings,
            mode="quick" if args.quick else "partial" if args.only else "full",
            command=shlex.join(["./scripts/bench", project.root.name, *argv[1:]]),
            default_workers=workers,
        )
        failed += _write_report(results, args.out, counted)
    print(f"results in {args.out}" if not failed else f"{len(failed)} check(s) FAILED")
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="./scripts/bench", description=__doc__.splitlines()[0])
    top.add_argument("project", type=Path, help="a generated project's directory")
    top.add_argument(
        "--quick", action="store_true", help="the budgets' configurations only, 1-second runs"
    )
    top.add_argument(
        "--only",
        nargs="+",
        metavar="EXPERIMENT",
        help=f"run only these: {', '.join((*THROUGHPUT, COST))}",
    )
    top.add_argument("--out", type=Path, default=Path("build/bench"), help="[%(default)s]")
    top.add_argument("--budgets", type=Path, default=cost.BUDGETS_FILE, help=argparse.SUPPRESS)
    top.add_argument("--runs", type=int, help="runs per configuration [3]")
    top.add_argument("--duration", type=int, help="seconds per measured run [quick 1, full 8]")
    top.add_argument("--warmup", type=int, help="seconds of warm-up per run [quick 1, full 2]")
    top.add_argument("--connections", type=int, help="wrk keep-alive connections [64]")
    top.add_argument(
        "--peers",
        action="store_true",
        help="instead: the stack beside uvicorn, granian and gunicorn, raw, attacked, held",
    )
    top.add_argument("--short", action="store_true", help="--peers in a few seconds per server")
    top.add_argument(
        "--side-faults",
        action="store_true",
        help="instead: issue 19's body CPU, metrics listener and metrics directory figures",
    )
    top.add_argument(
        "--jobs",
        action="store_true",
        help="instead: a jobs=procrastinate project's worker and queue figures (issue 46)",
    )
    top.add_argument(
        "--rollout",
        action="store_true",
        help="instead: --image's containers replaced under load behind HAProxy (issue 47)",
    )
    top.add_argument("--image", help="--rollout: the image to roll out (in podman's store)")
    top.add_argument(
        "--drain",
        type=float,
        help="--rollout: DRAIN_SECONDS for every container, 0: none [the image's default]",
    )
    top.add_argument("--retries", type=int, help="--rollout: HAProxy's retries [docs/deploy.md's]")
    top.add_argument(
        "--servers", nargs="+", metavar="SERVER", help="--peers: these servers and stack variants"
    )
    top.add_argument(
        "--conditions", nargs="+", metavar="CONDITION", help="--peers: these endpoints and attacks"
    )
    return top


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # Before run() moves into the project directory.
    args.out, args.budgets = args.out.resolve(), args.budgets.resolve()
    try:
        return run(args, argv)
    # ProjectError includes lab/database.py's DatabaseError.
    except (
        ProjectError,
        WrkError,
        ServerError,
        NginxConfigError,
        cost.CostError,
        peers.PeersError,
        AttackError,
        HAProxyError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # The runner's `finally` has already stopped every server by the time we get here.
        print("interrupted: every server was stopped, no results written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
