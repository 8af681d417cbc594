"""jobs=procrastinate: background jobs in the service's PostgreSQL. The jobs bake's own suite
(tests/jobs/ in it) runs real workers against a real PostgreSQL: a killed worker's job runs
again elsewhere, a stop drains then requeues, retries back off and end, a periodic job fires
once per tick across two workers, a job commits with its transaction; here it runs after a
job, a route and a migration are added the documented way. jobs=none bakes carry no trace."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import Bake, bake
from .full_suites import FullSuites

# What jobs=procrastinate adds, as whole files and directories.
JOBS_PATHS = [
    "docs/jobs.md",
    "migrations/procrastinate/schema-3.10.0.sql",
    "migrations/versions/rev_0002_procrastinate_schema.py",
    "src/{package}/jobs/defer.py",
    "src/{package}/worker.py",
    "tests/jobs/test_worker.py",
]
QUEUE_TABLES = {
    "procrastinate_events",
    "procrastinate_jobs",
    "procrastinate_periodic_defers",
    "procrastinate_workers",
}
# Words only the jobs option writes.
JOBS_WORDS = re.compile(r"procrastinate|job_queue|JOBS_|make worker|jobs\.md", re.I)


@pytest.mark.full_suite("jobs")
def test_jobs_bake_passes_its_suite_after_a_documented_job(full_suites: FullSuites) -> None:
    """A route, a migration and a job added the documented way, then `make lint` and the
    whole `make test`, the workers' tests among it, none skipped."""
    results = full_suites.result("jobs")
    for result in results:
        step = result.args[-1]
        assert result.returncode == 0, f"{step}\n{result.stdout[-20000:]}\n{result.stderr}"
    steps = ["documented changes", "lint", "test", "bench jobs"]
    assert [result.args[-1] for result in results] == steps
    test = results[2].stdout
    assert "tests/jobs/test_worker.py" not in "".join(
        line for line in test.splitlines() if line.startswith("SKIPPED")
    )


@pytest.mark.full_suite("jobs")
def test_bench_jobs_gives_every_figure(full_suites: FullSuites) -> None:
    """`./scripts/bench BAKE --jobs` (the README's) measures each of issue 46's figures and
    writes them; what they are is the closing note's and the README's, never asserted here
    (these machines are noisy): that each is a number, and every queue table is reported."""
    bench = full_suites.step("jobs", "bench jobs")
    assert bench.returncode == 0, bench.stdout[-5000:] + bench.stderr[-5000:]
    out = Path(re.findall(r"^results in (.+)$", bench.stdout, flags=re.MULTILINE)[-1])
    figures = json.loads((out / "jobs.json").read_text(encoding="utf-8"))
    for name in ("jobs_per_second", "enqueue_p99_ms", "pickup_p99_ms", "recovery_s"):
        assert isinstance(figures[name], float), name
    assert {row[0] for row in figures["tables"]} == QUEUE_TABLES
    assert "| no-op jobs per second" in (out / "jobs.md").read_text(encoding="utf-8")


def test_bakes_without_jobs_carry_no_trace_of_them(default_bake: Bake, database_bake: Bake) -> None:
    """jobs=none (with or without a database) renders none of it: no file, no word."""
    for result in (default_bake, database_bake):
        project = result.project
        for path in JOBS_PATHS:
            assert not (project / path.format(package=result.package_name)).exists(), path
        found = [
            f"{path.relative_to(project)}: {match.group()}"
            for path in sorted(project.rglob("*"))
            if path.is_file()
            and path.suffix not in {".png", ".json", ".lock"}
            and "stack" not in path.relative_to(project).parts
            for match in JOBS_WORDS.finditer(path.read_text(encoding="utf-8", errors="ignore"))
        ]
        assert found == []


def test_jobs_bake_renders_its_files(tmp_path: Path) -> None:
    """The jobs files are there, and the bake's lock holds procrastinate."""
    result = bake(tmp_path, database="postgresql", jobs="procrastinate")
    assert result.exit_code == 0, result.stderr
    for path in JOBS_PATHS:
        assert (result.project / path.format(package=result.package_name)).is_file(), path
    assert 'name = "procrastinate"' in (result.project / "uv.lock").read_text(encoding="utf-8")
