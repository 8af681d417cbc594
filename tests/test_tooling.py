"""The template's own code passes the same strict tools it asks of generated projects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import TEMPLATE_DIR

BIN = Path(sys.executable).parent
# Named explicitly: ruff would otherwise also read the generated project's pyproject.toml,
# which is a Jinja template and not valid TOML until baked.
PYTHON_SOURCES = ["hooks", "local_extensions.py", "tests"]
SHELL_SCRIPTS = [
    TEMPLATE_DIR / ".ci" / "run",
    TEMPLATE_DIR / "scripts" / "test",
    TEMPLATE_DIR / "scripts" / "demo",
    TEMPLATE_DIR / "scripts" / "battery",
    TEMPLATE_DIR / "scripts" / "_setup.sh",
]


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command],
        cwd=TEMPLATE_DIR,
        capture_output=True,
        text=True,
        check=False,
    )


def test_template_python_passes_ruff() -> None:
    """Hooks, the Jinja extension and these tests pass ruff check and ruff format --check."""
    for command in (("check", *PYTHON_SOURCES), ("format", "--check", *PYTHON_SOURCES)):
        result = run(BIN / "ruff", *command)
        assert result.returncode == 0, result.stdout + result.stderr


def test_shell_scripts_pass_shellcheck() -> None:
    """The README's commands and CI's entry point pass shellcheck."""
    result = run(BIN / "shellcheck", "--external-sources", *SHELL_SCRIPTS)
    assert result.returncode == 0, result.stdout + result.stderr
