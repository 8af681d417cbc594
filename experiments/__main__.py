"""Run the template's experiment grid against a baked project and write its report.

    python -m experiments --project BAKE [--quick] [--only EXPERIMENT ...] [--out DIR]
    python -m experiments --project BAKE --cpu-share [--quick] [--out DIR]
    python -m experiments --project BAKE --floors [--out DIR]

Run through `scripts/experiments`, which bakes the default project, installs it and puts the
template's root (experiments/, lab/) and the bake's src/ on PYTHONPATH. Writes
DIR/experiments.json, DIR/experiments.md (every table, the seeds' findings, a
recommendation) and, with matplotlib, DIR/experiments.png.
The findings table is the template README's "Re-measured" table.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from experiments.package import VARIABLE
from lab.project import FACTORY_VARIABLE, discover


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__)
    parser.add_argument("--project", type=Path, required=True, help="a baked project")
    parser.add_argument("--quick", action="store_true", help="short runs, fewer configurations")
    parser.add_argument("--only", nargs="+", metavar="EXPERIMENT", help="only these experiments")
    parser.add_argument("--out", type=Path, default=Path("build/experiments"), help="[%(default)s]")
    parser.add_argument(
        "--cpu-share",
        action="store_true",
        help="instead of the grid: CPU time per request of gunicorn, nginx and wrk",
    )
    parser.add_argument(
        "--floors",
        action="store_true",
        help="instead of the grid: the least each middleware job can cost, in instructions",
    )
    args = parser.parse_args(argv)
    project = discover(args.project)
    # Before the experiments' modules are imported: the servers inherit this environment.
    os.environ[VARIABLE] = project.package
    os.environ[FACTORY_VARIABLE] = project.need_factory()
    from lab.results import draw_chart, publish

    if args.cpu_share:
        from experiments.cpu_share import cpu_share

        publish(args.out, "cpu-share", cpu_share(project, seconds=2 if args.quick else 8) + "\n")
        return 0

    if args.floors:
        from experiments.floors import floors

        publish(args.out, "floors", floors(project) + "\n")
        return 0

    from experiments.findings import findings_table, recommendation
    from experiments.grid import grid
    from lab.budgets import load_budgets
    from lab.experiments import select
    from lab.report import markdown
    from lab.runner import FULL, QUICK, run_experiments
    from lab.servers import shipped_worker_count

    workers = shipped_worker_count(project)
    chosen = grid(len(os.sched_getaffinity(0)), workers, package=project.package)
    try:
        chosen = select(chosen, args.only, quick=args.quick)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    results = run_experiments(
        project,
        chosen,
        QUICK if args.quick else FULL,
        mode="quick" if args.quick else "partial" if args.only else "full",
        command=shlex.join(["scripts/experiments", *argv[2:]]),
        default_workers=workers,
    )
    out: Path = args.out
    chart = draw_chart(results, out / "experiments.png")
    report = markdown(results, load_budgets(), chart)
    report = report.replace("# Benchmark results", "# The template's experiment grid", 1)
    findings = findings_table(results)
    if findings:
        report += "\n## The seeds' findings on this machine\n\n" + findings + "\n"
    advice = recommendation(results)
    if advice:
        report += "\n## Recommendation for this machine\n\n" + "\n".join(advice) + "\n"
    publish(out, "experiments", report, results.to_json())
    print(f"wrote {out / 'experiments.json'}, {out / 'experiments.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
