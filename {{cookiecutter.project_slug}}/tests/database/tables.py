"""Look at a test database directly, over its own connection (not the app's pool)."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine


async def fetch_async(url: str, query: str, **params: object) -> list[tuple[object, ...]]:
    """fetch() for code already inside an event loop (an endpoint a test adds to the app)."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            return [tuple(row) for row in await connection.execute(text(query), params)]
    finally:
        await engine.dispose()


def fetch(url: str, query: str, **params: object) -> list[tuple[object, ...]]:
    """The rows ``query`` (with ``:name`` parameters) returns on the database at ``url``."""
    return asyncio.run(fetch_async(url, query, **params))


def tables(url: str) -> set[str]:
    """The tables in the public schema."""
    rows = fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {str(name) for (name,) in rows}
