"""Look at a test database directly, over its own connection (not the app's pool), and at
what the project itself says it should hold: the models' tables, the migrations' head.

Derived from the project, never written down here, so a migration added the documented way
(docs/database.md) changes what the tests expect with it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from {{ cookiecutter.package_name }}.db.models import Base

ALEMBIC_INI = Path(__file__).resolve().parent.parent.parent / "alembic.ini"


async def fetch_async(url: str, query: str, **params: object) -> list[tuple[object, ...]]:
    """fetch() for code already inside an event loop (an endpoint a test adds to the app)."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            return [tuple(row) for row in await connection.execute(text(query), params)]
    finally:
        await engine.dispose()


def fetch(url: str, query: str, **params: object) -> list[tuple[object, ...]]:
    """The rows ``query`` (with ``:name`` parameters) returns on the database at ``url``."""
    return asyncio.run(fetch_async(url, query, **params))


def tables(url: str) -> set[str]:
    """The tables in the public schema."""
    rows = fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {str(name) for (name,) in rows}


def revision(url: str) -> str | None:
    """The revision the database is at (alembic_version), None when at base."""
    rows = fetch(url, "SELECT version_num FROM alembic_version")
    return str(rows[0][0]) if rows else None


def migrations() -> ScriptDirectory:
    """The project's migrations/, as alembic reads them."""
    return ScriptDirectory.from_config(Config(str(ALEMBIC_INI)))


def head() -> str:
    """The newest revision: what `alembic upgrade head` reaches."""
    newest = migrations().get_current_head()
    assert newest is not None, "migrations/ holds no revision"
    return newest


# What a database at head holds: the models' tables and alembic's own.
AT_HEAD = {*Base.metadata.tables, "alembic_version"}
