"""The database engine and its pool: one per worker, made in the app's lifespan, never at import
(gunicorn forks after importing; a pool opened before would be shared); a database that cannot
answer gives a JSON 503 with Retry-After, other database errors (a bug) stay the error guard's
500. Depends on SQLAlchemy, Starlette and request_context.py (the 503 names the request id)."""

from __future__ import annotations

import logging
import socket
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from starlette.responses import JSONResponse, Response

from {{ cookiecutter.package_name }}.request_context import REQUEST_ID

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from {{ cookiecutter.package_name }}.settings import Settings

logger = logging.getLogger(__name__)

# Shown in pg_stat_activity, so a DBA can tell this service's connections from others'.
APPLICATION_NAME = {{ cookiecutter.project_slug | string_literal }}


@dataclass(frozen=True)
class Database:
    """A worker's engine and the session factory bound to it."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]

    async def ping(self) -> bool:
        """The readiness check (reported, not required: main.py): a round trip through the pool."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
        return True


def pool_size(budget: int, workers: int) -> int:
    """A worker's pool: ``budget // workers`` connections (ValueError if none), no overflow, as
    overflow connections close at each return to a full pool: the lab measured half the share
    as overflow at 290-340 sessions per quick run, not 42, and 1.4-1.7 x fewer requests/s."""
    if workers < 1:
        raise ValueError(f"the worker count must be at least 1, not {workers}")
    share = budget // workers
    if share < 1:
        raise ValueError(
            f"a budget of {budget} connections cannot give each of {workers} workers one"
        )
    return share


def create_engine(settings: Settings) -> AsyncEngine:
    """An engine whose pool is this worker's share of the connection budget."""
    return create_async_engine(
        settings.database_url.get_secret_value(),
        pool_size=pool_size(settings.database_max_connections, settings.workers),
        max_overflow=0,  # the share is the whole pool: pool_size says why
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
                "statement_timeout": str(round(settings.statement_timeout_seconds * 1000)),
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


# The driver's errors (sorted by unavailable()), the pool's wait running out, and asyncpg's
# connect errors, unwrapped: refused or reset, timed out, a name that does not resolve. Not
# OSError as a whole: a file the app fails to read is no database outage.
UNAVAILABLE_ERRORS = (DBAPIError, PoolTimeoutError, ConnectionError, TimeoutError, socket.gaierror)
# SQLSTATEs for "not now": class 08 (connection) by prefix; query canceled (statement timeout,
# fast shutdown), admin/crash shutdown, starting up, too many connections.
_UNAVAILABLE_STATES = frozenset({"57014", "57P01", "57P02", "57P03", "53300"})
# Seconds a client should wait: a restart takes a few, and readiness takes the pod out.
RETRY_AFTER = "2"


def unavailable(exc: Exception) -> bool:
    """Tell whether ``exc`` means the database cannot answer now (rather than a bug)."""
    if not isinstance(exc, DBAPIError):
        return True
    state = str(getattr(exc.orig, "sqlstate", "") or "")
    return exc.connection_invalidated or state.startswith("08") or state in _UNAVAILABLE_STATES


async def database_unavailable(request: Request, exc: Exception) -> Response:
    """The 503 for an unavailable database; the cause goes to the log, not the client."""
    if not unavailable(exc):
        raise exc
    extra = {"error": type(exc).__name__, "path": request.url.path}
    logger.warning("database unavailable", extra=extra)
    # The request id, as in every JSON error body (the 422's, nginx's own 503's).
    detail = "the database is unavailable; retry shortly"
    body = {"detail": detail, "request_id": REQUEST_ID.get()}
    return JSONResponse(body, status_code=503, headers={"Retry-After": RETRY_AFTER})


async def close_session(session: AsyncSession) -> None:
    """Close a request's session even if its connection was lost: a create has committed, so
    its answer stands (a 503 would make the client create it twice); the pool replaces it."""
    try:
        await session.close()
    except UNAVAILABLE_ERRORS as exc:
        if not unavailable(exc):
            raise
        lost = "database connection lost before the session closed"
        logger.warning(lost, extra={"error": type(exc).__name__})
        await session.invalidate()
