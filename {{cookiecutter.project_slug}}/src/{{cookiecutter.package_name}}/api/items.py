"""An example resource to copy, then replace: items kept in memory.

Depends on FastAPI and pydantic only; main.py puts an ``ItemStore`` on ``app.state.items``.

The shape to keep: pydantic models for bodies and answers, and a declared return type on
every endpoint, so FastAPI validates and serialises through pydantic-core (its fast path)
and the models appear in the OpenAPI schema. The store is bounded because anyone who can
reach the service can POST; swap it for your database behind the same dependency.
"""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field, field_validator

router = APIRouter(prefix="/items", tags=["items"])

Tag = Annotated[str, Field(min_length=1, max_length=30)]


class ItemIn(BaseModel):
    """What a client sends to create an item."""

    # Unknown keys are a client bug worth a 422, not something to drop silently; strict,
    # so the API accepts exactly what its schema says (no `false` or "12" as an integer).
    model_config = ConfigDict(extra="forbid", strict=True)

    name: Annotated[str, Field(min_length=1, max_length=100)]
    # Money in integer cents: floats cannot hold 0.10 exactly.
    price_cents: Annotated[int, Field(ge=0, le=100_000_000)]
    tags: Annotated[list[Tag], Field(max_length=10)] = []

    @field_validator("price_cents", mode="before")
    @classmethod
    def _integral_number(cls, value: object) -> object:
        # JSON Schema's "integer" includes 31.0, which strict mode alone would refuse.
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value


class Item(ItemIn):
    """An item as stored, with the id the service gave it."""

    id: int


class ItemStore:
    """Items in memory, at most ``capacity`` of them: an example, not a database."""

    def __init__(self, *, capacity: int = 1000) -> None:
        self.capacity = capacity
        self._items: dict[int, Item] = {}
        self._next_id = 1

    def add(self, new: ItemIn) -> Item | None:
        """Store ``new`` and return it with its id, or None when the store is full."""
        if len(self._items) >= self.capacity:
            return None
        item = Item(id=self._next_id, **new.model_dump())
        self._items[item.id] = item
        self._next_id += 1
        return item

    def get(self, item_id: int) -> Item | None:
        """Return the item ``item_id``, or None."""
        return self._items.get(item_id)

    def page(self, offset: int, limit: int) -> list[Item]:
        """Return up to ``limit`` items after the first ``offset``, oldest first."""
        return list(self._items.values())[offset : offset + limit]


def item_store(request: Request) -> ItemStore:
    """The application's store (a dependency, so tests and databases can replace it)."""
    store: ItemStore = request.app.state.items
    return store


Store = Annotated[ItemStore, Depends(item_store)]


@router.get("")
async def list_items(
    store: Store,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
) -> list[Item]:
    """List items, oldest first, a page at a time."""
    return store.page(offset, limit)


@router.get("/{item_id}", responses={404: {"description": "No such item"}})
async def get_item(item_id: int, store: Store) -> Item:
    """Return one item."""
    item = store.get(item_id)
    if item is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no item {item_id}")
    return item


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={
        # FastAPI's own answer to a body it cannot decode, before validation (422) runs.
        400: {"description": "The body is not valid JSON"},
        409: {"description": "The example store is full"},
    },
)
async def create_item(new: ItemIn, store: Store) -> Item:
    """Create an item from a JSON body and return it with its id."""
    item = store.add(new)
    if item is None:
        raise HTTPException(
            status.HTTP_409_CONFLICT, f"the example store holds at most {store.capacity} items"
        )
    return item
