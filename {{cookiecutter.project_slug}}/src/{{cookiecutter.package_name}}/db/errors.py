"""A database that cannot answer gives a JSON 503 at once, with Retry-After; other database
errors (a constraint, a bug) stay the error guard's 500. Pool pre-ping heals the service
once the server is back. Depends on Starlette and SQLAlchemy.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession
    from starlette.requests import Request

logger = logging.getLogger(__name__)

# What reaches the app when the database cannot serve: errors from the driver (DBAPIError,
# sorted by unavailable() below), the pool's wait running out, and asyncpg's own connect
# errors, which arrive unwrapped: refused or reset (ConnectionError), the connect timeout
# (TimeoutError), a host name that does not resolve (socket.gaierror). Not OSError as a
# whole: a file the app fails to read is no database outage.
UNAVAILABLE_ERRORS = (DBAPIError, PoolTimeoutError, ConnectionError, TimeoutError, socket.gaierror)
# PostgreSQL's SQLSTATEs for "not now": class 08 (connection exceptions) by prefix; query
# canceled (the statement timeout, or a fast shutdown cancelling it), admin/crash shutdown,
# starting up, too many connections.
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
    body = {"detail": "the database is unavailable; retry shortly"}
    return JSONResponse(body, status_code=503, headers={"Retry-After": RETRY_AFTER})


async def close_session(session: AsyncSession) -> None:
    """Close a request's session, even when the server dropped its connection meanwhile.

    A create has committed by then, so the answer made stands (a 503 would make the client
    create the item twice); the dead connection is invalidated, for the pool to replace.
    """
    try:
        await session.close()
    except UNAVAILABLE_ERRORS as exc:
        if not unavailable(exc):
            raise
        lost = "database connection lost before the session closed"
        logger.warning(lost, extra={"error": type(exc).__name__})
        await session.invalidate()
