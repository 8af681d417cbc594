"""The template's own code passes the same strict tools it asks of generated projects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import TEMPLATE_DIR

BIN = Path(sys.executable).parent
# Named explicitly: ruff would otherwise also read the generated project's pyproject.toml,
# which is a Jinja template and not valid TOML until baked.
# (lab/ and experiments/ have their own stricter configuration: tests/test_bench.py.)
PYTHON_SOURCES = ["hooks", "local_extensions.py", "tests", "battery"]
# Every script in scripts/ (the README's commands, bench, battery, experiments) and CI's.
SHELL_SCRIPTS = [TEMPLATE_DIR / ".ci" / "run", *sorted((TEMPLATE_DIR / "scripts").iterdir())]


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command],
        cwd=TEMPLATE_DIR,
        capture_output=True,
        text=True,
        check=False,
    )


def test_template_python_passes_ruff() -> None:
    """Hooks, the Jinja extension, these tests and the battery pass ruff check and format."""
    for command in (("check", *PYTHON_SOURCES), ("format", "--check", *PYTHON_SOURCES)):
        result = run(BIN / "ruff", *command)
        assert result.returncode == 0, result.stdout + result.stderr


def test_shell_scripts_pass_shellcheck() -> None:
    """The README's commands and CI's entry point pass shellcheck."""
    result = run(BIN / "shellcheck", "--external-sources", *SHELL_SCRIPTS)
    assert result.returncode == 0, result.stdout + result.stderr
