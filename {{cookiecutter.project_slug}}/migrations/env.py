"""Alembic's environment: migrate DATABASE_URL with asyncpg against db/models.py's metadata,
never in the web workers; runs take turns (an advisory lock), then obey MIGRATION_LOCK_TIMEOUT
and MIGRATION_STATEMENT_TIMEOUT (docs/database.md, Migrations)."""

import asyncio
import os
import re
import sys
from typing import Any

from alembic import context
from sqlalchemy import pool, text
from sqlalchemy.ext.asyncio import create_async_engine

from {{ cookiecutter.package_name }}.db.models import Base

# Any constant shared by every run of these migrations: the advisory lock's key.
LOCK_KEY = 0x6D696772617465  # "migrate"
# A DDL statement queued behind the pods' transactions holds up every query on its table:
# past the lock timeout the run fails, rolled back, and is retried (docs/database.md).
TIMEOUTS = {
    "lock_timeout": os.environ.get("MIGRATION_LOCK_TIMEOUT", "5s"),
    "statement_timeout": os.environ.get("MIGRATION_STATEMENT_TIMEOUT", "60s"),
}


def database_url() -> str:
    """DATABASE_URL for asyncpg (postgres:// and postgresql:// accepted, as by the app)."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        sys.exit("error: DATABASE_URL is not set: export the database's URL to migrate it")
    return re.sub(r"^postgres(?:ql)?://", "postgresql+asyncpg://", url)


{%- if cookiecutter.jobs == "procrastinate" %}


def _ours(name: str | None, kind: str, _: Any) -> bool:
    """Autogenerate compares the models' tables only: the job queue's are procrastinate's,
    created and changed by their own revisions (0002 and the ones wrapping its migrations)."""
    return not (kind == "table" and (name or "").startswith("procrastinate_"))
{%- endif %}


def _migrate(**where: Any) -> None:
{%- if cookiecutter.jobs == "procrastinate" %}
    context.configure(target_metadata=Base.metadata, include_name=_ours, **where)
{%- else %}
    context.configure(target_metadata=Base.metadata, **where)  # autogenerate's metadata
{%- endif %}
    with context.begin_transaction():
        # Held until the transaction ends: a second run waits, then finds nothing to do.
        context.execute(text("SELECT pg_advisory_xact_lock(:key)").bindparams(key=LOCK_KEY))
        # After the advisory lock, whose wait may be long; for this transaction only.
        for name, value in TIMEOUTS.items():
            set_config = text("SELECT set_config(:name, :value, true)")
            context.execute(set_config.bindparams(name=name, value=value))
        context.run_migrations()


async def run_online() -> None:
    """Connect once (no pool: a one-shot process, whose connection closes with its block)."""
    engine = create_async_engine(database_url(), poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(lambda sync: _migrate(connection=sync))


if context.is_offline_mode():  # `alembic upgrade head --sql`: the same SQL, printed for a DBA
    _migrate(url=database_url(), literal_binds=True)
else:
    asyncio.run(run_online())
