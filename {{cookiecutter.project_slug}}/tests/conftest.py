"""Fixtures every test directory may use. Each directory keeps its own in its conftest.py.
{%- if cookiecutter.database == "postgresql" %}
One PostgreSQL server (pg_server.py) per session; a test that asks gets a migrated database.
{%- endif %}"""

{% if cookiecutter.database == "postgresql" or cookiecutter.auth == "oidc" -%}
import os
{% endif -%}
{% if cookiecutter.database == "postgresql" -%}
import sys
{% endif -%}
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
{%- if cookiecutter.database == "postgresql" %}
from alembic import command as alembic_command
from alembic.config import Config
{%- endif %}
from fastapi.testclient import TestClient
from starlette.types import ASGIApp
{%- if cookiecutter.database == "postgresql" %}

from pg_server import PostgresServer, ServerError, start_server
{%- endif %}
{%- if cookiecutter.auth == "oidc" %}
{%- if cookiecutter.database != "postgresql" %}
{# a blank line: ruff's isort puts the tests' own modules apart #}
{%- endif %}
from token_issuer import AUDIENCE, ISSUER
{%- endif %}

PROJECT = Path(__file__).resolve().parent.parent
{%- if cookiecutter.auth == "oidc" %}
# At import, before main.py builds its app: production refuses to start without an issuer
# and an audience. The tests' in-process issuer (token_issuer.py); nothing fetches from it
# unless a test's app trusts it.
os.environ["{{ cookiecutter.package_name | upper }}_AUTH_ISSUER"] = ISSUER
os.environ["{{ cookiecutter.package_name | upper }}_AUTH_AUDIENCE"] = AUDIENCE
{%- endif %}
{%- if cookiecutter.database == "postgresql" %}
MIGRATED = "migrated_template"


def _start_session_server() -> PostgresServer:
    # Each failure is one line, not pytest's conftest-import traceback: the fix is elsewhere.
    try:
        server = start_server()
    except ServerError as error:
        sys.exit(f"error: {error}")
    # In process; migrations/env.py reads the URL.
    os.environ["DATABASE_URL"] = server.create_database("template0", MIGRATED)
    try:
        alembic_command.upgrade(Config(str(PROJECT / "alembic.ini")), "head")
    except Exception as failed:  # noqa: BLE001 (alembic, the driver, a migration: any of them)
        server.remove()
        sys.exit(f"error: the migrations failed on a fresh database: {failed!r}")
    os.environ["DATABASE_URL"] = server.create_database(MIGRATED)
    # The live stack sets the worker count; one leaking from the shell would size the pools.
    for name in ("GUNICORN_WORKERS", "WEB_CONCURRENCY"):
        os.environ.pop(name, None)
    return server


# At import, not in a hook: the directories' conftest.py import main.py, which reads the URL.
SERVER = _start_session_server()


def pytest_unconfigure() -> None:
    SERVER.remove()


@pytest.fixture
def new_database() -> Callable[..., str]:
    """Create a database of this test's own (migrated to head unless ``migrated=False``)."""
    return lambda *, migrated=True: SERVER.create_database(MIGRATED if migrated else "template0")
{%- endif %}


@pytest.fixture(autouse=True)
def _in_an_empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings read .env from the working directory: a developer's own must not count."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def client_for() -> Iterator[Callable[[ASGIApp], TestClient]]:
    """Start a client of an app, its lifespan running until the test ends; server errors
    come back as the error guard's 500, not as exceptions."""
    with ExitStack() as running:
        yield lambda app: running.enter_context(TestClient(app, raise_server_exceptions=False))


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The generated project's top directory (where pyproject.toml is)."""
    return PROJECT
