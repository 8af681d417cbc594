"""The lab's database: check that DATABASE_URL answers, and give the items experiment an
item to read.

For a project with the example's database (database=postgresql: lab/project.py sees its
``db`` package). Such an app refuses to start without its database, so the lab calls
`prepare()` before it starts any server: every way the database can be unusable (not set,
refused by the app's settings, not answering, not migrated) is one line saying what to do,
instead of a server's start-up output minutes into the run.

Depends on the project package's settings.py (DATABASE_URL and its checks, read as the app
reads them), db/engine.py (the app's engine), api/items_db.py (its queries) and api/items.py
(the item's model), in the running Python (the project's). It writes to the database: one
item here, and one per request of the create configurations. Point DATABASE_URL at a
scratch database, never at production.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from lab.project import ProjectError

# The flow the project's docs/database.md documents: migrate the scratch database, then measure.
FIX = (
    "export DATABASE_URL=postgresql+asyncpg://user:password@host:5432/scratch; "
    "make migrate in the project, then ./scripts/bench again"
)
# The item the read configurations ask for, by its id.
BENCH_ITEM = {"name": "bench item", "price_cents": 100, "tags": ["bench"]}
# What a database that cannot be used raises here: the driver's errors (wrapped by
# SQLAlchemy), the pool's wait, and asyncpg's connect errors, which arrive unwrapped as
# OSError: refused, reset, timed out (TimeoutError), a host that does not resolve (gaierror).
UNUSABLE = (DBAPIError, PoolTimeoutError, OSError)
# PostgreSQL's SQLSTATE for a missing table: the database was never migrated.
UNDEFINED_TABLE = "42P01"


class DatabaseError(ProjectError):
    """The benchmark cannot use the database; the message says what to do, in one line."""


def _settings(package: str) -> Any:
    """The app's settings, as the servers will read them; their own one-line refusals."""
    try:
        return importlib.import_module(f"{package}.settings").Settings()
    except ValidationError as error:
        reasons = [str(problem["msg"]).removeprefix("Value error, ") for problem in error.errors()]
        if any(reason.startswith("DATABASE_URL is not set") for reason in reasons):
            raise DatabaseError(
                "DATABASE_URL is not set: the benchmark runs the app against a migrated "
                f"scratch database (the items experiment writes rows there); run: {FIX}"
            ) from None
        raise DatabaseError(
            f"the app would refuse to start: {'; '.join(reasons)}; run: {FIX}"
        ) from None


def _reason(error: BaseException) -> str:
    """The cause in one line: asyncpg's own error where SQLAlchemy wrapped it (twice: in its
    DBAPI adapter, then in DBAPIError)."""
    cause = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
    cause = cause.__cause__ or cause
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0]}" if text else type(cause).__name__


async def _create_item(package: str, settings: Any) -> int:
    open_database = importlib.import_module(f"{package}.db.engine").open_database
    queries = importlib.import_module(f"{package}.api.items_db")
    item = importlib.import_module(f"{package}.api.items").ItemIn(**BENCH_ITEM)
    async with open_database(settings) as database, database.sessions() as session:
        return int((await queries.create_item(item, session)).id)


def prepare(package: str) -> int:
    """Check the database answers and is migrated; create the item the benchmark reads.

    Returns the new item's id; raises DatabaseError with the fix when the database cannot
    be used.
    """
    settings = _settings(package)
    try:
        url = make_url(settings.database_url.get_secret_value())
    except (ArgumentError, ValueError):
        # Their messages quote the URL, password and all: say it without them.
        raise DatabaseError(
            "DATABASE_URL does not parse as postgresql+asyncpg://user:password@host:port/name "
            f"(a port must be a number): correct it, then run: {FIX}"
        ) from None
    # Where, without the password: the error must not print a secret.
    where = f"{url.host or 'localhost'}:{url.port or 5432}/{url.database}"
    try:
        return asyncio.run(_create_item(package, settings))
    except UNUSABLE as error:
        if getattr(getattr(error, "orig", None), "sqlstate", None) == UNDEFINED_TABLE:
            raise DatabaseError(
                f"the database at DATABASE_URL ({where}) answered but has no items table: "
                f"run `make migrate` first, or: {FIX}"
            ) from None
        raise DatabaseError(
            f"the database at DATABASE_URL ({where}) cannot be used ({_reason(error)}): "
            f"start it or correct the URL, then run: {FIX}"
        ) from None
