"""The template's lab (lab/, ./scripts/bench) against bakes: the cost gate blocks the template's CI.

`./scripts/bench DIR --only cost`: instructions per request under valgrind, exit 1 over
lab/budgets.toml. `./scripts/bench DIR --quick`: throughput ratios from real gunicorn, nginx
and wrk on 127.0.0.1, judged against floors. The lab's own unit tests (lab/tests) run in the
default bake's environment. scripts/test installs wrk, nginx-light and valgrind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import (
    BENCH_SCRIPT,
    TEMPLATE_DIR,
    Bake,
    ProjectEnv,
    bake,
    bench,
    lab_environ,
    lab_output,
    leftover_processes,
    run_captured,
)
from .full_suites import FullSuites

# What the cost gate must reproduce between two runs of the same command, at any load. A count
# depends on the measured process's memory layout (objects hash by address), which moves a
# little between runs and more with what the process builds before it forks: a full run
# against a --quick one was 0.1-0.3 % apart here, 0.52 % in the CI run that failed on that.
# Six full runs of one bake, one beside three CPU hogs: counts within 0.16 %, the judged ratio
# within 0.06 % (docs/performance.md); a later CI run put the judged ratio 0.24 % apart
# (1.1711 then 1.1683), so the ratio is held to what a count is held to: half a per cent,
# about two thirds of the default bake's margin under its budget (1.171 x against 1.18 x).
# A layout that costs a request more costs the bare app alike.
REPEAT_TOLERANCE = 0.005
RATIO_REPEAT_TOLERANCE = 0.005


@pytest.fixture
def quiet_machine(full_suites: FullSuites) -> None:
    """The generated projects' full suites, which run in the background, have finished:
    nothing of theirs runs beside a measurement (tests/full_suites.py)."""
    full_suites.wait_all()


@pytest.mark.slow
def test_the_lab_passes_ruff_and_mypy_strict(default_bake: Bake, project_env: ProjectEnv) -> None:
    """lab/, experiments/ and the harness the lab runs on pass the generated project's ruff
    rules (lab/ruff.toml) and mypy --strict, type-checked against the default bake's packages."""
    ruff = TEMPLATE_DIR / ".venv" / "bin" / "ruff"
    for command in (("check",), ("format", "--check")):
        argv = [str(ruff), *command, "lab", "experiments", "harness"]
        done = run_captured(argv, cwd=TEMPLATE_DIR)
        assert done.returncode == 0, done.stdout + done.stderr
    project = default_bake.project
    env = lab_environ(project_env, project)
    mypy = [str(project_env.venv / "bin" / "mypy"), "--config-file", "lab/mypy.ini"]
    done = run_captured([*mypy, "lab", "experiments", "harness"], cwd=TEMPLATE_DIR, env=env)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.full_suite("lab")
def test_the_labs_own_tests_pass_against_the_default_bake(full_suites: FullSuites) -> None:
    """lab/tests (budgets, report, wrk parsing, nginx variants of the bake's own nginx.conf,
    process clean-up, and the gate failing on a slow middleware) pass in the bake's
    environment (the lab suite's step: tests/conftest.py, lab_steps)."""
    done = full_suites.step("lab", "lab tests")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
    assert " skipped" not in done.stdout  # valgrind, nginx and wrk are there: nothing skipped


@pytest.mark.slow
@pytest.mark.full_suite("lab")
def test_the_cost_gate_passes_on_the_default_bake(
    full_suites: FullSuites, shared_tmp: Path
) -> None:
    """The gate counts bare, each middleware of the app factory, the default stack and the
    default stack in the serving stack's ResponseGuard, passes on the default bake within
    lab/budgets.toml, and a second run of the same command agrees: each count to within half
    a percent, the ratio judged to within 0.15 %. Both run in the lab suite (tests/conftest.py,
    lab_steps), beside the bakes' suites: the counts do not depend on the machine's load."""
    done = full_suites.step("lab", "cost")
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout)
    assert "pass  default stack: 1." in done.stdout
    measured = json.loads((lab_output(shared_tmp, "cost") / "cost.json").read_text())
    # The stack comes from create_app(): a middleware added there is counted with no list to
    # update (lab/tests/test_cost.py adds a slow one and sees a FAIL).
    assert measured["stack"][-1] == "ErrorGuardMiddleware"
    for index, name in enumerate(measured["stack"]):
        assert f"| + {name} alone |" in done.stdout
        assert measured["per_request"][f"only:{index}"] > measured["per_request"]["bare"]
    # What the stack's workers add around every app is counted too, not judged.
    assert "| default stack in the stack's ResponseGuard |" in done.stdout
    assert measured["per_request"]["served"] > measured["per_request"]["default"]

    again = full_suites.step("lab", "cost-again")
    assert again.returncode == 0, again.stdout + again.stderr
    repeated = json.loads((lab_output(shared_tmp, "cost-again") / "cost.json").read_text())
    for variant in ("bare", "default"):
        first, second = measured["per_request"][variant], repeated["per_request"][variant]
        assert abs(second - first) / first < REPEAT_TOLERANCE, (variant, first, second)
    ratios = measured["ratio"], repeated["ratio"]
    assert abs(ratios[1] - ratios[0]) / ratios[0] < RATIO_REPEAT_TOLERANCE, ratios


@pytest.mark.slow
def test_the_lab_assumes_none_of_the_default_names(
    shared_tmp: Path, project_env: ProjectEnv, tmp_path: Path
) -> None:
    """A service baked under other names (package, project directory) is found from its
    directory alone: its own app module, stack package and factory are measured."""
    other = bake(shared_tmp / "renamed", project_name="Billing API", package_name="billing")
    assert other.exit_code == 0, other.stderr
    done = bench(other.project, project_env, "--only", "cost", "--quick", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "measuring billing-api: app billing.main:app, stack serving_stack" in done.stdout
    measured = json.loads((tmp_path / "build" / "bench" / "cost.json").read_text())
    assert measured["factory"] == "billing.main:create_app"


def test_a_directory_that_is_no_service_is_one_line(tmp_path: Path) -> None:
    """./scripts/bench on a directory without a service says so in one line and exits 1."""
    (tmp_path / "src").mkdir()
    done = run_captured(
        [str(BENCH_SCRIPT), str(tmp_path), "--only", "cost"],
        env=dict(os.environ, BENCH_PYTHON=str(TEMPLATE_DIR / ".venv" / "bin" / "python")),
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("error: ")
    assert "is no generated project" in done.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("quiet_machine")
def test_a_quick_run_measures_the_services_own_stack(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path
) -> None:
    """--quick measures the middleware and the nginx hop 3 times each (12 one-second runs
    after as many warm-ups: about a minute, no bound asserted on a shared machine), judges them
    against the floors (exit 0 means each passed), leaves no server running, and writes the
    JSON and a report that names no path of this machine."""
    project = default_bake.project
    quick = bench(project, project_env, "--quick", "--only", "middleware", "hop", cwd=tmp_path)
    output = quick.stdout + quick.stderr
    assert quick.returncode == 0, output[-4000:]
    assert "left]" in output  # the progress lines with the estimated time left
    assert leftover_processes(project) == []

    out = tmp_path / "build" / "bench"
    results = json.loads((out / "benchmark.json").read_text(encoding="utf-8"))
    assert results["mode"] == "quick"
    measured = {
        (experiment["id"], config["id"]): config["runs"]
        for experiment in results["experiments"]
        for config in experiment["configs"]
    }
    assert set(measured) == {
        ("middleware", "bare"),
        ("middleware", "default"),
        ("hop", "direct-small"),
        ("hop", "nginx-small"),
        ("hop", "direct-1mb"),
        ("hop", "nginx-1mb"),
    }
    for key, runs in measured.items():
        assert len(runs) >= 3, key
        for sample in runs:
            assert sample["requests"] > 0, key
            assert sample["non_2xx"] + sample["socket_errors"] == 0, (key, sample)
    report = (out / "benchmark.md").read_text(encoding="utf-8")
    assert "| configuration | requests/s (median) | min - max | p50 ms | p99 ms |" in report
    for budget in ("default middleware stack", "nginx hop, small JSON", "nginx hop, 1 MiB"):
        assert f"| {budget} | " in report
        assert f"pass  {budget}: " in quick.stdout
    assert "FAIL" not in report
    assert str(project.parent) not in report
    assert str(tmp_path) not in report
