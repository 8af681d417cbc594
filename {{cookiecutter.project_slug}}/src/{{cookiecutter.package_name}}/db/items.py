"""The items' queries, the only module that knows how items are stored. Depends on SQLAlchemy
2 (asyncio), models.py and the API's input model (api/items.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ConfigDict
from sqlalchemy import select

from {{ cookiecutter.package_name }}.api.items import ItemIn

from .models import ItemRow

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession


class StoredItem(ItemIn):
    """An item as stored: its fields and the id PostgreSQL gave it (the row's number)."""

    model_config = ConfigDict(from_attributes=True)  # validated from an ItemRow
    id: int


async def add(session: AsyncSession, new: ItemIn) -> StoredItem:
    """Insert ``new`` and return it with the id PostgreSQL gave it (committed)."""
    row = ItemRow(name=new.name, price_cents=new.price_cents, tags=list(new.tags))
    session.add(row)
    await session.commit()
    return StoredItem.model_validate(row)


async def get(session: AsyncSession, item_id: int) -> StoredItem | None:
    """The item ``item_id``, or None."""
    row = await session.get(ItemRow, item_id)
    return None if row is None else StoredItem.model_validate(row)


async def page(session: AsyncSession, offset: int, limit: int) -> list[StoredItem]:
    """``limit`` items after ``offset``, oldest first (deep pages: ``WHERE id > :last_id``)."""
    rows = await session.scalars(select(ItemRow).order_by(ItemRow.id).offset(offset).limit(limit))
    return [StoredItem.model_validate(row) for row in rows]
