"""The generated README's first screen, its links, and the commands it shows, run for real.

`make install` and `make serve` are run by ./scripts/demo (tests/test_readme.py) and
`make test` by tests/test_bake.py, `make lock` by the image suites (tests/images.py: the image
installs the lock with --require-hashes); `make run` is run here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.clients import fetch
from harness.ports import free_port

from .conftest import Bake, ProjectEnv

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
        "http://127.0.0.1:8000/docs",
        "/livez",
        "/readyz",
        "http://127.0.0.1:9464/metrics",
        "| an endpoint |",
        "| a setting |",
        "| a readiness check |",
        ".env.example",
        "_API_DOCS=true",
    ]:
        assert needle in screen, needle
    assert "## How it is served" in readme.split("## Layout", 1)[0]


@pytest.mark.parametrize("fixture", ["default_bake", "kubernetes_bake"])
def test_every_linked_page_exists(request: pytest.FixtureRequest, fixture: str) -> None:
    """README and docs/ pages link only pages that exist, with docs/kubernetes.md (opt-in) and
    without."""
    project = request.getfixturevalue(fixture).project
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
                status, _, body = fetch(f"{base}/")
                break
            except OSError:
                time.sleep(0.3)
        assert server.poll() is None, log.read_text()
        assert status == 200, log.read_text()
        index = json.loads(body)
        assert index["docs"] == "/docs"
        for link in [index["docs"], index["openapi"], *index["health"]]:
            assert fetch(f"{base}{link}")[0] == 200, link
        assert "script-src 'self'" in fetch(f"{base}/docs")[1]["content-security-policy"]
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=30)
