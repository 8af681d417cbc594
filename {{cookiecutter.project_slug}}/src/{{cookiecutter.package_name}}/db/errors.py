"""A database that cannot be reached answers 503 at once, as JSON, instead of a 500.

Depends on Starlette and SQLAlchemy. While PostgreSQL restarts or fails over, requests that
need it fail fast (connection refused, or the pool's wait bounded by the connect timeout)
with a Retry-After; pool pre-ping replaces the dead connections, so the service recovers
by itself once the server is back, with no restart. Other database errors (a constraint,
a bug in a query) stay 500s: they are not the database being away.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:
    from starlette.requests import Request

logger = logging.getLogger(__name__)

# What SQLAlchemy raises when the server is down, restarting, refusing connections, or the
# pool cannot hand out a connection in time. OSError: asyncpg's own connect errors
# (ConnectionRefusedError, socket timeouts) that reach the app unwrapped.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    DisconnectionError,
    PoolTimeoutError,
    OSError,
)
# Seconds a client should wait: a restart takes a few, and readiness takes the pod out.
RETRY_AFTER = "2"


async def database_unavailable(request: Request, exc: Exception) -> Response:
    """The 503 for any of UNAVAILABLE_ERRORS; the cause goes to the log, not the client."""
    logger.warning(
        "database unavailable",
        extra={"error": type(exc).__name__, "path": request.url.path},
    )
    return JSONResponse(
        {"detail": "the database is unavailable; retry shortly"},
        status_code=503,
        headers={"Retry-After": RETRY_AFTER},
    )
