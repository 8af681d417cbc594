{% if cookiecutter.database == "postgresql" -%}
"""The example item's input model, which items_db.py stores in PostgreSQL."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator
{%- else -%}
"""An example resource to copy, then replace. It keeps no state: the id carries the item
(base64url of its canonical JSON), as a worker's memory is not shared (docs/app.md, Items).
Keep the shape: pydantic models in and out, a declared return type on every endpoint."""

import base64
import binascii
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

{% if cookiecutter.auth == "oidc" -%}
from {{ cookiecutter.package_name }}.auth import require_scopes

{% endif -%}
from .body_limits import max_body_bytes

router = APIRouter(prefix="/items", tags=["items"])
{%- endif %}

Tag = Annotated[str, Field(min_length=1, max_length=30)]
# The largest POST /items body: twice the longest valid item and more for whitespace;
# deploy/nginx-locations.conf's `location = /items` refuses larger ones before the app reads them.
ITEM_BODY_BYTES = 8 * 1024


class ItemIn(BaseModel):
    """What a client sends to create an item."""

    # Unknown keys are a 422; strict: exactly what the schema says (no "12" as an integer).
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
{%- if cookiecutter.database != "postgresql" %}


# The longest item encodes to about 3,300 characters: under this and nginx's 8 KB URI.
MAX_ID_LENGTH = 4096
ItemId = Annotated[str, Field(max_length=MAX_ID_LENGTH, pattern=r"^[A-Za-z0-9_-]+$")]


class Item(ItemIn):
    """An item with its id: the item itself, encoded."""

    id: ItemId


def encode(new: ItemIn) -> Item:
    """Return ``new`` with its id: base64url of its canonical JSON, without padding."""
    raw = new.model_dump_json().encode()
    item_id = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    return Item(id=item_id, **new.model_dump())


def decode(item_id: str) -> Item | None:
    """The item ``item_id`` names: only the exact canonical encoding of a valid item names one."""
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
{%- if cookiecutter.auth == "oidc" %}
        401: {"description": "No valid bearer token"},
        403: {"description": "The token lacks the scope items:write"},
{%- endif %}
    },
    openapi_extra=max_body_bytes(ITEM_BODY_BYTES),
{%- if cookiecutter.auth == "oidc" %}
    # Reads stay open; creating needs a token with this scope (docs/auth.md).
    dependencies=[require_scopes("items:write")],
{%- endif %}
)
async def create_item(new: ItemIn) -> Item:
    """Create an item from a JSON body and return it with its id."""
    return encode(new)
{%- endif %}
