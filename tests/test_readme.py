"""Every command the template README shows is run: `scripts/test` by CI, `scripts/demo` here."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.ports import free_port

from .conftest import TEMPLATE_DIR, run_captured

README = TEMPLATE_DIR / "README.md"
CI_RUN = TEMPLATE_DIR / ".ci" / "run"


def readme_commands() -> list[str]:
    """The lines of the README's ```sh blocks, which are the commands a person runs."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_shows_the_demo_and_test_commands() -> None:
    """The README's quick start is exactly the two scripts this suite and CI run."""
    commands = readme_commands()
    assert "./scripts/demo" in commands
    assert "./scripts/test" in commands


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """.ci/run executes the README's test command and nothing else."""
    executed = [
        line for line in CI_RUN.read_text(encoding="utf-8").splitlines() if line.startswith("exec ")
    ]
    assert executed == ["exec ./scripts/test"]


def test_ci_usage_example_bakes(tmp_path: Path) -> None:
    """The README's cookiecutter --no-input line, pointed at this checkout, bakes a project."""
    text = README.read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.startswith("cookiecutter --no-input")]
    arguments = shlex.split(line.replace("<path-or-git-url-of-this-template>", str(TEMPLATE_DIR)))
    result = run_captured([sys.executable, "-m", *arguments, "--output-dir", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "billing-api" / "src" / "billing_api" / "main.py").is_file()


def run_demo(log: Path, port: int) -> tuple[list[str], str]:
    """Run ./scripts/demo until it announces it is ready; stop it with Ctrl-C (SIGINT).

    Returns the URLs it announced, each already fetched with its status checked, and its
    whole output. The demo must exit 0 after the interrupt.
    """
    with log.open("w") as output:
        demo = subprocess.Popen(
            ["./scripts/demo"],
            cwd=TEMPLATE_DIR,
            env={**os.environ, "PORT": str(port)},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and demo.poll() is None:
            if "==> ready:" in log.read_text():
                break
            time.sleep(0.5)
        text = log.read_text()
        assert "==> ready:" in text, text
        time.sleep(0.5)  # the URL lines follow the ready line
        urls = re.findall(rf"^    (http://127\.0\.0\.1:{port}/\S*)", log.read_text(), re.MULTILINE)
        for url in urls:
            with urllib.request.urlopen(url, timeout=10) as reply:  # noqa: S310 - loopback
                assert reply.status == 200, url
                assert reply.headers.get("X-Request-ID"), f"{url} did not come through the app"
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        exit_code = demo.wait(timeout=60)
    text = log.read_text()
    assert exit_code == 0, text
    return urls, text


@pytest.mark.slow
def test_demo_bakes_serves_and_reuses_its_environment(tmp_path: Path) -> None:
    """./scripts/demo shows progress, serves URLs that answer, then reuses its bake."""
    port = free_port()
    urls, first = run_demo(tmp_path / "first.log", port)
    assert {f"http://127.0.0.1:{port}{path}" for path in ["/", "/docs", "/livez"]} <= set(urls)
    assert "==> make install" in first or "==> reusing build/demo" in first, first

    _, second = run_demo(tmp_path / "second.log", port)
    assert "==> reusing build/demo" in second, second
    assert "make install" not in second, "the unchanged template was installed again"


# What a person sees of the README before scrolling.
FIRST_SCREEN_LINES = 40


def test_the_first_screen_answers_what_why_and_how() -> None:
    """Within the first screen: what a bake is, why nginx and gunicorn rather than `fastapi
    run` with the measured trade both ways and a link to its tables, the bake command, how to
    run and test a bake, and the two scripts of this checkout."""
    text = README.read_text(encoding="utf-8")
    screen = "\n".join(text.splitlines()[:FIRST_SCREEN_LINES])
    what = ["nginx", "gunicorn", "uv.lock"]
    why = ["`fastapi run --workers N`", "0.94 x", "0.18-0.21 x", "0.74-0.80 x"]
    how = ["cookiecutter --no-input", "make install", "make test", "make serve"]
    here = ["./scripts/demo", "./scripts/test", "(#against-the-servers-users-pick-instead)"]
    for needle in [*what, *why, *how, *here]:
        assert needle in screen, needle
    # The link's target: the peers tables, whose figures the first screen quotes.
    peers = text.split("### Against the servers users pick instead", 1)[1].split("\n## ", 1)[0]
    for figure in ["(0.94 x)", "(0.18 x)", "(0.21 x)", "(0.80 x)", "(0.74 x)"]:
        assert figure in peers, figure
