"""The example items router: pydantic models in and out, visible in OpenAPI."""

from fastapi import FastAPI
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.api.items import ItemIn, ItemStore

NEW = {"name": "lamp", "price_cents": 1999, "tags": ["home"]}


def test_post_creates_an_item(client: TestClient) -> None:
    """POST /items with a JSON body answers 201 with the stored item and its id."""
    response = client.post("/items", json=NEW)
    assert response.status_code == 201
    assert response.json() == {**NEW, "id": 1}


def test_get_returns_a_created_item(client: TestClient) -> None:
    """GET /items/{id} returns what POST stored."""
    created = client.post("/items", json=NEW).json()
    response = client.get(f"/items/{created['id']}")
    assert response.status_code == 200
    assert response.json() == created


def test_get_of_an_unknown_item_is_404(client: TestClient) -> None:
    """A missing item is a JSON 404, not a 500."""
    response = client.get("/items/999")
    assert response.status_code == 404
    assert response.json() == {"detail": "no item 999"}


def test_list_pages_through_items(client: TestClient) -> None:
    """GET /items returns items oldest first, ``limit`` at a time from ``offset``."""
    for n in range(3):
        client.post("/items", json={**NEW, "name": f"item {n}"})
    names = [item["name"] for item in client.get("/items", params={"offset": 1, "limit": 1}).json()]
    assert names == ["item 1"]
    assert len(client.get("/items").json()) == 3


def test_list_refuses_an_oversized_page(client: TestClient) -> None:
    """``limit`` is bounded, so one request cannot ask for everything."""
    assert client.get("/items", params={"limit": 101}).status_code == 422


def test_invalid_bodies_are_422(client: TestClient) -> None:
    """Negative prices, empty names, unknown keys and loosely typed values are refused."""
    for body in [
        {**NEW, "price_cents": -1},
        {**NEW, "name": ""},
        {**NEW, "colour": "red"},
        {**NEW, "price_cents": False},
        {**NEW, "price_cents": "12"},
        {**NEW, "tags": "home"},
        {"name": "no price"},
    ]:
        assert client.post("/items", json=body).status_code == 422, body


def test_a_body_without_json_content_type_is_refused(client: TestClient) -> None:
    """FastAPI's strict content type: a JSON body sent as text/plain is not parsed."""
    response = client.post("/items", content=b'{"name": "x", "price_cents": 1}')
    assert response.status_code == 422


def test_the_store_is_bounded(app: FastAPI, client: TestClient) -> None:
    """When the example store is full, POST answers 409 instead of growing memory."""
    app.state.items = ItemStore(capacity=1)
    assert client.post("/items", json=NEW).status_code == 201
    response = client.post("/items", json=NEW)
    assert response.status_code == 409
    assert "at most 1" in response.json()["detail"]


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
