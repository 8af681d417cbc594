"""The generated README's first screen, its links, and the commands it shows, run for real.

`make install` and `make serve` are run by ./scripts/demo (tests/test_readme.py) and
`make test` by tests/test_bake.py; `make run` and `make lock` are run here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import DEFAULT_CONTEXT, Bake, ProjectEnv, bake
from .test_readme import free_port

# What a person sees before scrolling: the title, the description and this many lines.
FIRST_SCREEN_LINES = 45
GETTING_STARTED = ["make install", "make test", "make run", "make serve"]


def sh_blocks(text: str) -> list[list[str]]:
    """The commands of each ```sh block, comments stripped."""
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    return [
        [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
        for block in blocks
    ]


def test_the_first_screen_is_getting_started(default_bake: Bake) -> None:
    """Commands, URLs and where to add things come before any rationale."""
    readme = (default_bake.project / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert next(line for line in lines if line.startswith("## ")) == "## Getting started"
    screen = "\n".join(lines[:FIRST_SCREEN_LINES])
    assert sh_blocks(screen)[0] == GETTING_STARTED
    for needle in [
        "http://127.0.0.1:8000/docs", "/livez", "/readyz", "http://127.0.0.1:9464/metrics",
        "| an endpoint |", "| a setting |", "| a readiness check |", ".env.example",
        "_API_DOCS=true",
    ]:  # fmt: skip
        assert needle in screen, needle
    assert "## How it is served" in readme.split("## Layout", 1)[0]


def test_every_linked_page_exists(default_bake: Bake) -> None:
    """README and docs/ pages link only pages that exist."""
    project = default_bake.project
    missing = []
    for page in [project / "README.md", *sorted((project / "docs").glob("*.md"))]:
        for link in re.findall(r"\]\(([^)#:]+\.md)\)", page.read_text(encoding="utf-8")):
            target = (page.parent / link).resolve()
            if not target.exists():
                missing.append(str(target.relative_to(project)))
    assert sorted(missing) == []


def test_docs_pages_hold_the_moved_rationale(default_bake: Bake) -> None:
    """The timeout chain and the reliability promises live in docs/, not in the README."""
    project = default_bake.project
    readme = (project / "README.md").read_text(encoding="utf-8")
    serving = (project / "docs" / "serving.md").read_text(encoding="utf-8")
    reliability = (project / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert "## The timeout chain" in serving
    assert "## Measuring it" in serving
    assert "./scripts/bench PATH/TO/THIS/PROJECT" in serving
    assert "## The promises and the tests that keep them" in reliability
    for heading in ["## The timeout chain", "## Reliability", "## Benchmark", "## Serving stack"]:
        assert heading not in readme, heading


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:  # noqa: S310 - loopback
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.slow
def test_make_run_serves_the_index_and_the_docs(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path
) -> None:
    """`make run` (development) answers the README's URLs: the index, /docs, the schema."""
    project = default_bake.project
    port = free_port()
    log = tmp_path / "run.log"
    with log.open("w") as output:
        server = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}", f"VENV={project_env.venv}"],
            cwd=project,
            env=project_env.environ(project),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                status, _, body = get(f"{base}/")
                break
            except OSError:
                time.sleep(0.3)
        assert server.poll() is None, log.read_text()
        assert status == 200, log.read_text()
        index = json.loads(body)
        assert index["docs"] == "/docs"
        for link in [index["docs"], index["openapi"], *index["health"]]:
            assert get(f"{base}{link}")[0] == 200, link
        assert "script-src 'self'" in get(f"{base}/docs")[1]["content-security-policy"]
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=30)


def dockerfile_install_step(dockerfile: str) -> str:
    """The build stage's RUN that installs the project, continuation lines joined."""
    joined = dockerfile.replace("\\\n", " ")
    (step,) = [line for line in joined.splitlines() if line.startswith("RUN if [ -f requirements")]
    return step.removeprefix("RUN ")


@pytest.mark.slow
def test_make_lock_writes_what_the_dockerfile_installs(
    tmp_path: Path, project_env: ProjectEnv
) -> None:
    """`make lock` pins every dependency with hashes; the Dockerfile's own step installs it."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if version not in DEFAULT_CONTEXT["python_version"]:  # type: ignore[operator]
        pytest.skip(f"Python {version} is not a python_version answer")
    # The lock is resolved for the image's Python: bake for this interpreter's, to install it.
    baked = bake(tmp_path / "bake", python_version=version)
    assert baked.exit_code == 0, baked.stderr
    project = baked.project

    result = project_env.make(project, "lock")
    assert result.returncode == 0, result.stdout + result.stderr
    lock = (project / "requirements.lock").read_text(encoding="utf-8")
    pins = re.findall(r"^([a-z0-9][a-z0-9._-]*)==\S+", lock, flags=re.MULTILINE)
    assert {"fastapi", "fastapi-offline", "gunicorn", "uvicorn", "pydantic-settings"} <= set(pins)
    for requirement in re.split(r"\n(?=[a-z0-9])", lock.split("\n", 2)[2].strip()):
        assert "--hash=sha256:" in requirement, requirement

    # The Dockerfile's step, verbatim but for the virtualenv's path, in a fresh virtualenv.
    venv = tmp_path / "image-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    step = dockerfile_install_step((project / "Dockerfile").read_text(encoding="utf-8"))
    assert "--require-hashes --requirement requirements.lock" in step
    installed = subprocess.run(
        ["sh", "-c", step.replace("/opt/venv", str(venv))],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c", f"import {baked.package_name}.main"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr
