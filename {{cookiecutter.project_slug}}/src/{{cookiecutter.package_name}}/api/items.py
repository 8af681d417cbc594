"""An example resource to copy, then replace. It keeps no state: the id carries the item.

Depends on FastAPI and pydantic only. Why no store: the service runs several worker processes
and, in production, several containers; a dict in one worker's memory would make a GET after
a POST answer 200 or 404 depending on which worker took it. State belongs in a database
shared by every worker; until you add one, the item's id is the item itself (base64url of its
canonical JSON). Replace ``encode``/``decode`` with your database.

The shape to keep: pydantic models for bodies and answers, and a declared return type on
every endpoint, so FastAPI validates and serialises through pydantic-core (its fast path)
and the models appear in the OpenAPI schema.
"""

import base64
import binascii
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .body_limits import max_body_bytes

router = APIRouter(prefix="/items", tags=["items"])

Tag = Annotated[str, Field(min_length=1, max_length=30)]
# The longest item (a 100-character name and 10 tags of 30, each character at worst a 6-byte
# JSON escape) encodes to about 3,300 characters: under this, and under nginx's 8 KB
# request line. Ids are base64url, so the URL needs no escaping and stays that short.
MAX_ID_LENGTH = 4096
ItemId = Annotated[str, Field(max_length=MAX_ID_LENGTH, pattern=r"^[A-Za-z0-9_-]+$")]
# The largest POST /items body: the longest valid item is about 3,300 bytes of JSON; twice
# that and more for a client's whitespace. nginx refuses larger ones (deploy/nginx.conf's
# `location = /items`, 8k), so the worst body costs validation 8 KiB, not 1 MiB.
ITEM_BODY_BYTES = 8 * 1024


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
    """An item with its id: the item itself, encoded."""

    id: ItemId


def encode(new: ItemIn) -> Item:
    """Return ``new`` with its id: base64url of its canonical JSON, without padding."""
    raw = new.model_dump_json().encode()
    item_id = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    return Item(id=item_id, **new.model_dump())


def decode(item_id: str) -> Item | None:
    """Return the item ``item_id`` names, or None when it names none.

    The id comes from the client: anything that is not exactly the canonical encoding of a
    valid item (bad base64, not JSON, invalid fields, another spelling) names no item.
    """
    try:
        raw = base64.urlsafe_b64decode(item_id + "=" * (-len(item_id) % 4))
        item = encode(ItemIn.model_validate_json(raw))
    except (binascii.Error, ValueError, ValidationError):
        return None
    return item if item.id == item_id else None


@router.get("/{item_id}", responses={404: {"description": "No such item"}})
async def get_item(
    item_id: Annotated[str, Path(max_length=MAX_ID_LENGTH, pattern=r"^[A-Za-z0-9_-]+$")],
) -> Item:
    """Return one item."""
    item = decode(item_id)
    if item is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such item")
    return item


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={
        # FastAPI's own answer to a body it cannot decode, before validation (422) runs.
        400: {"description": "The body is not valid JSON"},
        413: {"description": "The body is over ITEM_BODY_BYTES (nginx's answer)"},
    },
    openapi_extra=max_body_bytes(ITEM_BODY_BYTES),
)
async def create_item(new: ItemIn) -> Item:
    """Create an item from a JSON body and return it with its id."""
    return encode(new)
