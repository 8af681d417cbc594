"""The items API on a real PostgreSQL, in process, and the service when the database is slow,
down or drops a connection. Needs the session's server (tests/conftest.py's fixtures)."""

import asyncio
import json
from collections.abc import Callable

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx2 import Response
from pydantic import SecretStr
from sqlalchemy.exc import DBAPIError

from {{ cookiecutter.package_name }}.api import items_db as queries
from {{ cookiecutter.package_name }}.api.items_db import BIGINT_MAX, NO_NUL
from {{ cookiecutter.package_name }}.db.engine import (
    APPLICATION_NAME,
    create_engine,
    unavailable,
)
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import Settings

{%- if cookiecutter.auth == "oidc" %}

from token_issuer import SHARED, bearer, trusting
{%- endif %}

from .tables import fetch

NEW = {"name": "lamp", "price_cents": 1999, "tags": ["home"]}
UNAVAILABLE = {"detail": "the database is unavailable; retry shortly"}


def unavailable_503(response: Response) -> bool:
    """The database's JSON 503: its detail and the request id the response header carries."""
    expected = {**UNAVAILABLE, "request_id": response.headers["x-request-id"]}
    return (response.status_code, response.json()) == (503, expected)


@pytest.fixture
def url(new_database: Callable[..., str]) -> str:
    """A migrated database of this test's own."""
    return new_database()


def app_on(url: str) -> FastAPI:
{%- if cookiecutter.auth == "oidc" %}
    return trusting(create_app(Settings(database_url=SecretStr(url))))
{%- else %}
    return create_app(Settings(database_url=SecretStr(url)))
{%- endif %}


@pytest.fixture
def client(url: str, client_for: Callable[[FastAPI], TestClient]) -> TestClient:
{%- if cookiecutter.auth == "oidc" %}
    """The app on ``url``, its lifespan (engine, readiness check) running; a writer's token."""
    client = client_for(app_on(url))
    client.headers.update(bearer(SHARED.token()))
    return client
{%- else %}
    """The app on ``url``, its lifespan (engine, readiness check) running."""
    return client_for(app_on(url))
{%- endif %}


def test_items_are_stored_read_back_and_paged(client: TestClient, url: str) -> None:
    """POST's 201 gives PostgreSQL's id and stores the row as sent; GET and paging read it."""
    names = ["Zoë 日本語 😀 \u200b\ufeff", *(f"item {n}" for n in range(4))]
    created = [client.post("/items", json={**NEW, "name": name}) for name in names]
    assert {response.status_code for response in created} == {201}
    first = created[0].json()
    assert first == {**NEW, "name": names[0], "id": first["id"]}
    row = fetch(url, "SELECT name, tags FROM items WHERE id = :id", id=first["id"])
    assert row == [(names[0], ["home"])]
    assert client.get(f"/items/{first['id']}").json() == first
    ids = [response.json()["id"] for response in created]
    pages = [client.get("/items", params={"offset": o, "limit": 2}).json() for o in (0, 2, 4, 6)]
    assert [[item["id"] for item in page] for page in pages] == [ids[0:2], ids[2:4], ids[4:], []]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        *((f"/items/{item_id}", 404) for item_id in ["999", "0", "-1", str(BIGINT_MAX + 1)]),
        (f"/items?offset={BIGINT_MAX}", 200),
        (f"/items?offset={BIGINT_MAX + 1}", 422),
        ("/items?offset=-1", 422),
        ("/items?limit=0", 422),
        ("/items?limit=101", 422),
    ],
)
def test_ids_and_pages_out_of_range(client: TestClient, path: str, status: int) -> None:
    """Ids outside the table are a JSON 404, offsets past BIGINT or bad limits a 422."""
    response = client.get(path)
    assert response.status_code == status
    if status == 404:
        detail = f"no item {path.rsplit('/', 1)[1]}"
        assert response.json() == {"detail": detail, "request_id": response.headers["x-request-id"]}


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({**NEW, "name": "nul\u0000byte"}),
        json.dumps({**NEW, "tags": ["ok", "t\u0000"]}),
        '{"name": "\\ud800 lone surrogate", "price_cents": 1}',
        json.dumps({**NEW, "price_cents": 2**63}),
        json.dumps({**NEW, "id": 7}),
    ],
    ids=["nul", "nul-tag", "surrogate", "huge", "own-id"],
)
def test_unstorable_bodies_are_422_and_store_nothing(
    client: TestClient, url: str, body: str
) -> None:
    """What PostgreSQL cannot hold is refused before it, and the schema gives the pattern."""
    response = client.post("/items", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert fetch(url, "SELECT count(*) FROM items") == [(0,)]
    schema = app_on(url).openapi()["components"]["schemas"]["NewItem"]["properties"]
    assert (schema["name"]["pattern"], schema["tags"]["items"]["pattern"]) == (NO_NUL, NO_NUL)


def test_the_engine_applies_its_settings_and_only_unavailability_is_a_503(url: str) -> None:
    """The pool holds the worker's share (budget // workers: together within the budget),
    PostgreSQL the statement timeout, cancelling past it (SQLSTATE 57014: unavailable); a
    constraint violation is no unavailability. Their errors (what an unhandled one logs) hide
    the values sent: SQLAlchemy's would add "[parameters: ...]"."""
    settings = Settings(
        database_url=SecretStr(url),
        workers=3,
        database_max_connections=14,
        database_statement_timeout_seconds=0.2,
    )
    pool = create_engine(settings).sync_engine.pool
    assert (pool.size(), pool._max_overflow) == (4, 0)  # type: ignore[attr-defined]
    assert fetch(lambda: create_engine(settings), "SHOW statement_timeout") == [("200ms",)]
    # A bug (writing an id PostgreSQL generates itself) must stay a 500, not become a 503.
    bug = "INSERT INTO items (id, name, price_cents, tags) VALUES (1, :value, 1, '{}')"
    slow = "SELECT pg_sleep(5), CAST(:value AS text)"
    for statement, is_unavailable in [(slow, True), (bug, False)]:
        with pytest.raises(DBAPIError) as caught:
            fetch(lambda: create_engine(settings), statement, value="client-secret")
        assert unavailable(caught.value) is is_unavailable, statement
        assert "client-secret" not in str(caught.value)


def test_a_lost_connection_costs_only_the_query_that_needed_it(url: str) -> None:
    """Lost after the last query, a read and a create keep their answer (a 503 would make the
    client create it again); lost before a query, that query is a JSON 503; the pool heals."""
    app = app_on(url)
    # PostgreSQL ends the app's connections (waiting for each to exit), as a restart does.
    terminate = "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
    terminate += " WHERE application_name = :name"

    async def lose(step: str, db: queries.Session) -> object:
        """The items API's own session, its connection lost after a query."""
        done = await (
            queries.create_item(queries.NewItem(name="kept", price_cents=1), db)
            if step == "create"
            else queries.list_items(db)
        )
        assert await asyncio.to_thread(fetch, url, terminate, name=APPLICATION_NAME) == [(True,)]
        return await queries.list_items(db) if step == "then-read" else done

    app.add_api_route("/_tests/{step}", lose, methods=["POST"])
    # Server exceptions raised: one let out after the response started (nginx's 502) fails.
    with TestClient(app) as client:
        read = client.post("/_tests/read")
        assert (read.status_code, read.json()) == (200, [])
        assert client.post("/_tests/create").status_code == 200
        assert fetch(url, "SELECT name FROM items") == [("kept",)]
        assert unavailable_503(client.post("/_tests/then-read"))
        assert [item["name"] for item in client.get("/items").json()] == ["kept"]


def test_an_unreachable_database_is_a_503_and_readiness_may_require_it(
    url: str, client_for: Callable[[FastAPI], TestClient]
) -> None:
    """Unresolvable: items a JSON 503 with Retry-After and the request id, /readyz 200
    reporting it (the worker still answers), or 503 when <PREFIX>READINESS_REQUIRES_DATABASE
    is on. A server restarted under load: the template's battery (test_database.py)."""
    settings = Settings(database_url=SecretStr(url.replace("127.0.0.1", "db.invalid")))
{%- if cookiecutter.auth == "oidc" %}
    gone = client_for(trusting(create_app(settings)))
    gone.headers.update(bearer(SHARED.token()))
{%- else %}
    gone = client_for(create_app(settings))
{%- endif %}
    for response in [gone.get("/items"), gone.get("/items/1"), gone.post("/items", json=NEW)]:
        assert unavailable_503(response)
        assert response.headers["retry-after"] == "2"
    ready = gone.get("/readyz")
    assert (ready.status_code, ready.json()["failing"]) == (200, ["database"])
    required = settings.model_copy(update={"readiness_requires_database": True})
    ready = client_for(create_app(required)).get("/readyz")
    assert (ready.status_code, ready.json()["required"]) == (503, ["database"])
