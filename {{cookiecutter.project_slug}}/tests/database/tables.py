"""Read a test database over its own connection, and what it should hold (the models' tables,
the migrations' head), derived, never written down: a new migration moves the expectations."""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from {{ cookiecutter.package_name }}.db.models import Base

ALEMBIC_INI = str(Path(__file__).resolve().parent.parent.parent / "alembic.ini")
# The project's migrations/, as alembic reads them (``get_revision("head")``: the head).
MIGRATIONS = ScriptDirectory.from_config(Config(ALEMBIC_INI))
# What a database at head holds: the models' tables and alembic's own
{%- if cookiecutter.jobs == "procrastinate" %}, and the job queue's.
QUEUE_TABLES = {"procrastinate_jobs", "procrastinate_events", "procrastinate_workers"}
AT_HEAD = {*Base.metadata.tables, "alembic_version", *QUEUE_TABLES, "procrastinate_periodic_defers"}
{%- else %}.
AT_HEAD = {*Base.metadata.tables, "alembic_version"}
{%- endif %}
Rows = list[tuple[Any, ...]]  # as the driver returns them


def fetch(database: str | Callable[[], AsyncEngine], query: str, **params: object) -> Rows:
    """The rows ``query`` (with ``:name`` parameters) returns on the database at a URL (or on
    a new engine from a factory, the app's own ``create_engine``)."""

    async def rows() -> Rows:
        engine = create_async_engine(database) if isinstance(database, str) else database()
        try:
            async with engine.connect() as connection:
                return [tuple(row) for row in await connection.execute(text(query), params)]
        finally:
            await engine.dispose()

    return asyncio.run(rows())


def state(url: str) -> tuple[set[str], str | None]:
    """The public schema's tables and the revision the database is at (None at base)."""
    tables = fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    version = fetch(url, "SELECT version_num FROM alembic_version")
    return {name for (name,) in tables}, version[0][0] if version else None
