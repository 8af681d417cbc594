"""Alembic migrations on a real PostgreSQL (conftest.py's ``new_database``, and make): the docs'
commands, down to base and up, no URL refused; asserting "head" (tables.py), never a revision."""

import asyncio
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.config import main as alembic_cli
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from .tables import ALEMBIC_INI, AT_HEAD, MIGRATIONS, state


def test_the_documented_commands_run_and_every_migration_round_trips(
    project_root: Path,
    tmp_path: Path,
    new_database: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In a copy of the project, docs/database.md's commands succeed, as written: make migrate
    twice at once (env.py's lock) reaches head, check agrees, --sql prints DDL, autogenerate
    writes an empty revision, downgrade -1 undoes the newest applied one. Then every migration
    is undone and applied again; before it all, without DATABASE_URL alembic stops in one line
    saying what to set."""
    # The ```sh block that starts with make migrate (`make db`'s: the template's tests run it).
    docs = (project_root / "docs" / "database.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```sh\n(make migrate\n.*?)```", docs, flags=re.DOTALL)
    first, *commands = block.splitlines()
    # A copy, so the new revision lands there; .venv is this interpreter's environment.
    shutil.copytree(project_root / "migrations", tmp_path / "migrations")
    for name in ("Makefile", "alembic.ini"):
        shutil.copy2(project_root / name, tmp_path)
    (tmp_path / ".venv").symlink_to(sys.prefix)
    url = new_database(migrated=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", "")
    message = "error: DATABASE_URL is not set: export the database's URL to migrate it"
    with pytest.raises(SystemExit, match=f"^{message}$"):
        alembic_cli(["upgrade", "head"])
    monkeypatch.setenv("DATABASE_URL", url)

    both = [subprocess.Popen(shlex.split(first), stderr=subprocess.PIPE) for _ in range(2)]
    errors = [run.communicate()[1] for run in both]
    assert [run.returncode for run in both] == [0, 0], errors
    head = MIGRATIONS.get_revision("head")
    assert state(url) == (AT_HEAD, head.revision)
    for command in commands:  # through alembic's own command-line entry point, in process
        program, *arguments = shlex.split(command)
        assert program == ".venv/bin/alembic", command
        alembic_cli(arguments)
    assert "CREATE TABLE" in capsys.readouterr().out
    # The models and migrations agree, so the new revision is empty; it was never applied,
    # so `downgrade -1` undid the newest applied one, the head before it.
    shipped = {path.name for path in (project_root / "migrations/versions").glob("*.py")}
    [new] = [path for path in tmp_path.glob("migrations/versions/*.py") if path.name not in shipped]
    assert "op." not in new.read_text(encoding="utf-8")
    assert state(url)[1] == head.down_revision
    # The project's own migrations (not the copy's new one): down to base, then up again.
    alembic_cli(["-c", ALEMBIC_INI, "downgrade", "base"])
    assert state(url) == ({"alembic_version"}, None)
    alembic_cli(["-c", ALEMBIC_INI, "upgrade", "head"])
    assert state(url) == (AT_HEAD, head.revision)


def test_a_locked_table_makes_the_migration_give_up_after_its_lock_timeout(
    new_database: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction holding a table's lock (an old pod's, say) makes `alembic upgrade` fail
    after MIGRATION_LOCK_TIMEOUT, naming it, instead of queueing every query behind its own."""
    url = new_database()
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MIGRATION_LOCK_TIMEOUT", "1s")

    async def upgrade_while_locked() -> None:
        # No pool: the connection closes with its block, its transaction holding the lock till then.
        async with create_async_engine(url, poolclass=NullPool).connect() as holder:
            await holder.execute(text("LOCK TABLE alembic_version IN ACCESS EXCLUSIVE MODE"))
            upgrade = asyncio.to_thread(alembic_cli, ["-c", ALEMBIC_INI, "upgrade", "head"])
            await asyncio.wait_for(upgrade, 60)  # with no lock timeout, alembic would wait for ever

    with pytest.raises(DBAPIError, match="canceling statement due to lock timeout"):
        asyncio.run(upgrade_while_locked())
