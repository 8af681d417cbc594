"""Every command docs/database.md shows runs, verbatim, in a copy of the project (the
Benchmark section's in test_bench.py)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from .tables import fetch, tables

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def doc_commands(project_root: Path, section: str) -> list[str]:
    """The lines of the ```sh blocks in one section (## heading) of docs/database.md."""
    text = (project_root / "docs" / "database.md").read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", body, flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_the_documented_commands_run(
    project_root: Path, tmp_path: Path, new_database: Callable[..., str]
) -> None:
    """make migrate, check, --sql, revision --autogenerate and downgrade succeed in turn."""
    commands = doc_commands(project_root, "Migrations")
    assert commands[0] == "make migrate"
    # A copy, so the new revision lands there; .venv is this interpreter's environment.
    for name in ("Makefile", "alembic.ini", "migrations", "src"):
        source = project_root / name
        copy = shutil.copytree if source.is_dir() else shutil.copy2
        copy(source, tmp_path / name)
    (tmp_path / ".venv").symlink_to(sys.prefix)
    url = new_database(migrated=False)
    env = {**os.environ, "DATABASE_URL": url}
    for command in commands:
        result = subprocess.run(
            shlex.split(command), cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"

    # The models and migrations agree, so the new revision is empty; it was never applied,
    # so `downgrade -1` undid the last applied one, 0001: no items table any more.
    (revision,) = (tmp_path / "migrations" / "versions").glob("*describe_the_change*")
    assert "op." not in revision.read_text(encoding="utf-8")
    assert tables(url) == {"alembic_version"}
    assert fetch(url, "SELECT count(*) FROM alembic_version") == [(0,)]
