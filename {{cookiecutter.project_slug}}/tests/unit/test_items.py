"""The example items router (api/items.py): no state kept in a worker (an item's id encodes
it). Needs the app (conftest.py's clients); hostile input for every endpoint: test_errors.py."""

import base64

import pytest
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.api.items import MAX_ID_LENGTH, ItemIn, decode
from {{ cookiecutter.package_name }}.main import create_app

from .conftest import ClientFor

NEW = {"name": "lamp", "price_cents": 1999, "tags": ["home"]}


def b64(raw: bytes) -> str:
    """base64url without padding, the alphabet ids are written in."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "item",
    [
        NEW,
        {**NEW, "price_cents": 31.0},  # 31.0 is an integer to JSON Schema, as it promises
        {"name": "\u0001" * 100, "price_cents": 100_000_000, "tags": ["\u0002" * 30] * 10},
    ],
    ids=["plain", "integral float", "largest"],
)
def test_a_created_item_reads_back_from_any_worker(
    client: TestClient, client_for: ClientFor, item: dict[str, object]
) -> None:
    """POST's 201 gives the item and an id that another worker's GET reads it back by."""
    response = client.post("/items", json=item)
    created = response.json()
    assert response.status_code == 201
    assert created == {**ItemIn.model_validate(item).model_dump(), "id": created["id"]}
    assert len(created["id"]) <= MAX_ID_LENGTH
    assert client.post("/items", json=item).json()["id"] == created["id"]
    assert client_for(create_app()).get(f"/items/{created['id']}").json() == created


@pytest.mark.parametrize(
    ("item_id", "status"),
    [
        ("999", 404),
        ("AAAA", 404),
        ("A", 404),
        (b64(b"not json"), 404),
        (b64(b'{"name": "", "price_cents": 1}'), 404),
        (b64(b'{"name": "x", "price_cents": 1, "admin": true}'), 404),
        (b64(b"[" * 5000 + b"]" * 5000)[:MAX_ID_LENGTH], 404),
        # A valid item, but spelled with padding and spaces: not its canonical id.
        (b64(b'{"name": "lamp", "price_cents": 1999, "tags": []}'), 404),
        ("A" * (MAX_ID_LENGTH + 1), 422),
        ("not base64 !", 422),
        ("été", 422),
        ("a+b", 422),
    ],
)
def test_ids_that_name_no_item_are_404_and_non_ids_422(
    client: TestClient, item_id: str, status: int
) -> None:
    """Garbage, hostile or non-canonical ids are a JSON 404, non-base64url ones a 422."""
    response = client.get(f"/items/{item_id}")
    assert response.status_code == status
    if status == 404:
        request_id = response.headers["x-request-id"]
        expected = {"detail": "no such item", "request_id": request_id}
        assert (response.json(), decode(item_id)) == (expected, None)


@pytest.mark.parametrize(
    "body",
    [
        {**NEW, "price_cents": -1},
        {**NEW, "name": ""},
        {**NEW, "colour": "red"},
        {**NEW, "price_cents": False},
        {**NEW, "price_cents": "12"},
        {**NEW, "price_cents": 1.5},
        {**NEW, "tags": "home"},
        {**NEW, "tags": ["x"] * 11},
        {"name": "no price"},
    ],
)
def test_invalid_items_are_422(client: TestClient, body: dict[str, object]) -> None:
    """Negative or fractional prices, empty names, unknown keys, loose types: refused."""
    assert client.post("/items", json=body).status_code == 422
