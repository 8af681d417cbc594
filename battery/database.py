"""The battery's PostgreSQL, for a service with a database (database=postgresql: alembic.ini).

The project's own throwaway server (its tests/pg_server.py, standard library only: initdb,
pg_ctl and createdb of Debian's `postgresql`) runs for the session; the service's interpreter
migrates a template database to head with alembic, and DATABASE_URL names a copy of it, so
the app builds (at import it reads the URL) and every stack of the session serves from it.
A test may ask for a fresh copy of its own and stop and start the server.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pathlib import Path

MIGRATED = "battery_migrated"


@dataclass
class Database:
    """The running server (tests/pg_server.py's PostgresServer) and its migrated template."""

    server: Any
    user: str

    def copy(self) -> str:
        """The URL of a new database at the migrations' head, for this caller alone."""
        url: str = self.server.create_database(MIGRATED)
        return url

    def sessions(self, url: str) -> int:
        """Sessions open on the database at ``url`` (psql's own left out)."""
        query = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        name = url.rsplit("/", 1)[1]
        address = ["-h", "127.0.0.1", "-p", str(self.server.port), "-U", self.user, "-d", name]
        done = subprocess.run(
            [str(self.server.bindir / "psql"), *address, "-tAc", query],
            env={**os.environ, "PGPASSWORD": self.server.password},
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return int(done.stdout)

    def running_again(self) -> None:
        """Start the server if a test left it stopped."""
        if not self.server.running:
            self.server.start()


def start_database(project: Path, python: str) -> Database | None:
    """The project's server, migrated, DATABASE_URL set; None for a service without a database.

    A refusal (no pg_server.py, no PostgreSQL binaries, a failed migration) is one line.
    """
    if not (project / "alembic.ini").is_file():
        return None
    source = project / "tests" / "pg_server.py"
    spec = importlib.util.spec_from_file_location("service_pg_server", source)
    if spec is None or spec.loader is None or not source.is_file():
        raise pytest.UsageError(f"{project} has a database but no {source} to start one with")
    pg_server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pg_server)
    try:
        server = pg_server.start_server()
    except pg_server.ServerError as error:
        raise pytest.UsageError(f"the service has a database: {error}") from None
    migrated = subprocess.run(
        [python, "-m", "alembic", "-c", str(project / "alembic.ini"), "upgrade", "head"],
        env={**os.environ, "DATABASE_URL": server.create_database("template0", MIGRATED)},
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    if migrated.returncode != 0:
        server.remove()
        raise pytest.UsageError(f"the migrations failed: {migrated.stderr.strip()[-2000:]}")
    database = Database(server, pg_server.USER)
    os.environ["DATABASE_URL"] = database.copy()
    return database
