"""The template's experiment grid (experiments/, scripts/experiments) runs against a bake.

Real cookiecutter, gunicorn, nginx and wrk on 127.0.0.1; the middleware experiment only, in
short runs, so the test stays near a minute. The full grid is `scripts/experiments`. The
grid, the CPU share and the floors run in the lab suite, in the background (tests/conftest.py,
lab_steps); their tests read what each wrote.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import Bake, ProjectEnv, lab_environ, lab_output, run_captured
from .full_suites import FullSuites

# The default bake's app package (cookiecutter.json's default answers).
PACKAGE = "my_service"


# The app variants grid.py serves on top of the lab's own (lab/apps.py).
GRID_VARIANTS = (
    "experiments.apps:asgi_passthrough()",
    "experiments.apps:basehttp()",
    "experiments.apps:basehttp_passthrough()",
)
LIST_APPS = (
    "from experiments.grid import grid; "
    f"print(*{{c.stack.app for e in grid(2, 2, package='{PACKAGE}') for c in e.configs}})"
)


@pytest.mark.slow
def test_every_template_variant_loads_under_gunicorn(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path
) -> None:
    """Each app factory the grid names is one gunicorn imports and calls with the shipped
    gunicorn config (`--check-config` loads the app), and a wrong name is refused, so a
    renamed variant fails here rather than minutes into a run."""
    project = default_bake.project
    python = str(project_env.venv / "bin" / "python")
    env = dict(
        lab_environ(project_env, project),
        EXPERIMENTS_PACKAGE=PACKAGE,
        LAB_FACTORY=f"{PACKAGE}.main:create_app",
        RUN_DIR=str(tmp_path),
    )
    listed = subprocess.run(
        [python, "-c", LIST_APPS], env=env, capture_output=True, text=True, check=True
    )
    variants = sorted(app for app in listed.stdout.split() if app.startswith("experiments."))
    assert variants == list(GRID_VARIANTS)
    config = "python:serving_stack.gunicorn_conf"
    for app in (*GRID_VARIANTS, "experiments.apps:no_such_variant()"):
        done = run_captured(
            [python, "-m", "gunicorn", "--config", config, "--check-config"],
            cwd=project,
            env=dict(env, APP_MODULE=app),
            timeout=120,
        )
        assert (done.returncode == 0) == ("no_such" not in app), (app, done.stderr[-2000:])


@pytest.mark.slow
@pytest.mark.full_suite("lab")
def test_the_grid_runs_against_a_fresh_bake(full_suites: FullSuites, shared_tmp: Path) -> None:
    """scripts/experiments bakes the default project and measures the seeds' middleware
    experiment, BaseHTTPMiddleware twin included, into a report with the findings table
    (the lab suite's step: tests/conftest.py, lab_steps)."""
    out = lab_output(shared_tmp, "grid")
    done = full_suites.step("lab", "grid")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "experiments.json").read_text(encoding="utf-8"))
    # The report quotes the command that made it, as the caller typed it.
    assert results["command"] == f"scripts/experiments --quick --only middleware --out {out}"
    (middleware,) = results["experiments"]
    runs = {config["id"]: config["runs"] for config in middleware["configs"]}
    assert set(runs) == {"bare", "default", "basehttp-1"}
    for config_id, config_runs in runs.items():
        assert len(config_runs) == 3, config_id
        for sample in config_runs:
            assert sample["requests"] > 0, config_id
            assert sample["non_2xx"] + sample["socket_errors"] == 0, (config_id, sample)
    report = (out / "experiments.md").read_text(encoding="utf-8")
    assert "# The template's experiment grid" in report
    assert "| BaseHTTPMiddleware costs about half the throughput |" in report


@pytest.mark.slow
@pytest.mark.full_suite("lab")
def test_cpu_share_explains_the_nginx_hop(full_suites: FullSuites, shared_tmp: Path) -> None:
    """--cpu-share measures CPU time per request of the app, nginx and wrk for both
    endpoints, direct and through nginx, and the ratio a CPU-bound machine allows."""
    done = full_suites.step("lab", "cpu-share")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = lab_output(shared_tmp, "cpu-share")
    rows = (out / "cpu-share.md").read_text(encoding="utf-8").splitlines()[2:]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| small JSON", "gunicorn direct"],
        ["| small JSON", "nginx -> socket -> gunicorn"],
        ["| 1 MiB", "gunicorn direct"],
        ["| 1 MiB", "nginx -> socket -> gunicorn"],
    ]
    for row in rows[1::2]:
        app_us, nginx_us, wrk_us, bound = row.split(" | ")[3:7]
        assert float(app_us) > 0
        assert float(nginx_us) > 0
        assert float(wrk_us) > 0
        assert 0 < float(bound.removesuffix(" x |").removesuffix(" x")) < 1.5


@pytest.mark.slow
@pytest.mark.full_suite("lab")
def test_floors_put_the_shipped_middleware_beside_the_least_each_job_costs(
    full_suites: FullSuites, shared_tmp: Path
) -> None:
    """--floors counts, with the lab's cachegrind gate, one cheapest layer per job and
    all three jobs in one layer, beside the shipped middleware; the table is what the
    README's performance section quotes."""
    done = full_suites.step("lab", "floors")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    floors = lab_output(shared_tmp, "floors") / "floors.md"
    rows = {
        cells[0]: float(cells[2].removesuffix(" x"))
        for line in floors.read_text(encoding="utf-8").splitlines()[3:]
        for cells in [line.strip("| ").split(" | ")]
    }
    nothing = rows["+ one pure-ASGI layer doing nothing"]
    all_in_one = rows["+ ONE layer doing all of request id, deadline and error guard"]
    shipped = rows["shipped: request id, deadline and error guard (metrics off)"]
    # Every job costs more than an empty layer; doing them all costs more than any one;
    # three layers cost more than one doing the same jobs.
    assert all(
        ratio > nothing
        for what, ratio in rows.items()
        if what != "+ one pure-ASGI layer doing nothing"
    )
    assert all_in_one > max(ratio for what, ratio in rows.items() if what.startswith("+ a layer"))
    assert shipped > all_in_one
    assert rows["shipped: the default stack, metrics included"] > shipped
