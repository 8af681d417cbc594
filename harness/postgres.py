"""A project's own throwaway PostgreSQL: its tests/pg_server.py (standard library only:
initdb, pg_ctl and createdb of Debian's `postgresql`), loaded from the project's file, so
the server the harness starts is the one the project's `make test` starts.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

MIGRATED = "harness_migrated"  # the template database every copy is made from


class PostgresError(RuntimeError):
    """No server could be started or migrated; the message says why, in one line."""


def pg_server(project: Path) -> ModuleType:
    """The project's tests/pg_server.py as a module."""
    source = project / "tests" / "pg_server.py"
    spec = importlib.util.spec_from_file_location("project_pg_server", source)
    if spec is None or spec.loader is None or not source.is_file():
        raise PostgresError(f"{project} has a database but no {source} to start one with")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start(project: Path) -> Any:
    """A running server (pg_server.PostgresServer: url(), create_database(), remove()...)."""
    module = pg_server(project)
    try:
        return module.start_server()
    except module.ServerError as error:
        raise PostgresError(str(error)) from None


@dataclass
class Database:
    """A running server and a database migrated to head, the template of every copy."""

    server: Any

    def copy(self) -> str:
        """The URL of a new database at the migrations' head, for this caller alone."""
        return str(self.server.create_database(MIGRATED))

    def sessions(self, url: str) -> int:
        """Sessions open on the database at ``url`` (psql's own left out)."""
        query = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        # psql takes the URL libpq's way: without SQLAlchemy's "+asyncpg" driver name.
        libpq = url.replace("+asyncpg://", "://", 1)
        done = subprocess.run(
            [str(self.server.bindir / "psql"), "-d", libpq, "-tAc", query],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return int(done.stdout)

    def running_again(self) -> None:
        """Start the server if a caller left it stopped."""
        if not self.server.running:
            self.server.start()


def migrated(project: Path, python: str) -> Database:
    """A server whose template database the project's interpreter migrated with alembic."""
    server = start(project)
    migrate = [python, "-m", "alembic", "-c", str(project / "alembic.ini"), "upgrade", "head"]
    done = subprocess.run(
        migrate,
        env={**os.environ, "DATABASE_URL": server.create_database("template0", MIGRATED)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        server.remove()
        raise PostgresError(f"the migrations failed: {done.stderr.strip()[-2000:]}")
    return Database(server)
