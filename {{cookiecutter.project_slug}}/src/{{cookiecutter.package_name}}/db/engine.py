"""The database engine and its pool, one per worker, opened in the app's lifespan (after
gunicorn forks); an unavailable database is a JSON 503, a database bug stays a 500
(docs/database.md). Depends on SQLAlchemy, Starlette and context.py."""

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from {{ cookiecutter.package_name }}.context import REQUEST_ID
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
        """The readiness check: a round trip through the pool."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
        return True


def create_engine(settings: Settings) -> AsyncEngine:
    """An engine whose pool is this worker's share of the connection budget: at least one
    (settings.py refuses a budget below the worker count), together never over it."""
    return create_async_engine(
        settings.database_url.get_secret_value(),
        pool_size=settings.database_max_connections // settings.workers,
        # Overflow connections close at each return to the pool (docs/database.md, Connections).
        max_overflow=0,
        pool_timeout=settings.database_connect_timeout_seconds,  # a pooled one as fast as a new one
        pool_pre_ping=True,  # replace a connection the server dropped before a request uses it
        # An error's text (and so its log line) without the statement's values: they are the
        # clients' data (an unhandled error logged `[parameters: ...]`).
        hide_parameters=True,
        connect_args={
            "timeout": settings.database_connect_timeout_seconds,
            "server_settings": {
                # Below the request deadline: the app answers 503 before the deadline's 504.
                "statement_timeout": str(round(settings.database_statement_timeout_seconds * 1e3)),
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


# The driver's errors (sorted by unavailable()), the pool's wait, asyncpg's connect errors
# (refused, timed out, a name that does not resolve); not all OSErrors: a file is no database.
UNAVAILABLE_ERRORS = (DBAPIError, PoolTimeoutError, ConnectionError, TimeoutError, socket.gaierror)
# "Not now": class 08 (connection); canceled, shutting down, starting up, too many clients.
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
    body = {"detail": "the database is unavailable; retry shortly", "request_id": REQUEST_ID.get()}
    return JSONResponse(body, status_code=503, headers={"Retry-After": RETRY_AFTER})


async def session(request: Request) -> AsyncIterator[AsyncSession]:
    """A request's session from the worker's pool, closed even if its connection was lost: a
    committed create's answer stands (docs/database.md, When the database is down)."""
    new_session: AsyncSession = request.app.state.database.sessions()
    try:
        yield new_session
    finally:
        try:
            await new_session.close()
        except UNAVAILABLE_ERRORS as exc:
            if not unavailable(exc):
                raise
            lost = "database connection lost before the session closed"
            logger.warning(lost, extra={"error": type(exc).__name__})
            await new_session.invalidate()
