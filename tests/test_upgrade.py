"""The upgrade a team makes: a project baked from the last release of the template, its
`stack/` replaced by this checkout's and none of its own files touched, still passes `make
lint`, `make test` and `make serve`, as a default bake and as a serving-only adoption.

Each step is the project's own Makefile target in its own .venv, as the team runs it; uv
installs from the cache the other bakes' environments filled (conftest.install_env), pip from
its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import procfs
from harness.clients import request
from harness.ports import free_port
from harness.processes import Processes, wait_ready
from harness.stack import PATH, json_lines, started

from .conftest import TEMPLATE_DIR, ProjectEnv, run_captured

# The last release's stack (serving-stack 0.4.0): the template as it was released with it (the
# template has no tags). Move it to the release's commit each time a stack release is made, so
# that the test upgrades from the release before the one this checkout will become.
LAST_RELEASE = "e05c4c7"
STACK = TEMPLATE_DIR / "{{cookiecutter.project_slug}}" / "stack"
# An existing app adopting the stack, with the /livez route the serving-only README asks for.
ADOPTING_APP = """\
from fastapi import FastAPI

app = FastAPI()


@app.get("/livez", include_in_schema=False)
async def livez() -> dict[str, str]:
    return {"status": "ok"}
"""
# The release's copies of the stack's configs in a bake's deploy/: they still serve, each with
# one warning line at the start saying how to move off it.
LEGACY_CONFIGS = ["deploy/nginx.conf", "deploy/gunicorn.conf.py"]
JSON = {"Content-Type": "application/json"}
# A body over the 8 KiB the release's deploy/nginx.conf allows POST /items (1 MiB elsewhere).
OVER_ITEMS_LIMIT = b"x" * 9 * 1024


@pytest.fixture(scope="module")
def last_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template's files at LAST_RELEASE, as `git archive` gives them."""
    found = run_captured(
        ["git", "-C", TEMPLATE_DIR, "cat-file", "-e", f"{LAST_RELEASE}^{{commit}}"]
    )
    if found.returncode != 0:
        pytest.fail(
            f"commit {LAST_RELEASE} is not in this clone: fetch the history (git fetch --unshallow)"
        )
    directory = tmp_path_factory.mktemp("last-release")
    archive = subprocess.run(
        ["git", "-C", TEMPLATE_DIR, "archive", LAST_RELEASE], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", directory], input=archive.stdout, check=True)
    return directory


def upgraded(template: Path, output_dir: Path, *answers: str) -> Path:
    """A project baked from template, its stack/ replaced by this checkout's as it is (copied,
    not rendered, like cookiecutter's copy; no bytecode or tool caches)."""
    output_dir.mkdir()
    command = [sys.executable, "-m", "cookiecutter", "--no-input", "--output-dir", output_dir]
    baked = run_captured([*command, template, *answers])
    assert baked.returncode == 0, baked.stderr
    (project,) = output_dir.iterdir()
    shutil.rmtree(project / "stack")
    shutil.copytree(
        STACK, project / "stack", ignore=shutil.ignore_patterns("__pycache__", ".*_cache")
    )
    return project


def team_environ() -> dict[str, str]:
    """This environment without another virtualenv's, with a uv on PATH (`make install` would
    install one from PyPI otherwise), after the system's python3."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["PATH"] = os.pathsep.join([PATH, str(Path(sys.executable).parent)])
    return env


def make(project: Path, env: dict[str, str], target: str, *args: str) -> None:
    done = run_captured(["make", "--no-print-directory", "-C", project, target, *args], env=env)
    assert done.returncode == 0, f"make {target}\n{done.stdout}\n{done.stderr}"


def serve(project: Path, env: dict[str, str], *, items_limit: bool) -> list[dict[str, object]]:
    """`make serve` until GET /livez answers 200 through nginx (and, with items_limit, a POST
    /items over its limit 413), then SIGTERM to the stack: make must exit 0. The stack's log."""
    port = free_port()
    env = {**env, "PORT": str(port), "METRICS_PORT": str(free_port())}
    if os.geteuid() == 0:  # serving as root is this variable's explicit choice
        env["SERVE_AS_ROOT"] = "on"
    log = project.parent / "serve.log"
    processes = Processes()
    serving = processes.start(
        "make serve", ["make", "--no-print-directory", "serve"], env, project, log
    )
    try:
        wait_ready(serving, ("127.0.0.1", port), "/livez", timeout=90)
        if items_limit:
            status, _, _ = request(port, "POST", "/items", OVER_ITEMS_LIMIT, headers=JSON)
            assert status == 413, serving.output()
        # The stack itself, under make's shell: make exits with its code.
        # The topmost such process: a child it forks carries its command line until it execs.
        supervisors = [
            proc
            for proc in procfs.tree(serving.popen.pid)
            if proc.comm.startswith("python")
            and procfs.cmdline(proc.pid).split()[-2:] == ["-m", "serving_stack"]
        ]
        pids = {proc.pid for proc in supervisors}
        (stack,) = [proc.pid for proc in supervisors if proc.ppid not in pids]
        os.kill(stack, signal.SIGTERM)
        assert serving.popen.wait(timeout=90) == 0, serving.output()
    finally:
        processes.stop(serving, started(log))
    return json_lines(log)


def legacy_warnings(lines: list[dict[str, object]]) -> list[str]:
    """The release's own configs each warning line names first, in order."""
    warned = [str(line["message"]) for line in lines if line.get("level") == "warning"]
    return [name for message in warned for name in LEGACY_CONFIGS if message.startswith(name)]


@pytest.mark.slow
def test_a_default_bake_of_the_last_release_upgrades_by_replacing_its_stack_and_make_lock(
    last_release: Path, shared_tmp: Path, project_env: ProjectEnv
) -> None:
    """A default bake of the last release with this stack/ asks `make lock` alone, then
    installs, lints, tests and serves, its deploy/ configs still serving (one warning line each,
    the /items body limit kept)."""
    project = upgraded(last_release, shared_tmp / "upgrade-default")
    env = team_environ()
    # `make lock` runs the uv of the team's .venv, installed before the upgrade: the shared
    # environment holds the same locked versions.
    stale = run_captured(["make", "-C", project, "check-lock", f"VENV={project_env.venv}"], env=env)
    assert "run make lock" in stale.stderr, stale.stdout + stale.stderr
    make(project, env, "lock", f"VENV={project_env.venv}")
    for target in ("install", "lint", "test"):
        make(project, env, target)

    lines = serve(project, env, items_limit=True)

    assert legacy_warnings(lines) == LEGACY_CONFIGS, lines


@pytest.mark.slow
def test_a_serving_only_adoption_of_the_last_release_upgrades_by_replacing_its_stack(
    last_release: Path, shared_tmp: Path
) -> None:
    """A serving-only bake of the last release with this stack/ installs, lints, tests and
    serves an app of its own, its deploy/ configs still serving (one warning line each)."""
    project = upgraded(last_release, shared_tmp / "upgrade-serving-only", "layout=serving-only")
    env = team_environ()
    for target in ("install", "lint", "test"):
        make(project, env, target)
    app = project.parent / "app"
    app.mkdir()
    (app / "main.py").write_text(ADOPTING_APP, encoding="utf-8")

    adopted = {**env, "PYTHONPATH": str(app), "APP_MODULE": "main:app"}
    lines = serve(project, adopted, items_limit=False)

    assert legacy_warnings(lines) == LEGACY_CONFIGS, lines
