"""Alembic's environment: migrate DATABASE_URL with asyncpg against db/models.py's metadata.
A step of its own (`make migrate`, compose's migrate service, the Kubernetes init container),
never in the web workers; runs at once are serialised by a PostgreSQL advisory lock. Once it
holds the lock, a statement waits at most MIGRATION_LOCK_TIMEOUT for a table's lock and runs
at most MIGRATION_STATEMENT_TIMEOUT (PostgreSQL durations: "5s", "2min"; "0" is no limit)."""

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
# ALTER TABLE queues for its lock behind the running pods' transactions, and every query on
# that table then queues behind it: past 5 s it gives up (the run fails, rolled back; the
# init container retries), so the app's queries wait at most that, far below their own
# statement timeout. A long backfill sets its own: op.execute("SET LOCAL statement_timeout = 0").
TIMEOUTS = {
    "lock_timeout": os.environ.get("MIGRATION_LOCK_TIMEOUT", "5s"),
    # A runaway statement holding a table's lock is an outage of that table: bounded.
    "statement_timeout": os.environ.get("MIGRATION_STATEMENT_TIMEOUT", "60s"),
}


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
        # After the advisory lock, whose wait is meant to be long; for this transaction only.
        for name, value in TIMEOUTS.items():
            parameters = {"name": name, "value": value}
            connection.execute(text("SELECT set_config(:name, :value, true)"), parameters)
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
