"""Fixtures every test directory may use. Each directory keeps its own in its conftest.py.
{%- if cookiecutter.database == "postgresql" %}

A throwaway PostgreSQL server (pg_server.py) runs for the whole session, started before
collection: importing main.py builds the app, whose settings read DATABASE_URL. Its
database `app` is migrated to head and is what DATABASE_URL names; tests that need a
database of their own ask ``new_database``.
{% endif -%}
"""

{% if cookiecutter.database == "postgresql" -%}
import asyncio
import itertools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
{% endif -%}
from pathlib import Path

import pytest
{%- if cookiecutter.database == "postgresql" %}
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from pg_server import PostgresServer, ServerError, start_server

PROJECT = Path(__file__).resolve().parent.parent


async def _create_database(server: PostgresServer, name: str, template: str) -> None:
    # CREATE DATABASE cannot run inside a transaction: autocommit.
    engine = create_async_engine(server.url(), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    finally:
        await engine.dispose()


def migrate(url: str, *command: str) -> subprocess.CompletedProcess[str]:
    """Run alembic (default: ``upgrade head``) against ``url``, as `make migrate` does."""
    return subprocess.run(
        [sys.executable, "-m", "alembic", *(command or ("upgrade", "head"))],
        cwd=PROJECT,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


# Migrated once per session, then copied (CREATE DATABASE ... TEMPLATE, a file copy) for
# every test that wants a migrated database: one alembic run instead of one per test.
MIGRATED_TEMPLATE = "migrated_template"
_names = itertools.count(1)


def create_database(server: PostgresServer, *, migrated: bool = True) -> str:
    """A new database on ``server`` (migrated to head unless told not); its URL."""
    name = f"test_{next(_names)}"
    asyncio.run(_create_database(server, name, MIGRATED_TEMPLATE if migrated else "template0"))
    return server.url(name)


def start_migrated_server() -> PostgresServer:
    """A new server whose template database holds the migrations (ServerError if not)."""
    server = start_server()
    asyncio.run(_create_database(server, MIGRATED_TEMPLATE, "template0"))
    result = migrate(server.url(MIGRATED_TEMPLATE))
    if result.returncode != 0:
        server.remove()
        raise ServerError(f"the migrations failed on a fresh database:\n{result.stderr}")
    return server


def _start_session_server() -> PostgresServer:
    try:
        server = start_migrated_server()
    except ServerError as error:
        # One line, not pytest's conftest-import traceback: the fix is outside the code.
        sys.exit(f"error: {error}")
    os.environ["DATABASE_URL"] = create_database(server)
    # The worker count is the live stack's to set; one leaking from the shell would size
    # the unit tests' pools differently.
    for name in ("GUNICORN_WORKERS", "WEB_CONCURRENCY"):
        os.environ.pop(name, None)
    return server


# At import, not in a hook: pytest loads this file before the directories' conftest.py
# files, and those import main.py, whose module-level app reads DATABASE_URL at once.
SERVER = _start_session_server()


def pytest_unconfigure() -> None:
    SERVER.remove()


@pytest.fixture(scope="session")
def postgres() -> PostgresServer:
    """The session's PostgreSQL server."""
    return SERVER


@pytest.fixture
def spare_server() -> Iterator[tuple[PostgresServer, str]]:
    """A server of this test's own to stop and start (the session's stays up), and the URL
    of a migrated database on it."""
    server = start_migrated_server()
    yield server, create_database(server)
    server.remove()


@pytest.fixture
def new_database(postgres: PostgresServer) -> Callable[..., str]:
    """Create a database of this test's own (migrated to head unless ``migrated=False``)."""

    def create(*, migrated: bool = True) -> str:
        return create_database(postgres, migrated=migrated)

    return create


@pytest.fixture(scope="session")
def alembic() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run alembic against a URL: ``alembic(url, "downgrade", "base")``."""
    return migrate
{%- endif %}


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The generated project's top directory (where pyproject.toml is)."""
    return Path(__file__).resolve().parent.parent
