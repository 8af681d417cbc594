"""The items API stored in PostgreSQL, in process: real server, real driver, no stand-ins;
and what the service does when the database is slow, down or drops a connection.

Needs the session's server (tests/conftest.py: ``new_database``, ``stoppable``). Hostile
bodies and parameters for every endpoint: tests/unit/test_validation.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from {{ cookiecutter.package_name }}.api.items import ItemIn
from {{ cookiecutter.package_name }}.api.items_db import BIGINT_MAX, NO_NUL, Session
from {{ cookiecutter.package_name }}.db import items as queries
from {{ cookiecutter.package_name }}.db.engine import APPLICATION_NAME, create_engine
from {{ cookiecutter.package_name }}.db.errors import unavailable
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import Settings

from .tables import fetch, fetch_async

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from fastapi import FastAPI

    from pg_server import PostgresServer
    from unit.asgi import ClientFor

NEW = {"name": "lamp", "price_cents": 1999, "tags": ["home"]}
UNAVAILABLE = {"detail": "the database is unavailable; retry shortly"}


@pytest.fixture
def url(new_database: Callable[..., str]) -> str:
    """A migrated database of this test's own."""
    return new_database()


def app_on(url: str) -> FastAPI:
    return create_app(Settings(database_url=SecretStr(url)))


@pytest.fixture
def client(url: str, client_for: ClientFor) -> TestClient:
    """The app on ``url``, its lifespan (engine, readiness check) running."""
    return client_for(app_on(url))


def test_items_are_stored_read_back_and_paged(client: TestClient, url: str) -> None:
    """POST answers 201 with the id PostgreSQL gave; the row is there, unicode unchanged;
    GET reads it back; GET /items pages by id, ``limit`` at a time from ``offset``."""
    names = ["Zoë 日本語 😀 \u200b\ufeff", *(f"item {n}" for n in range(4))]
    created = [client.post("/items", json={**NEW, "name": name}) for name in names]
    assert {response.status_code for response in created} == {201}
    first = created[0].json()
    assert first == {**NEW, "name": names[0], "id": first["id"]}
    assert fetch(url, "SELECT name, tags FROM items WHERE id = :id", id=first["id"]) == [
        (names[0], ["home"])
    ]
    assert client.get(f"/items/{first['id']}").json() == first
    ids = [response.json()["id"] for response in created]
    pages = [client.get("/items", params={"offset": o, "limit": 2}).json() for o in (0, 2, 4, 6)]
    assert [[item["id"] for item in page] for page in pages] == [ids[0:2], ids[2:4], ids[4:], []]


@pytest.mark.parametrize(
    ("path", "status"),
    [*((f"/items/{item_id}", 404) for item_id in ["999", "0", "-1", str(BIGINT_MAX + 1)]),
     (f"/items?offset={BIGINT_MAX}", 200), (f"/items?offset={BIGINT_MAX + 1}", 422),
     ("/items?offset=-1", 422), ("/items?limit=0", 422), ("/items?limit=101", 422)],
)  # fmt: skip
def test_ids_and_pages_out_of_range(client: TestClient, path: str, status: int) -> None:
    """Missing, zero, negative and beyond-BIGINT ids are a JSON 404; offsets up to BIGINT
    work, beyond it (or a limit outside 1..100) are 422s: never a 500."""
    response = client.get(path)
    assert response.status_code == status
    if status == 404:
        assert response.json() == {"detail": f"no item {path.rsplit('/', 1)[1]}"}


@pytest.mark.parametrize(
    "body",
    [json.dumps({**NEW, "name": "nul\u0000byte"}), json.dumps({**NEW, "tags": ["ok", "t\u0000"]}),
     '{"name": "\\ud800 lone surrogate", "price_cents": 1}',
     json.dumps({**NEW, "price_cents": 2**63}), json.dumps({**NEW, "id": 7})],
    ids=["nul", "nul-tag", "surrogate", "huge", "own-id"],
)  # fmt: skip
def test_unstorable_bodies_are_422_and_store_nothing(
    client: TestClient, url: str, body: str
) -> None:
    """What PostgreSQL cannot hold (NUL, lone surrogates, past its integers) is refused
    like any invalid body; the schema tells clients the NUL pattern before they send."""
    response = client.post("/items", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert fetch(url, "SELECT count(*) FROM items") == [(0,)]
    schema = app_on(url).openapi()["components"]["schemas"]["NewItem"]["properties"]
    assert (schema["name"]["pattern"], schema["tags"]["items"]["pattern"]) == (NO_NUL, NO_NUL)


def test_a_stopped_database_gives_503s_and_recovers(
    stoppable: PostgresServer, url: str, client_for: ClientFor
) -> None:
    """Down (or a host that no longer resolves): readyz 503 naming it, livez 200, items a
    JSON 503 with Retry-After; up again, the same app answers 200s (pool pre-ping)."""
    gone = client_for(app_on(url.replace("127.0.0.1", "db.invalid")))
    assert (gone.get("/items").status_code, gone.get("/readyz").status_code) == (503, 503)
    client = client_for(app_on(url))
    assert client.post("/items", json=NEW).status_code == 201
    stoppable.stop()
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()["failing"]) == (503, ["database"])
    assert client.get("/livez").status_code == 200
    for response in [client.get("/items"), client.get("/items/1"), client.post("/items", json=NEW)]:
        assert (response.status_code, response.json()) == (503, UNAVAILABLE)
        assert response.headers["retry-after"] == "2"
    stoppable.start()
    assert client.get("/readyz").status_code == 200
    assert client.post("/items", json=NEW).status_code == 201


def test_the_engine_applies_the_pool_share_and_statement_timeout(url: str) -> None:
    """The pool holds this worker's share; PostgreSQL reports the statement timeout set."""
    settings = Settings(
        database_url=SecretStr(url), workers=3, database_max_connections=12,
        database_statement_timeout_seconds=1.5,
    )  # fmt: skip

    async def inspect() -> tuple[int, int, object]:
        engine = create_engine(settings)
        try:
            async with engine.connect() as connection:
                timeout = (await connection.execute(text("SHOW statement_timeout"))).scalar()
            pool = engine.sync_engine.pool
            return pool.size(), pool._max_overflow, timeout  # type: ignore[attr-defined]
        finally:
            await engine.dispose()

    assert asyncio.run(inspect()) == (4, 0, "1500ms")


@pytest.mark.parametrize(
    ("statement", "is_unavailable"),
    [("SELECT pg_sleep(5)", True),
     # A bug (writing an id PostgreSQL generates itself) must stay a 500, not become a 503.
     ("INSERT INTO items (id, name, price_cents, tags) VALUES (1, 'x', 1, '{}')", False)],
    ids=["past the statement timeout", "constraint"],
)  # fmt: skip
def test_only_unavailability_is_a_503(url: str, statement: str, *, is_unavailable: bool) -> None:
    """A statement PostgreSQL cancels at its timeout (SQLSTATE 57014) counts as unavailable,
    a constraint violation does not."""
    settings = Settings(database_url=SecretStr(url), database_statement_timeout_seconds=0.2)

    async def run() -> DBAPIError:
        engine = create_engine(settings)
        try:
            async with engine.connect() as connection:
                await connection.execute(text(statement))
        except DBAPIError as error:
            return error
        finally:
            await engine.dispose()
        pytest.fail(f"PostgreSQL accepted {statement}")

    assert unavailable(asyncio.run(run())) is is_unavailable


# A restart or failover can close a connection after the request's last query and before
# its session closes. These endpoints use the items API's own session dependency; between
# their queries they have PostgreSQL end this service's connections, as a fast shutdown does.


async def drop_app_connections(url: str) -> None:
    """Terminate the app's backends and wait (up to 5 s) until each one has exited."""
    query = (
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
        " WHERE application_name = :name"
    )
    assert await fetch_async(url, query, name=APPLICATION_NAME) == [(True,)]


@pytest.fixture
def losing_client(url: str) -> Iterator[TestClient]:
    """The app with three endpoints that lose their connection; server errors are raised."""
    app = app_on(url)

    async def read_then_lose(db: Session) -> list[queries.StoredItem]:
        items = await queries.page(db, 0, 10)
        await drop_app_connections(url)
        return items

    async def create_then_lose(db: Session) -> queries.StoredItem:
        item = await queries.add(db, ItemIn(name="kept", price_cents=1))
        await drop_app_connections(url)
        return item

    async def lose_then_read(db: Session) -> list[queries.StoredItem]:
        await queries.page(db, 0, 10)
        await drop_app_connections(url)
        return await queries.page(db, 0, 10)

    for endpoint in (read_then_lose, create_then_lose, lose_then_read):
        app.add_api_route(f"/test/{endpoint.__name__}", endpoint, methods=["POST"])
    # raise_server_exceptions: an exception the app lets out after its response started
    # (nginx's 502 in production) fails the test instead of hiding behind a full response.
    with TestClient(app) as test_client:
        yield test_client


def test_a_lost_connection_costs_only_the_query_that_needed_it(
    losing_client: TestClient, url: str
) -> None:
    """Lost after the last query, a read and a create keep their answer (stored once: a 503
    would make the client create it again); lost before a query, that query answers a JSON
    503; the pool replaces the dead connection for the next request."""
    read = losing_client.post("/test/read_then_lose")
    assert (read.status_code, read.json()) == (200, [])
    assert losing_client.post("/test/create_then_lose").status_code == 200
    assert fetch(url, "SELECT name FROM items") == [("kept",)]
    lost = losing_client.post("/test/lose_then_read")
    assert (lost.status_code, lost.json()) == (503, UNAVAILABLE)
    assert [item["name"] for item in losing_client.get("/items").json()] == ["kept"]
