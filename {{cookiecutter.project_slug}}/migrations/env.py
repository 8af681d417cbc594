"""Alembic's environment: migrate DATABASE_URL with asyncpg against db/models.py's metadata.
A step of its own (`make migrate`, compose's migrate service, the Kubernetes init container),
never in the web workers; runs at once are serialised by a PostgreSQL advisory lock."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from typing import TYPE_CHECKING

from alembic import context
from sqlalchemy import pool, text
from sqlalchemy.ext.asyncio import create_async_engine

from {{ cookiecutter.package_name }}.db.models import Base

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

target_metadata = Base.metadata
# Any constant shared by every run of these migrations: the advisory lock's key.
LOCK_KEY = 0x6D696772617465  # "migrate"


def database_url() -> str:
    """DATABASE_URL for asyncpg (postgres:// and postgresql:// accepted, as by the app)."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        sys.exit("error: DATABASE_URL is not set: export the database's URL to migrate it")
    return re.sub(r"^postgres(?:ql)?://", "postgresql+asyncpg://", url)


def run_offline() -> None:
    """`alembic upgrade head --sql`: print the SQL for a DBA instead of running it."""
    context.configure(url=database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _migrate(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        # Held until this transaction ends; PostgreSQL runs DDL inside transactions, so a
        # second runner waits here, then finds the migrations applied and does nothing.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
        context.run_migrations()


async def run_online() -> None:
    """Connect once (no pool: a one-shot process) and migrate."""
    engine = create_async_engine(database_url(), poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_migrate)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    asyncio.run(run_online())
