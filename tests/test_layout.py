"""layout=serving-only: the serving stack alone, dropped next to an app the template did not write.

The app is FastAPI's own tutorial ("First Steps" plus its path-parameter route), written by
the test as a one-file repository. The bake's files are copied next to it with the command
the rendered README gives, the copied deploy/ is installed as the README says (a package with
its own pyproject.toml), then `python -m serving_stack` runs the stack as the container
would (working directory = the repository, APP_MODULE from the answer, not from the
environment) and real requests go through nginx.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import Bake, ProjectEnv, bake
from .test_ecosystem import rerender, tree

APP_MODULE = "main:app"
# FastAPI's tutorial, as its documentation prints it (tutorial001 of "First Steps" and of
# "Path Parameters"), in one file: the existing app that knows nothing of this template.
TUTORIAL_APP = """\
from fastapi import FastAPI

app = FastAPI()


@app.get("/")
async def root():
    return {"message": "Hello World"}


@app.get("/items/{item_id}")
async def read_item(item_id: int):
    return {"item_id": item_id}
"""
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Cross-Origin-Resource-Policy": "same-origin",
}
NGINX_REQUEST_ID = re.compile(r"[0-9a-f]{32}")
# As root, the tutorial app's stack runs as this unprivileged uid (setpriv), as production's does.
STACK_UID = 48151
SYSTEM_PATH = f"{os.environ.get('PATH', os.defpath)}{os.pathsep}/usr/sbin"
# What serving-only keeps (with its package's name) and what belongs to the service only.
KEPT = [
    "deploy/nginx.conf", "deploy/gunicorn.conf.py", "deploy/pyproject.toml",
    "deploy/{package}_stack/runner.py", "deploy/{package}_stack/settings.py",
    "deploy/{package}_stack/jsonlog.py", "deploy/{package}_stack/cpus.py",
    "deploy/{package}_stack/gunicorn_config.py", "deploy/{package}_stack/metrics_listener.py",
    "src/{package}/request_context.py",
    "Dockerfile", ".dockerignore", "compose.yaml", "Makefile", "README.md", "pyproject.toml",
    "src/{package}/__init__.py", "src/{package}/logs.py", "src/{package}/py.typed",
    "src/{package}/middleware/request_id.py", "src/{package}/middleware/access_log.py",
    "src/{package}/middleware/deadline.py", "src/{package}/middleware/error_guard.py",
    "tests/unit/test_request_id.py", "tests/unit/test_access_log.py",
    "tests/unit/test_deadline.py", "tests/unit/test_error_guard.py", "tests/unit/test_logs.py",
    "stack/tests/test_settings.py", "stack/tests/test_nginx.py", "stack/tests/test_processes.py",
    "src/{package}/middleware/metrics.py", "src/{package}/tracing.py",
]  # fmt: skip
DROPPED = [
    ".github", "k8s", "docs", "tests/live", ".env.example",
    "src/{package}/api", "src/{package}/main.py", "src/{package}/settings.py",
    "src/{package}/validation.py", "tests/unit/test_validation.py",
    "tests/unit/test_metrics.py", "tests/unit/test_tracing.py",
    "deploy/requirements.txt", "src/{package}_stack",  # here the stack is deploy/'s package
]  # fmt: skip
SERVICE_IMPORTS = re.compile(r"\b(?:{package}\.(?:main|settings|api)|slow_app|fault_app)\b")


def python_blocks(readme: str) -> list[str]:
    """The README's ```python blocks, without the list item's indentation."""
    blocks = re.findall(r"^ *```python\n(.*?)^ *```", readme, flags=re.DOTALL | re.MULTILINE)
    return [textwrap.dedent(body) for body in blocks]


@pytest.fixture(scope="module")
def serving_bake(tmp_path_factory: pytest.TempPathFactory) -> Bake:
    """The serving stack rendered alone, for an existing app at main:app."""
    result = bake(
        tmp_path_factory.mktemp("serving-only"), layout="serving-only", app_module=APP_MODULE
    )
    assert result.exit_code == 0, result.stderr
    return result


def test_serving_only_keeps_the_stack_and_drops_the_service(serving_bake: Bake) -> None:
    """The stack, the middleware and their tests are there; the generated app is not."""
    package = serving_bake.package_name
    project = serving_bake.project

    missing = [p for p in (p.format(package=package) for p in KEPT) if not (project / p).exists()]
    present = [p for p in (p.format(package=package) for p in DROPPED) if (project / p).exists()]
    assert missing == [], "serving-only lost part of the stack"
    assert present == [], "serving-only still holds the generated service"
    service_imports = re.compile(SERVICE_IMPORTS.pattern.format(package=package))
    for path in sorted(project.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not service_imports.search(text), f"{path.relative_to(project)} needs the service"


def test_the_answer_is_what_gunicorn_serves(serving_bake: Bake, project_env: ProjectEnv) -> None:
    """APP_MODULE defaults to the answer (the stack's settings) and is set in compose.yaml."""
    read = f"import {serving_bake.package_name}_stack.settings as s; print(s.load({{}}).app_module)"
    default = subprocess.run(
        [project_env.venv / "bin" / "python", "-c", read],
        cwd=serving_bake.project / "deploy",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    compose = (serving_bake.project / "compose.yaml").read_text(encoding="utf-8")

    assert default == APP_MODULE
    assert re.search(rf"^\s+APP_MODULE: {re.escape(APP_MODULE)}\s", compose, re.MULTILINE)


def test_stack_requirements_match_the_service(serving_bake: Bake, default_bake: Bake) -> None:
    """deploy/pyproject.toml asks for the serving packages at the service's own versions and
    builds the stack package beside it; the service installs the stack with itself."""
    stack = tomllib.loads((serving_bake.project / "deploy" / "pyproject.toml").read_text("utf-8"))
    requirements = stack["project"]["dependencies"]
    pyproject = tomllib.loads((default_bake.project / "pyproject.toml").read_text("utf-8"))
    package = "serving_stack"

    assert {r.split(">")[0].split("[")[0] for r in requirements} == {
        "gunicorn", "uvicorn", "uvicorn-worker",
        "prometheus-client",  # the metrics listener and its archive of dead workers' values
        "pydantic-settings", "pydantic",  # the stack's settings
    }  # fmt: skip
    assert set(requirements) <= set(pyproject["project"]["dependencies"])
    assert stack["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [package]
    assert (serving_bake.project / "deploy" / package / "__main__.py").is_file()
    assert not (default_bake.project / "deploy" / "pyproject.toml").exists(), "service: its own"


def test_dockerfile_installs_the_stack_then_the_app(serving_bake: Bake) -> None:
    """The image installs the stack (deploy/, a package), then the repository's own, copies
    the repository, and runs the installed package's runner."""
    dockerfile = (serving_bake.project / "Dockerfile").read_text(encoding="utf-8")
    ignored = (serving_bake.project / ".dockerignore").read_text(encoding="utf-8").splitlines()
    module = "serving_stack"
    assert "pip install --no-cache-dir ./deploy\n" in dockerfile
    assert dockerfile.index("./deploy\n") < dockerfile.index("--requirement requirements.txt")
    assert f'\nENTRYPOINT ["python", "-m", "{module}"]\n' in dockerfile
    assert "\nCOPY . /app\n" in dockerfile
    assert {".git", ".venv", ".env", ".env.*"} <= set(ignored), "secrets and junk stay out"
    # No Docker engine here: at least every RUN's shell must parse (sh -n), conditionals too.
    runs = re.findall(r"^RUN (.*?[^\\])$", dockerfile.replace("\\\n", " "), re.MULTILINE)
    assert any(command.startswith("if [ -f requirements.txt ]") for command in runs), runs
    for command in runs:
        result = subprocess.run(["sh", "-n", "-c", command], capture_output=True, text=True)
        assert result.returncode == 0, f"{command}\n{result.stderr}"


def test_rerender_from_recorded_answers_keeps_the_layout(tmp_path: Path) -> None:
    """The recorded answers carry layout and app_module: an update re-renders the same files."""
    original = bake(tmp_path / "original", layout="serving-only", app_module="api.server:app")
    assert original.exit_code == 0, original.stderr

    rendered = rerender(original.project, tmp_path / "again")

    assert tree(rendered) == tree(original.project)
    assert (rendered / "deploy" / "pyproject.toml").is_file()
    assert (rendered / "deploy" / "serving_stack").is_dir()


@pytest.mark.slow
def test_serving_only_lints_and_passes_all_its_tests(
    serving_bake: Bake, project_env: ProjectEnv
) -> None:
    """ruff, ruff format and mypy --strict, then every test the bake ships (serving included)."""
    project = serving_bake.project
    # project_env puts src/ and deploy/ (the stack package here) on the path instead of
    # installing the bake, as `make install` would.
    env = project_env.environ(project)
    for target in ("lint", "test"):
        result = subprocess.run(
            ["make", "--no-print-directory", "-C", project, target, f"VENV={project_env.venv}"],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"make {target}\n{result.stdout}\n{result.stderr}"


# --- the live stack around the tutorial app -------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of a GET, error statuses included."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _answers(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:
        return False


def _stack_python(env: ProjectEnv, repo: Path) -> tuple[list[str], str, list[str]]:
    """The privilege-drop prefix, interpreter and PYTHONPATH to run the stack with.

    As in the generated serving tests: as root, a dedicated unprivileged uid (the image runs
    as 10001, never root); the venv's interpreter may sit under /root, so the system's
    interpreter of the same version runs the venv's packages.
    """
    venv_python = env.venv / "bin" / "python"
    if os.geteuid() != 0:
        return [], str(venv_python), []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): cannot drop privileges")
    version = subprocess.run(
        [venv_python, "-c", "import sys, sysconfig; print(sys.version_info[1]);"
         "print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    minor, site_packages = version
    drop = [setpriv, f"--reuid={STACK_UID}", f"--regid={STACK_UID}", "--clear-groups",
            "--inh-caps=-all"]  # fmt: skip
    for python in (f"/usr/bin/python3.{minor}", f"/usr/local/bin/python3.{minor}"):
        probe = subprocess.run(
            [*drop, python, "-c", "import gunicorn, uvicorn_worker, fastapi"],
            env={"PATH": SYSTEM_PATH, "PYTHONPATH": site_packages, "HOME": str(repo)},
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return drop, python, [site_packages]
    pytest.skip(f"no Python 3.{minor} that uid {STACK_UID} may run with the project's packages")


@pytest.mark.slow
def test_tutorial_app_served_through_the_stack(serving_bake: Bake, project_env: ProjectEnv) -> None:
    """README steps 1-3 around FastAPI's tutorial app: 200s through nginx, then a clean stop."""
    nginx = shutil.which("nginx", path=SYSTEM_PATH)
    if nginx is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    # World-traversable, unlike pytest's 0700 temporary directories: as root the stack runs
    # as another user, like the container's /app.
    repo = Path(tempfile.mkdtemp(prefix="existing-repo-"))
    repo.chmod(0o755)
    process: subprocess.Popen[bytes] | None = None
    log_path = repo.parent / f"{repo.name}.log"
    try:
        # The tutorial app plus the one route README step 2 asks for, /livez.
        readme = (serving_bake.project / "README.md").read_text(encoding="utf-8")
        (livez,) = [block for block in python_blocks(readme) if '"/livez"' in block]
        (repo / "main.py").write_text(f"{TUTORIAL_APP}\n\n{livez}", encoding="utf-8")
        # Step 1, the README's own command, run from the bake.
        (copy,) = [line.strip() for line in readme.splitlines() if "cp -R deploy " in line]
        command = copy.replace("/path/to/your-repo/", f"{repo}/")
        subprocess.run(["sh", "-c", command], cwd=serving_bake.project, check=True)
        assert (repo / "deploy" / "pyproject.toml").is_file()
        assert (repo / "Dockerfile").is_file()

        drop, python, pythonpath = _stack_python(project_env, repo)
        # Step 3's `pip install ./deploy`, into a directory of its own: the shared venv stays
        # as it is, and the stack runs from the package built from the copied deploy/.
        site = repo / ".stack-site"
        subprocess.run(
            [project_env.venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps",
             "--target", site, repo / "deploy"],
            check=True, capture_output=True,
        )  # fmt: skip
        pythonpath = [str(site), *pythonpath]
        module = "serving_stack"
        run_dir = repo / ".run"
        run_dir.mkdir(mode=0o755)
        if drop:
            os.chown(run_dir, STACK_UID, STACK_UID)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        # Step 2 is the answer itself: no APP_MODULE here, gunicorn.conf.py's default serves.
        environment = {
            "PATH": SYSTEM_PATH,
            "HOME": str(run_dir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "RUN_DIR": str(run_dir),
            "PORT": str(port),
            "LISTEN_ADDRESS": "127.0.0.1",
            "WEB_CONCURRENCY": "2",
            "NGINX_WORKER_PROCESSES": "1",
            "NGINX_BIN": nginx,
        }
        environment["PYTHONPATH"] = os.pathsep.join(pythonpath)
        # Step 3, as the image's ENTRYPOINT: the runner, from the repository's root.
        with log_path.open("wb") as output:
            process = subprocess.Popen(
                [*drop, python, "-m", module],
                cwd=repo,
                env=environment,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 90
        while process.poll() is None and not _answers(f"{base}/"):
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.1)
        assert process.poll() is None, log_path.read_text(errors="replace")

        for path, status, body in [
            ("/", 200, {"message": "Hello World"}),
            ("/items/42", 200, {"item_id": 42}),
            ("/items/forty-two", 422, None),  # FastAPI's own validation, through the stack
        ]:
            got_status, headers, raw = _get(f"{base}{path}")
            assert got_status == status, (path, raw)
            if body is not None:
                assert json.loads(raw) == body
            for name, value in SECURITY_HEADERS.items():
                assert headers.get(name) == value, (path, name, headers)
            assert NGINX_REQUEST_ID.fullmatch(headers.get("X-Request-ID", "")), headers
        # The image's HEALTHCHECK command, through nginx to the app's /livez.
        check = subprocess.run(
            [*drop, python, "-m", module, "check"],
            cwd=repo, env=environment, capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        ids = {_get(f"{base}/")[1]["X-Request-ID"] for _ in range(3)}
        assert len(ids) == 3, "every request gets its own id"
        assert (run_dir / "gunicorn.sock").exists(), "nginx reached the app over the socket"

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=90) == 0, log_path.read_text(errors="replace")
        logged = [json.loads(line) for line in log_path.read_text().splitlines() if line[:1] == "{"]
        assert any(line.get("message") == "started gunicorn" for line in logged)
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        _kill_leftovers(log_path)
        shutil.rmtree(repo, ignore_errors=True)
        log_path.unlink(missing_ok=True)


def _kill_leftovers(log_path: Path) -> None:
    """Kill nginx and gunicorn if the runner left them (their process groups, from its log)."""
    if not log_path.exists():
        return
    for raw in log_path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            line = json.loads(raw)
            if str(line.get("message", "")).startswith("started ") and "pid" in line:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(line["pid"]), signal.SIGKILL)


def test_middleware_snippet_works_on_the_tutorial_app(
    serving_bake: Bake, project_env: ProjectEnv, tmp_path: Path
) -> None:
    """The README's middleware snippet, added to the tutorial app, gives ids and access lines."""
    readme = (serving_bake.project / "README.md").read_text(encoding="utf-8")
    (snippet,) = [block for block in python_blocks(readme) if "add_middleware" in block]
    package = serving_bake.package_name
    shutil.copytree(serving_bake.project / "src" / package, tmp_path / package)
    app = TUTORIAL_APP + "\n" + snippet.replace("yourpackage", package)
    (tmp_path / "main.py").write_text(app, encoding="utf-8")
    script = (
        "from fastapi.testclient import TestClient\n"
        "from main import app\n"
        "with TestClient(app) as client:\n"
        "    reply = client.get('/items/7', headers={'X-Request-ID': 'abc-123'})\n"
        "print(reply.status_code, reply.headers['x-request-id'], reply.json())\n"
    )
    # deploy/ too, as if installed (`pip install ./deploy`): logs.py formats with the stack's
    # one formatter, serving_stack.jsonlog.
    deploy = serving_bake.project / "deploy"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(deploy)])}
    result = subprocess.run(
        [str(project_env.venv / "bin" / "python"), "-W", "error", "-c", script],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "200 abc-123 {'item_id': 7}"
    access = [json.loads(line) for line in lines[:-1] if line.startswith("{")]
    assert any(
        entry.get("path") == "/items/7" and entry.get("request_id") == "abc-123" for entry in access
    ), result.stdout
