"""The example items router: pydantic models in and out, no state kept in a worker."""

import base64

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.api.items import MAX_ID_LENGTH, ItemIn, decode, encode

NEW = {"name": "lamp", "price_cents": 1999, "tags": ["home"]}


def b64(raw: bytes) -> str:
    """base64url without padding, the alphabet ids are written in."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_post_creates_an_item(client: TestClient) -> None:
    """POST /items with a JSON body answers 201 with the item and its id."""
    response = client.post("/items", json=NEW)
    assert response.status_code == 201
    body = response.json()
    assert {key: body[key] for key in NEW} == NEW
    assert body["id"]


def test_get_returns_a_created_item(client: TestClient) -> None:
    """GET /items/{id} returns what POST answered."""
    created = client.post("/items", json=NEW).json()
    response = client.get(f"/items/{created['id']}")
    assert response.status_code == 200
    assert response.json() == created


def test_another_app_answers_the_same(client: TestClient) -> None:
    """A second app, as a second worker is, finds the item: nothing lives in one process."""
    created = client.post("/items", json=NEW).json()
    from {{ cookiecutter.package_name }}.main import create_app  # noqa: PLC0415 - a fresh app on purpose

    with TestClient(create_app()) as other_worker:
        assert other_worker.get(f"/items/{created['id']}").json() == created


def test_the_same_item_has_the_same_id() -> None:
    """The id is a function of the item, so retries and replicas agree."""
    assert encode(ItemIn.model_validate(NEW)).id == encode(ItemIn.model_validate(NEW)).id


@pytest.mark.parametrize(
    "item_id",
    [
        "999",
        "AAAA",
        "A",
        b64(b"not json"),
        b64(b'{"name": "", "price_cents": 1}'),
        b64(b'{"name": "x", "price_cents": 1, "admin": true}'),
        b64(b"[" * 5000 + b"]" * 5000)[:MAX_ID_LENGTH],
        # A valid item, but spelled with padding and spaces: not its canonical id.
        b64(b'{"name": "lamp", "price_cents": 1999, "tags": []}'),
    ],
)
def test_ids_that_name_no_item_are_404(client: TestClient, item_id: str) -> None:
    """Garbage, hostile or non-canonical ids are a JSON 404, never a 500."""
    response = client.get(f"/items/{item_id}")
    assert response.status_code == 404
    assert response.json() == {"detail": "no such item"}
    assert decode(item_id) is None


@pytest.mark.parametrize(
    "item_id", ["A" * (MAX_ID_LENGTH + 1), "not base64 !", "\u00e9t\u00e9", "a+b"]
)
def test_ids_that_cannot_be_ids_are_422(client: TestClient, item_id: str) -> None:
    """Too long, or outside base64url's alphabet: refused before decoding."""
    assert client.get(f"/items/{item_id}").status_code == 422


def test_the_largest_item_round_trips(client: TestClient) -> None:
    """The biggest valid item, every character a JSON escape, fits its id's limit."""
    largest = {"name": "\u0001" * 100, "price_cents": 100_000_000, "tags": ["\u0002" * 30] * 10}
    created = client.post("/items", json=largest)
    assert created.status_code == 201
    assert len(created.json()["id"]) <= MAX_ID_LENGTH
    assert client.get(f"/items/{created.json()['id']}").json() == created.json()


def test_invalid_bodies_are_422(client: TestClient) -> None:
    """Negative prices, empty names, unknown keys and loosely typed values are refused."""
    for body in [
        {**NEW, "price_cents": -1},
        {**NEW, "name": ""},
        {**NEW, "colour": "red"},
        {**NEW, "price_cents": False},
        {**NEW, "price_cents": "12"},
        {**NEW, "tags": "home"},
        {**NEW, "tags": ["x"] * 11},
        {"name": "no price"},
    ]:
        assert client.post("/items", json=body).status_code == 422, body


@pytest.mark.parametrize(
    "number",
    [
        b"Infinity",
        b"NaN",
        b"1e999",
        b"-0.5",
        b"1.5",
        b"9" * 5000,
    ],
)
def test_non_finite_and_huge_numbers_are_refused(client: TestClient, number: bytes) -> None:
    """Numbers no price can be are a 4xx, never stored, never a 500."""
    body = b'{"name": "x", "price_cents": ' + number + b"}"
    response = client.post("/items", content=body, headers={"content-type": "application/json"})
    assert response.status_code in {400, 422}, response.text


def test_a_body_without_json_content_type_is_refused(client: TestClient) -> None:
    """FastAPI's strict content type: a JSON body sent as text/plain is not parsed."""
    response = client.post("/items", content=b'{"name": "x", "price_cents": 1}')
    assert response.status_code == 422


def test_the_models_are_in_openapi(app: FastAPI) -> None:
    """The schema names the request and response models, so clients can be generated."""
    schema = app.openapi()
    post = schema["paths"]["/items"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("ItemIn")
    assert post["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/Item"
    )
    assert {"Item", "ItemIn"} <= set(schema["components"]["schemas"])


def test_item_in_is_usable_directly() -> None:
    """The models validate on their own, for use outside HTTP (tasks, scripts)."""
    assert ItemIn.model_validate(NEW).price_cents == 1999


def test_an_undecodable_body_is_a_documented_400(app: FastAPI, client: TestClient) -> None:
    """Bytes that are not JSON get FastAPI's 400, which the schema lists for clients."""
    response = client.post(
        "/items", content=b"\x1a\xffb\x03l", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "400" in app.openapi()["paths"]["/items"]["post"]["responses"]


def test_an_integral_number_is_an_integer(client: TestClient) -> None:
    """31.0 is an integer to JSON Schema, so the API accepts it as the schema promises."""
    response = client.post("/items", json={**NEW, "price_cents": 31.0})
    assert response.status_code == 201
    assert response.json()["price_cents"] == 31
