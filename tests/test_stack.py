"""The default bake's serving stack, checked from outside: gixy on the nginx.conf the supervisor
renders, `gunicorn --check-config` on serving_stack/gunicorn_conf.py with the real app, the image's
entrypoint, and the package's boundaries (it never imports the app; only its settings module
reads the environment).

The stack's own stack/tests hold its unit tests (every variable, `nginx -t`, the deadline
from .env); these need the project's installed tools (project_env), read its files whole, or
copy stack/ alone beside a foreign app, install it fresh, run its tests and serve that app.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.clients import fetch
from harness.processes import Processes
from harness.stack import PATH, start

from .conftest import Bake, ProjectEnv, run_captured

BEHIND_A_LOAD_BALANCER = {"TRUSTED_PROXIES": "10.0.0.0/8 2001:db8::/32", "NGINX_ACCESS_LOG": "off"}


def _stack(bake: Bake) -> Path:
    """stack/serving_stack, the serving stack's package."""
    return bake.project / "stack" / "serving_stack"


@pytest.mark.parametrize("extra", [{}, BEHIND_A_LOAD_BALANCER], ids=["defaults", "behind"])
def test_gixy_finds_nothing_in_the_rendered_config(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path, extra: dict[str, str]
) -> None:
    """gixy (the maintained fork) reports no issue in nginx.conf as the supervisor renders it."""
    env = project_env.environ(default_bake.project) | {"RUN_DIR": str(tmp_path), **extra}
    render = [str(project_env.venv / "bin" / "python"), "-m", "serving_stack"]

    rendered = subprocess.run(
        [*render, "render"],
        cwd=default_bake.project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    gixy = run_captured([str(project_env.venv / "bin" / "gixy"), rendered.stdout.strip()])

    assert gixy.returncode == 0, gixy.stdout + gixy.stderr


# What the app and the stack each make of the deadline, in one process of the bake's venv:
# the app's deadline and nginx's proxy timeout, or the first line each refuses with.
DEADLINES = """\
import os
from my_service.settings import Settings, refusal
from pydantic import ValidationError
from serving_stack import nginx_conf, settings
try:
    print(Settings().request_timeout_seconds)
except ValidationError as refused:
    print(refusal(refused))
try:
    print(nginx_conf.nginx_values(settings.load(os.environ), 1)["PROXY_TIMEOUT"])
except settings.SettingError as refused:
    print(refused)
"""
MISNAMED = "MY_SERVICE_REQUEST_TIMEOUT_SECONDS is not read: set REQUEST_TIMEOUT_SECONDS"


@pytest.mark.parametrize(
    ("variable", "answers"),
    [
        ("REQUEST_TIMEOUT_SECONDS", ["60.0", "65s"]),
        ("MY_SERVICE_REQUEST_TIMEOUT_SECONDS", [MISNAMED, MISNAMED]),
    ],
)
def test_the_deadline_has_one_name_and_one_answer(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path, variable: str, answers: list[str]
) -> None:
    """Set by its name, the deadline is the app's and nginx's alike (60 s, then 65 s); under the
    app's prefix (its name before serving-stack 0.2), both refuse it in the same line, where the
    app took 60 s and nginx kept 35 s."""
    env = project_env.environ(default_bake.project) | {variable: "60"}
    env["APP_MODULE"] = f"{default_bake.package_name}.main:app"
    python = str(project_env.venv / "bin" / "python")

    done = run_captured([python, "-c", DEADLINES], cwd=tmp_path, env=env, timeout=60)

    assert done.returncode == 0, done.stderr
    assert [
        line[: len(answer)] for line, answer in zip(done.stdout.splitlines(), answers, strict=True)
    ] == answers


def test_gunicorn_accepts_its_config_and_the_app(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path
) -> None:
    """`gunicorn --check-config` loads the stack's gunicorn config and imports the app."""
    env = project_env.environ(default_bake.project) | {"RUN_DIR": str(tmp_path)}
    env["APP_MODULE"] = f"{default_bake.package_name}.main:app"  # as the Makefile sets it
    python = str(project_env.venv / "bin" / "python")

    result = run_captured(
        [python, "-m", "gunicorn", "-c", "python:serving_stack.gunicorn_conf", "--check-config"],
        cwd=default_bake.project,
        env=env,
        timeout=60,
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_the_installed_stack_as_a_fixed_non_root_user(default_bake: Bake) -> None:
    """The image's user is numeric and not root; the entrypoint and the health check run the
    installed package in exec form; no curl in the image."""
    dockerfile = (default_bake.project / "Dockerfile").read_text(encoding="utf-8")
    module = "serving_stack"

    assert "\nUSER 10001:10001\n" in dockerfile
    assert f'\nENTRYPOINT ["python", "-m", "{module}"]\n' in dockerfile
    assert f'CMD ["python", "-m", "{module}", "check"]' in dockerfile, "HEALTHCHECK"
    assert not re.search(r"apt-get install[^\n]*\bcurl\b", dockerfile), "no curl in the image"


def test_the_stack_never_imports_the_app(default_bake: Bake) -> None:
    """The stack gets the app as APP_MODULE only: no module of the package imports it."""
    app = re.compile(rf"^\s*(?:from|import)\s+{default_bake.package_name}\b", re.M)

    importing = [p.name for p in _stack(default_bake).glob("*.py") if app.search(p.read_text())]

    assert importing == []


def test_only_the_settings_module_reads_the_environment(default_bake: Bake) -> None:
    """Every variable is a field of the settings model: no other module reads one itself."""
    reads = re.compile(r"environ(?:\.get\(|\[)\s*\"([A-Z][A-Z0-9_]*)\"\s*[,)\]](?!\s*=)")
    # PATH finds nginx (load() and the supervisor); the others are written for child processes.
    allowed = {"PATH"}

    found = {
        path.name: set(reads.findall(path.read_text(encoding="utf-8"))) - allowed
        for path in _stack(default_bake).glob("*.py")
        if path.name != "settings.py"
    }

    assert {name: names for name, names in found.items() if names} == {}


# An ASGI app foreign to every bake: the stack serves any app named as APP_MODULE.
FOREIGN_APP = """\
async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"foreign " + scope["path"].encode()})
"""


@pytest.mark.slow
@pytest.mark.parametrize("resolution", ["highest", "lowest-direct"])
def test_the_stack_alone_beside_a_foreign_app_passes_its_tests_and_serves_it(
    default_bake: Bake, tmp_path: Path, resolution: str
) -> None:
    """stack/, copied alone beside a foreign ASGI app, builds a wheel and an sdist; the wheel
    and the stack's test group, in a fresh virtualenv holding nothing else, pass every test of
    the stack (against the wheel, under the stack's own configuration), and `python -m
    serving_stack` serves the app through nginx, with no project file beside it: at the newest
    versions the stack's ranges allow, and at their floors (each direct dependency's lowest)."""
    uv = str(Path(sys.executable).parent / "uv")
    dist, venv, foreign = tmp_path / "dist", tmp_path / "venv", tmp_path / "foreign"
    stack = foreign / "stack"
    ignored = shutil.ignore_patterns("__pycache__", ".*_cache")
    shutil.copytree(default_bake.project / "stack", stack, ignore=ignored)
    (foreign / "app.py").write_text(FOREIGN_APP, encoding="utf-8")
    built = run_captured([uv, "build", "--quiet", "--out-dir", dist, stack])
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("serving_stack-*.whl")
    assert len(list(dist.glob("serving_stack-*.tar.gz"))) == 1
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    options = ["--quiet", "--python", python, "--resolution", resolution]
    install = [uv, "pip", "install", *options, wheel]
    subprocess.run([*install, "--group", f"{stack / 'pyproject.toml'}:test"], check=True)
    # Nothing of this session's environments (PYTHONPATH holds a bake's stack): the fresh one's.
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}

    # -P and append: the tests import the installed wheel, the copy's source only after it.
    pytest_argv = [python, "-P", "-m", "pytest", "-q", "--import-mode=append"]
    tested = run_captured(pytest_argv, cwd=stack, env=env | {"PATH": PATH})

    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "skipped" not in tested.stdout, "every test ran, the live one too (nginx)"
    served = {"APP_MODULE": "app:app", "PYTHONPATH": "", "WEB_CONCURRENCY": "1"}
    if os.geteuid() == 0:  # serving as root is this variable's explicit choice
        served["SERVE_AS_ROOT"] = "on"
    processes = Processes()
    try:
        serving = start(processes, tmp_path, served, python=python, cwd=foreign)
        serving.wait_ready()
        assert fetch(f"{serving.base}/hello")[::2] == (200, b"foreign /hello"), serving.log_text()
    finally:
        processes.stop_all()
