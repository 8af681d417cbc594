"""The example items resource, stored in PostgreSQL: its routes and its queries, the only code
that knows how items are stored (docs/database.md).{% if cookiecutter.jobs == "procrastinate" %} Creating one queues a job announcing it
(docs/jobs.md).{% endif %} Depends on FastAPI, SQLAlchemy 2 (asyncio),
api/items.py's model and db/ (the lifespan's ``app.state.database``)."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, status
from pydantic import ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

{% if cookiecutter.auth == "oidc" -%}
from {{ cookiecutter.package_name }}.auth import require_scopes
{% endif -%}
from {{ cookiecutter.package_name }}.db.engine import session
from {{ cookiecutter.package_name }}.db.models import ItemRow
{%- if cookiecutter.jobs == "procrastinate" %}
from {{ cookiecutter.package_name }}.jobs.defer import defer
from {{ cookiecutter.package_name }}.jobs.tasks import announce_item
{%- endif %}

from .body_limits import max_body_bytes
from .items import ITEM_BODY_BYTES, ItemIn, Tag

# PostgreSQL's BIGINT, of ids and OFFSET: past it the query itself would fail.
BIGINT_MAX = 2**63 - 1
# PostgreSQL text cannot hold NUL: a pattern, so the schema says so and it is a 422, not a 500.
NO_NUL = r"^[^\x00]*$"
UNAVAILABLE: dict[int | str, dict[str, Any]] = {503: {"description": "The database is unavailable"}}

router = APIRouter(prefix="/items", tags=["items"], responses=UNAVAILABLE)


class NewItem(ItemIn):
    """What a client sends to create an item: ItemIn, in characters PostgreSQL can store."""

    name: Annotated[str, Field(min_length=1, max_length=100, pattern=NO_NUL)]
    # RUF012: ruff misses that this is a pydantic model, which copies the default per instance.
    tags: Annotated[list[Annotated[Tag, Field(pattern=NO_NUL)]], Field(max_length=10)] = []  # noqa: RUF012


class StoredItem(ItemIn):
    """An item as stored: its fields and the id PostgreSQL gave it (the row's number)."""

    model_config = ConfigDict(from_attributes=True)  # validated from an ItemRow
    id: int


# scope="function": closed before the response starts, so an error closing it gets an answer.
Session = Annotated[AsyncSession, Depends(session, scope="function")]


@router.get("")
async def list_items(
    db: Session,
    offset: Annotated[int, Query(ge=0, le=BIGINT_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
) -> list[StoredItem]:
    """List items, oldest first, a page at a time."""
    # OFFSET reads the rows it skips: deep pages would want ``WHERE id > :last_id``.
    rows = await db.scalars(select(ItemRow).order_by(ItemRow.id).offset(offset).limit(limit))
    return [StoredItem.model_validate(row) for row in rows]


@router.get("/{item_id}", responses={404: {"description": "No such item"}})
async def get_item(item_id: int, db: Session) -> StoredItem:
    """Return one item."""
    # An id outside BIGINT cannot exist; asking PostgreSQL would fail instead of missing.
    row = await db.get(ItemRow, item_id) if 1 <= item_id <= BIGINT_MAX else None
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no item {item_id}")
    return StoredItem.model_validate(row)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={400: {"description": "Not JSON"}, 413: {"description": "Over ITEM_BODY_BYTES"}},
    openapi_extra=max_body_bytes(ITEM_BODY_BYTES),  # nginx enforces it (api/items.py)
{%- if cookiecutter.auth == "oidc" %}
    # Reads stay open; creating needs a token with this scope (docs/auth.md): 401 or 403.
    dependencies=[require_scopes("items:write")],
{%- endif %}
)
async def create_item(new: NewItem, db: Session) -> StoredItem:
    """Create an item from a JSON body and return it, committed, with PostgreSQL's id."""
    row = ItemRow(name=new.name, price_cents=new.price_cents, tags=list(new.tags))
    db.add(row)
{%- if cookiecutter.jobs == "procrastinate" %}
    await db.flush()  # PostgreSQL's id, for the job; nothing is committed yet
    item = StoredItem.model_validate(row)
    # In the same transaction: the job is queued if and only if the item is stored.
    await defer(db, announce_item, item=item.model_dump(), idempotency_key=f"item-{row.id}")
    await db.commit()
    return item
{%- else %}
    await db.commit()
    return StoredItem.model_validate(row)
{%- endif %}
