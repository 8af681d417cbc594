"""layout=serving-only: the serving stack alone, dropped next to an app the template did not write.

The app is FastAPI's own tutorial ("First Steps" plus its path-parameter route), written by
the test as a one-file repository. The bake's files are copied next to it with the command
the rendered README gives, the copied deploy/ is installed as the README says (a package with
its own pyproject.toml), then `python -m serving_stack` runs the stack as the container
would (working directory = the repository, APP_MODULE from the answer, not from the
environment) and real requests go through nginx.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from harness.clients import fetch
from harness.ports import free_port
from harness.processes import Processes
from harness.stack import PATH, started

from .conftest import TEMPLATE_DIR, Bake, ProjectEnv, bake, rerender, run_captured, tree

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
# What serving-only keeps (with its package's name) and what belongs to the service only.
KEPT = [
    "deploy/nginx-locations.conf",
    "deploy/serving.mk",
    "deploy/Dockerfile",
    "deploy/compose.yaml",
    "stack/pyproject.toml",
    "stack/README.md",
    "stack/serving_stack/startup.py",
    "stack/serving_stack/settings.py",
    "stack/tests/test_settings.py",
    ".dockerignore",
    "Makefile",
    "README.md",
    "pyproject.toml",
    "src/{package}/__init__.py",
    "src/{package}/logs.py",
    "src/{package}/py.typed",
    "src/{package}/context.py",
    "src/{package}/tracing.py",
    "src/{package}/middleware/request_id.py",
    "src/{package}/middleware/access_log.py",
    "src/{package}/middleware/deadline.py",
    "src/{package}/middleware/error_guard.py",
    "src/{package}/middleware/metrics.py",
    "tests/unit/test_request_id.py",
    "tests/unit/test_access_log.py",
    "tests/unit/test_deadline.py",
    "tests/unit/test_error_guard.py",
    "tests/unit/test_logs.py",
]
DROPPED = [
    ".github",
    "k8s",
    "docs",
    "tests/live",
    ".env.example",
    "Dockerfile",  # deploy/'s: a repository's own stays untouched
    "compose.yaml",
    "src/{package}/api",
    "src/{package}/main.py",
    "src/{package}/settings.py",
    "src/{package}/errors.py",
    "tests/unit/test_errors.py",
    "tests/unit/test_metrics.py",
    "tests/unit/test_tracing.py",
]
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


def test_the_answer_is_what_gunicorn_serves(serving_bake: Bake) -> None:
    """APP_MODULE is the answer in the make fragment, the image and compose.yaml."""
    deploy = serving_bake.project / "deploy"
    makefile = (deploy / "serving.mk").read_text(encoding="utf-8")
    dockerfile = (deploy / "Dockerfile").read_text(encoding="utf-8")
    compose = (deploy / "compose.yaml").read_text(encoding="utf-8")

    assert f"\nexport APP_MODULE ?= {APP_MODULE}\n" in makefile
    assert f"    APP_MODULE={APP_MODULE}\n" in dockerfile
    assert re.search(rf"^\s+APP_MODULE: {re.escape(APP_MODULE)}\s", compose, re.MULTILINE)


def test_the_stack_is_the_same_directory_in_every_bake(
    serving_bake: Bake, default_bake: Bake, tmp_path: Path
) -> None:
    """stack/ is byte for byte the template's in a default, a postgresql and a serving-only
    bake: a team upgrades it by replacing the directory."""
    postgresql = bake(tmp_path, database="postgresql", project_name="Other Name")
    assert postgresql.exit_code == 0, postgresql.stderr
    template = tree(TEMPLATE_DIR / "{{cookiecutter.project_slug}}" / "stack")

    for each in (default_bake, postgresql, serving_bake):
        assert tree(each.project / "stack") == template, each.project


def test_the_stack_asks_for_few_dependencies_and_the_app_for_the_stack(default_bake: Bake) -> None:
    """stack/pyproject.toml's runtime set is the serving packages, each with a range; the
    service depends on serving-stack, found in ./stack and never on an index."""
    stack = tomllib.loads((default_bake.project / "stack" / "pyproject.toml").read_text("utf-8"))
    requirements = stack["project"]["dependencies"]
    pyproject = tomllib.loads((default_bake.project / "pyproject.toml").read_text("utf-8"))

    assert {re.split(r"[>\[]", r)[0] for r in requirements} == {
        "gunicorn",
        "uvicorn",
        "uvicorn-worker",
        "prometheus-client",  # the metrics listener and its archive of dead workers' values
        "pydantic-settings",
        "pydantic",  # the stack's settings
        "python-dotenv",  # .env read as pydantic-settings reads it, for the one-line refusals
    }
    assert all(",<" in r for r in requirements), "each range has an upper bound"
    assert stack["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["serving_stack"]
    # The range admits the stack beside it: uv does not check a path source's version, and the
    # range is what a switch to a published serving-stack would resolve (stack/README.md).
    (wanted,) = [r for r in pyproject["project"]["dependencies"] if r.startswith("serving-stack")]
    assert Version(stack["project"]["version"]) in Requirement(wanted).specifier, wanted
    assert pyproject["tool"]["uv"]["sources"]["serving-stack"] == {
        "path": "stack",
        "editable": True,
    }


def test_dockerfile_installs_the_stack_with_the_app_in_one_pass(serving_bake: Bake) -> None:
    """deploy/Dockerfile installs ./stack and the repository's requirements in one pip run,
    copies the repository, and runs the installed package's supervisor."""
    dockerfile = (serving_bake.project / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    ignored = (serving_bake.project / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "pip install --no-cache-dir ./stack --requirement requirements.txt;" in dockerfile
    assert '\nENTRYPOINT ["python", "-m", "serving_stack"]\n' in dockerfile
    assert "\nCOPY . /app\n" in dockerfile
    assert {".git", ".venv", ".env", ".env.*"} <= set(ignored), "secrets and junk stay out"
    # No Docker engine here: at least every RUN's shell must parse (sh -n), conditionals too.
    runs = re.findall(r"^RUN (.*?[^\\])$", dockerfile.replace("\\\n", " "), re.MULTILINE)
    assert any(command.startswith("if [ -f requirements.txt ]") for command in runs), runs
    for command in runs:
        result = run_captured(["sh", "-n", "-c", command])
        assert result.returncode == 0, f"{command}\n{result.stderr}"


def test_rerender_from_recorded_answers_keeps_the_layout(tmp_path: Path) -> None:
    """The recorded answers carry layout and app_module: an update re-renders the same files."""
    original = bake(tmp_path / "original", layout="serving-only", app_module="api.server:app")
    assert original.exit_code == 0, original.stderr

    rendered = rerender(original.project, tmp_path / "again")

    assert tree(rendered) == tree(original.project)
    assert (rendered / "deploy" / "serving.mk").is_file()
    assert (rendered / "stack" / "serving_stack").is_dir()


@pytest.mark.slow
def test_serving_only_lints_and_passes_all_its_tests(
    serving_bake: Bake, project_env: ProjectEnv
) -> None:
    """ruff, ruff format and mypy --strict, then every test the bake ships (serving included)."""
    project = serving_bake.project
    # project_env puts src/ and stack/ on the path instead of installing the bake, as `make
    # install` would.
    env = project_env.environ(project)
    for target in ("lint", "test"):
        result = run_captured(
            ["make", "--no-print-directory", "-C", project, target, f"VENV={project_env.venv}"],
            env=env,
        )
        assert result.returncode == 0, f"make {target}\n{result.stdout}\n{result.stderr}"


# --- the live stack around the tutorial app -------------------------------------------------


def _answers(url: str) -> bool:
    try:
        return fetch(url, timeout=5)[0] == 200
    except OSError:
        return False


JSON = {"Content-Type": "application/json"}
# The repository adopting the stack: its own Dockerfile, Makefile and requirements, which
# the README's steps must leave as they are, and an app with no error guard at all.
REPOSITORY_FILES = {
    "Dockerfile": "FROM python:3.13-slim\nCOPY . /srv\n",
    "Makefile": "test:\n\t@echo the repository's own tests\n",
    "requirements.txt": "fastapi>=0.115\n",
    ".gitignore": "*.pyc\n",
}
# Raises after FastAPI's ServerErrorMiddleware has sent its 500: uvicorn then closes the
# connection nginx had pooled, and without the stack's ResponseGuard the next POST on it
# would be nginx's 502.
UNGUARDED_ROUTES = """

@app.post("/boom")
async def boom():
    raise RuntimeError("an unhandled error")


@app.post("/echo")
async def echo(payload: dict[str, int]):
    return payload
"""


def _shell_block(readme: str, marker: str) -> list[str]:
    """The README's ```sh block holding marker, as its command lines (comments dropped)."""
    blocks = re.findall(r"^ *```sh\n(.*?)^ *```", readme, flags=re.DOTALL | re.MULTILINE)
    (block,) = [block for block in blocks if marker in block]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_serving_check_names_every_conflict_at_once(serving_bake: Bake, tmp_path: Path) -> None:
    """pip names one conflict a run; the README's `serving-check` names every requirement that
    cannot share the interpreter with the stack's ranges, a transitive one (websockets, through
    uvicorn[standard]) included, passes requirements that fit, and refuses none in one line."""
    readme = (serving_bake.project / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"`(make -f deploy/serving\.mk\s+serving-check)`", readme)
    repo = tmp_path / "repo"
    for name in ("stack", "deploy"):
        shutil.copytree(serving_bake.project / name, repo / name)
    environment = {**os.environ, "PATH": PATH}
    environment.pop("VIRTUAL_ENV", None)

    def check(requirements: str, *arguments: str) -> subprocess.CompletedProcess[str]:
        (repo / "requirements.txt").write_text(requirements, encoding="utf-8")
        line = " ".join([*command.split(), *arguments])
        return run_captured(["sh", "-c", line], cwd=repo, env=environment)

    pinned = "uvicorn==0.30.0\ngunicorn==22.0.0  # pinned long ago\nwebsockets==10.0\nhttpx>=0.27\n"
    found = check(pinned)
    assert found.returncode != 0, found.stdout
    named = [line.split(": ", 1)[0] for line in found.stdout.splitlines() if ": " in line]
    assert named == ["uvicorn==0.30.0", "gunicorn==22.0.0", "websockets==10.0"], found.stdout
    assert "3 of 4 requirements conflict with the stack's ranges" in found.stdout
    fitting = check("httpx>=0.27\n")
    assert fitting.returncode == 0, fitting.stdout + fitting.stderr
    assert "requirements: 1, none in conflict" in fitting.stdout
    # The stack README's own command, in the virtualenv serving-check made.
    stack_readme = (repo / "stack" / "README.md").read_text(encoding="utf-8")
    (direct,) = re.findall(r"`(python stack/serving_stack/conflicts\.py [^`]+)`", stack_readme)
    argv = [str(repo / ".venv" / "bin" / "python"), *direct.split()[1:]]
    said_directly = run_captured(argv, cwd=repo, env=environment).stdout.splitlines()
    assert said_directly[-1:] == fitting.stdout.splitlines()[-1:]
    refused = check("", "APP_REQUIREMENTS=")
    assert refused.returncode != 0
    said = [line for line in refused.stderr.splitlines() if line.startswith("conflicts.py: ")]
    usage = "usage: conflicts.py [--requirement FILE | PROJECT_DIR]"
    assert said == [f"conflicts.py: nothing names no requirements. {usage}"], refused.stderr


@pytest.mark.slow
def test_the_readme_adopted_literally_serves_an_unguarded_app(serving_bake: Bake) -> None:
    """Serving-only README steps 1-3, as written, in a repository with its own Dockerfile,
    Makefile and requirements.txt: none of them overwritten, `serving-install` and `serve`
    work, and an unhandled 500 is followed by no 502 for the next requests."""
    nginx = shutil.which("nginx", path=PATH)
    if nginx is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    repo = Path(tempfile.mkdtemp(prefix="existing-repo-"))
    processes = Processes()
    log_path = repo.parent / f"{repo.name}.log"
    try:
        readme = (serving_bake.project / "README.md").read_text(encoding="utf-8")
        (livez,) = [block for block in python_blocks(readme) if '"/livez"' in block]
        app = f"{TUTORIAL_APP}\n\n{livez}{UNGUARDED_ROUTES}"
        (repo / "main.py").write_text(app, encoding="utf-8")
        for name, text in REPOSITORY_FILES.items():
            (repo / name).write_text(text, encoding="utf-8")
        # Step 1, the README's own commands, run from the bake.
        for command in _shell_block(readme, "cp -R -n stack deploy"):
            mine = command.replace("/path/to/your-repo/", f"{repo}/")
            subprocess.run(["sh", "-c", mine], cwd=serving_bake.project, check=True)
        for name, text in REPOSITORY_FILES.items():
            now = (repo / name).read_text(encoding="utf-8")
            assert now.startswith(text), f"{name} was overwritten"
        assert (repo / ".gitignore").read_text(encoding="utf-8").endswith(".run/\n")
        assert ".env" in (repo / ".dockerignore").read_text(encoding="utf-8").splitlines()
        assert (repo / "stack" / "serving_stack").is_dir()
        assert (repo / "deploy" / "Dockerfile").is_file()

        # Step 3, from the repository: the stack and requirements.txt in one pass, then serve.
        install, serve, _image = _shell_block(readme, "serving.mk serve")
        port, metrics_port = free_port(), free_port()
        environment = {
            **os.environ,
            "PATH": PATH,
            "PORT": str(port),
            "METRICS_PORT": str(metrics_port),
            "WEB_CONCURRENCY": "2",
            "NGINX_WORKER_PROCESSES": "1",
            # As root (CI's containers), serving as root is this variable's explicit choice.
            **({"SERVE_AS_ROOT": "on"} if os.geteuid() == 0 else {}),
        }
        environment.pop("VIRTUAL_ENV", None)
        installed = run_captured(["sh", "-c", install], cwd=repo, env=environment)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        process = processes.start("serve", ["sh", "-c", serve], environment, repo, log_path).popen
        base = f"http://127.0.0.1:{port}"
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
            got_status, headers, raw = fetch(f"{base}{path}", timeout=5)
            assert got_status == status, (path, raw)
            if body is not None:
                assert json.loads(raw) == body
            for name, value in SECURITY_HEADERS.items():
                assert headers.get(name) == value, (path, name, headers)
            assert NGINX_REQUEST_ID.fullmatch(headers.get("X-Request-ID", "")), headers
        # Each 500 leaves its upstream connection in nginx's pool: the POST after it may
        # meet it (two workers, one nginx worker keeping their connections).
        statuses = []
        for _ in range(20):
            statuses.append(fetch(f"{base}/boom", b"{}", JSON)[0])
            statuses.extend(fetch(f"{base}/echo", b'{"n": 1}', JSON)[0] for _ in range(3))
        assert statuses.count(500) == 20, statuses
        assert statuses.count(200) == 60, statuses
        log = log_path.read_text(errors="replace")
        assert "Exception in ASGI application after its response was sent" in log

        # Ctrl-C, as a person stops `make serve`: make, its shell and the supervisor all get it.
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=90)
        logged = [json.loads(line) for line in log_path.read_text().splitlines() if line[:1] == "{"]
        assert logged[-1]["message"] == "stopped cleanly", log_path.read_text(errors="replace")
    finally:
        for leftover in list(processes.running):  # nginx and gunicorn too, from the log
            processes.stop(leftover, started(log_path) if log_path.exists() else [])
        shutil.rmtree(repo, ignore_errors=True)
        log_path.unlink(missing_ok=True)


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
    # stack/ too, as if installed (`serving-install`): logs.py formats with the stack's one
    # formatter, serving_stack.JsonFormatter.
    stack = serving_bake.project / "stack"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(stack)])}
    result = run_captured(
        [str(project_env.venv / "bin" / "python"), "-W", "error", "-c", script],
        cwd=tmp_path,
        env=env,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "200 abc-123 {'item_id': 7}"
    access = [json.loads(line) for line in lines[:-1] if line.startswith("{")]
    assert any(
        entry.get("path") == "/items/7" and entry.get("request_id") == "abc-123" for entry in access
    ), result.stdout
