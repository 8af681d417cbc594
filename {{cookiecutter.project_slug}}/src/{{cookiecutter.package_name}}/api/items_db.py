"""The example items resource, stored in PostgreSQL: main.py includes it instead of items.py.
Depends on FastAPI, api/items.py's models and db/ (the lifespan's ``app.state.database``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncSession

from {{ cookiecutter.package_name }}.db import items as queries
from {{ cookiecutter.package_name }}.db.engine import close_session

from .body_limits import max_body_bytes
from .items import ITEM_BODY_BYTES, ItemIn, Tag

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from {{ cookiecutter.package_name }}.db.engine import Database

# PostgreSQL's BIGINT, the type of ids and of OFFSET: past it the query itself would fail.
BIGINT_MAX = 2**63 - 1
# PostgreSQL text cannot hold NUL (valid JSON): a pattern, so the OpenAPI schema says it and
# such a body is a 422, never a failed INSERT (pydantic refuses lone surrogates already).
NO_NUL = r"^[^\x00]*$"
UNAVAILABLE: dict[int | str, dict[str, Any]] = {503: {"description": "The database is unavailable"}}

router = APIRouter(prefix="/items", tags=["items"], responses=UNAVAILABLE)


class NewItem(ItemIn):
    """What a client sends to create an item: ItemIn, in characters PostgreSQL can store."""

    # ItemIn's limits (api/items.py), plus the pattern.
    name: Annotated[str, Field(min_length=1, max_length=100, pattern=NO_NUL)]
    # pydantic copies a field's default for each instance: the shared-list bug RUF012 guards
    # against cannot happen (ruff knows only direct BaseModel subclasses).
    tags: Annotated[list[Annotated[Tag, Field(pattern=NO_NUL)]], Field(max_length=10)] = []  # noqa: RUF012


async def session(request: Request) -> AsyncIterator[AsyncSession]:
    """One session per request from the worker's pool, closed (connection returned) after."""
    database: Database = request.app.state.database
    new_session = database.sessions()
    try:
        yield new_session
    finally:
        await close_session(new_session)


# scope="function": the session closes before the response starts, so its connection is back
# at once and an error closing it still gets an answer (not a cut connection: nginx's 502).
Session = Annotated[AsyncSession, Depends(session, scope="function")]


@router.get("")
async def list_items(
    db: Session,
    offset: Annotated[int, Query(ge=0, le=BIGINT_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
) -> list[queries.StoredItem]:
    """List items, oldest first, a page at a time."""
    return await queries.page(db, offset, limit)


@router.get("/{item_id}", responses={404: {"description": "No such item"}})
async def get_item(item_id: int, db: Session) -> queries.StoredItem:
    """Return one item."""
    # An id outside BIGINT cannot exist; asking PostgreSQL would fail instead of missing.
    item = await queries.get(db, item_id) if 1 <= item_id <= BIGINT_MAX else None
    if item is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no item {item_id}")
    return item


# 400: FastAPI's own answer to a body it cannot decode, before validation (422) runs.
@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={400: {"description": "Not JSON"}, 413: {"description": "Over ITEM_BODY_BYTES"}},
    openapi_extra=max_body_bytes(ITEM_BODY_BYTES),  # nginx enforces it (api/items.py)
)
async def create_item(new: NewItem, db: Session) -> queries.StoredItem:
    """Create an item from a JSON body and return it with its id."""
    return await queries.add(db, new)
