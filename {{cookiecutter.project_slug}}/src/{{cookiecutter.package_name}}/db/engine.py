"""The database engine: one per worker, made in the app's lifespan, never at import (gunicorn
forks after importing; a pool opened before would be shared). Depends on SQLAlchemy, pool.py.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from .pool import pool_size

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from {{ cookiecutter.package_name }}.settings import Settings

# Shown in pg_stat_activity, so a DBA can tell this service's connections from others'.
APPLICATION_NAME = {{ cookiecutter.project_slug | string_literal }}


@dataclass(frozen=True)
class Database:
    """A worker's engine and the session factory bound to it."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]

    async def ping(self) -> bool:
        """The readiness check: a round trip to PostgreSQL through the pool."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
        return True


def create_engine(settings: Settings) -> AsyncEngine:
    """An engine whose pool is this worker's share of the connection budget."""
    statement_timeout_ms = round(settings.statement_timeout_seconds * 1000)
    return create_async_engine(
        settings.database_url.get_secret_value(),
        pool_size=pool_size(settings.database_max_connections, settings.workers),
        max_overflow=0,  # the share is the whole pool: pool.py says why
        # Waiting for a free pooled connection fails as fast as opening a new one would.
        pool_timeout=settings.connect_timeout_seconds,
        # A connection the server dropped (a restart, a failover) is found and replaced
        # before a request uses it, instead of failing that request.
        pool_pre_ping=True,
        connect_args={
            "timeout": settings.connect_timeout_seconds,
            "server_settings": {
                # PostgreSQL itself cancels a statement past it: below the request deadline,
                # so the app answers (503) before the deadline middleware's 504.
                "statement_timeout": str(statement_timeout_ms),
                "application_name": APPLICATION_NAME,
            },
        },
    )


@asynccontextmanager
async def open_database(settings: Settings) -> AsyncIterator[Database]:
    """The worker's database for the lifespan of the app; its connections closed after."""
    engine = create_engine(settings)
    try:
        yield Database(engine, async_sessionmaker(engine, expire_on_commit=False))
    finally:
        await engine.dispose()
