"""The items API stored in PostgreSQL, in process: real server, real driver, no stand-ins."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest
from fastapi import FastAPI
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

    from pg_server import PostgresServer

NEW = {"name": "lamp", "price_cents": 1999, "tags": ["home"]}


@pytest.fixture
def url(new_database: Callable[..., str]) -> str:
    """A migrated database of this test's own."""
    return new_database()


@pytest.fixture
def client(url: str) -> Iterator[TestClient]:
    """The app on ``url``, its lifespan (engine, readiness check) running."""
    app = create_app(Settings(database_url=SecretStr(url)))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def post_raw(client: TestClient, body: str) -> int:
    response = client.post("/items", content=body, headers={"Content-Type": "application/json"})
    return response.status_code


def test_post_stores_the_item_in_postgresql(client: TestClient, url: str) -> None:
    """POST /items answers 201 with the id PostgreSQL gave it, and the row is there."""
    response = client.post("/items", json=NEW)
    assert response.status_code == 201
    created = response.json()
    assert created == {**NEW, "id": created["id"]}
    assert fetch(url, "SELECT id, name, price_cents, tags FROM items") == [
        (created["id"], "lamp", 1999, ["home"])
    ]


def test_get_returns_what_post_stored(client: TestClient) -> None:
    """GET /items/{id} reads the row back."""
    created = client.post("/items", json=NEW).json()
    assert client.get(f"/items/{created['id']}").json() == created


@pytest.mark.parametrize("item_id", ["999", "0", "-1", str(BIGINT_MAX + 1), str(10**40)])
def test_unknown_ids_are_404(client: TestClient, item_id: str) -> None:
    """Missing, zero, negative and beyond-BIGINT ids are all a JSON 404, never a 500."""
    response = client.get(f"/items/{item_id}")
    assert response.status_code == 404
    assert response.json() == {"detail": f"no item {item_id}"}


def test_list_pages_oldest_first(client: TestClient) -> None:
    """GET /items pages through the rows by id, ``limit`` at a time from ``offset``."""
    ids = [client.post("/items", json={**NEW, "name": f"item {n}"}).json()["id"] for n in range(5)]
    assert ids == sorted(ids)
    pages = [client.get("/items", params={"offset": o, "limit": 2}).json() for o in (0, 2, 4, 6)]
    assert [[item["id"] for item in page] for page in pages] == [ids[0:2], ids[2:4], ids[4:], []]


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"offset": BIGINT_MAX}, 200),
        ({"offset": BIGINT_MAX + 1}, 422),
        ({"offset": -1}, 422),
        ({"limit": 0}, 422),
        ({"limit": 101}, 422),
        ({"limit": "ten"}, 422),
    ],
)
def test_paging_bounds(client: TestClient, params: dict[str, int | str], status: int) -> None:
    """Offsets up to PostgreSQL's BIGINT work; beyond it, or a bad limit, are 422s."""
    assert client.get("/items", params=params).status_code == status


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({**NEW, "name": "nul\u0000byte"}),
        json.dumps({**NEW, "tags": ["ok", "t\u0000"]}),
        '{"name": "\\ud800 lone surrogate", "price_cents": 1}',
        '{"name": "big", "price_cents": 1e400}',
        '{"name": "nan", "price_cents": NaN}',
        json.dumps({**NEW, "name": "x" * 101}),
        json.dumps({**NEW, "tags": ["t"] * 11}),
        json.dumps({**NEW, "price_cents": 2**63}),
        json.dumps({**NEW, "id": 7}),
    ],
    ids=["nul", "nul-tag", "surrogate", "infinite", "nan", "long", "tags", "huge", "own-id"],
)
def test_unstorable_bodies_are_422_and_store_nothing(
    client: TestClient, url: str, body: str
) -> None:
    """What PostgreSQL cannot hold (NUL, lone surrogates) is refused like any invalid body."""
    assert post_raw(client, body) == 422
    assert fetch(url, "SELECT count(*) FROM items") == [(0,)]


def test_the_schema_tells_clients_nul_is_refused(client: TestClient) -> None:
    """The OpenAPI schema carries the pattern, so clients and fuzzers know before sending."""
    # The app's own document: /openapi.json itself is off in production (API_DOCS).
    app = client.app
    assert isinstance(app, FastAPI)
    schema = app.openapi()["components"]["schemas"]["NewItem"]
    assert schema["properties"]["name"]["pattern"] == NO_NUL
    assert schema["properties"]["tags"]["items"]["pattern"] == NO_NUL


def test_unicode_round_trips(client: TestClient) -> None:
    """Every other character, astral ones included, is stored and read back unchanged."""
    name = "Zoë 日本語 😀 \u200b\ufeff"
    created = client.post("/items", json={**NEW, "name": name}).json()
    assert client.get(f"/items/{created['id']}").json()["name"] == name


def test_readyz_checks_the_database(client: TestClient) -> None:
    """The lifespan registers the database as a readiness check."""
    assert client.get("/readyz").json()["checks"] == {"database": "ok"}


# --- an unreachable database ------------------------------------------------------------


def test_a_stopped_database_gives_503s_and_recovers(
    spare_server: tuple[PostgresServer, str],
) -> None:
    """Database down: readyz 503 naming it, livez 200, items a JSON 503; back up: all 200."""
    server, spare_url = spare_server
    app = create_app(Settings(database_url=SecretStr(spare_url)))
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/items", json=NEW).status_code == 201
        server.stop()

        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["failing"] == ["database"]
        assert client.get("/livez").status_code == 200
        answers = [client.get("/items"), client.get("/items/1"), client.post("/items", json=NEW)]
        for response in answers:
            assert response.status_code == 503
            assert response.json() == {"detail": "the database is unavailable; retry shortly"}
            assert response.headers["retry-after"] == "2"

        server.start()
        assert client.get("/readyz").status_code == 200
        assert [item["id"] for item in client.get("/items").json()] == [1]
        assert client.post("/items", json=NEW).status_code == 201


# --- the engine's settings, seen by PostgreSQL itself ----------------------------------------


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


def test_a_statement_past_the_timeout_counts_as_unavailable(url: str) -> None:
    """PostgreSQL cancels it (SQLSTATE 57014): a 503, not a 500, for the client."""
    settings = Settings(database_url=SecretStr(url), database_statement_timeout_seconds=0.2)

    async def slow() -> DBAPIError:
        engine = create_engine(settings)
        try:
            async with engine.connect() as connection:
                await connection.execute(text("SELECT pg_sleep(5)"))
        except DBAPIError as error:
            return error
        finally:
            await engine.dispose()
        pytest.fail("pg_sleep(5) finished despite a 0.2 s statement timeout")

    assert unavailable(asyncio.run(slow()))


def test_a_constraint_violation_is_not_unavailability(url: str) -> None:
    """A bug (here: writing an id PostgreSQL generates itself) stays a 500, not a 503."""

    async def bad_insert() -> DBAPIError:
        engine = create_engine(Settings(database_url=SecretStr(url)))
        try:
            async with engine.connect() as connection:
                await connection.execute(
                    text("INSERT INTO items (id, name, price_cents, tags) VALUES (1, 'x', 1, '{}')")
                )
        except DBAPIError as error:
            return error
        finally:
            await engine.dispose()
        pytest.fail("PostgreSQL accepted a value for a GENERATED ALWAYS identity")

    assert not unavailable(asyncio.run(bad_insert()))


def test_an_unresolvable_host_is_a_503(new_database: Callable[..., str]) -> None:
    """A database host that does not resolve (a service name gone) fails fast as a 503."""
    url = new_database().replace("127.0.0.1", "db.invalid")
    app = create_app(Settings(database_url=SecretStr(url)))
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/items")
        assert response.status_code == 503
        assert client.get("/readyz").json()["failing"] == ["database"]


# --- the server dropping the connection in the middle of a request -------------------------
# A restart or failover can close a connection after the request's last query and before
# its session closes (found under load by test_live.py's restart). The endpoints below use
# the items API's own session dependency; between their queries they have PostgreSQL end
# this service's connections, as a fast shutdown does.


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
    app = create_app(Settings(database_url=SecretStr(url)))

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


def test_a_connection_lost_after_the_last_query_keeps_the_answer(
    losing_client: TestClient, url: str
) -> None:
    """A read and a create keep their success answer (these test endpoints answer 200), the
    item stored once (a 503 would make the client create it again); the pool replaces the
    dead connection for the next request."""
    read = losing_client.post("/test/read_then_lose")
    assert (read.status_code, read.json()) == (200, [])

    created = losing_client.post("/test/create_then_lose")
    assert created.status_code == 200
    assert fetch(url, "SELECT name FROM items") == [("kept",)]

    assert [item["name"] for item in losing_client.get("/items").json()] == ["kept"]


def test_a_connection_lost_before_a_query_is_that_querys_503(losing_client: TestClient) -> None:
    """The query's own error answers (a JSON 503), not one from closing the session after."""
    response = losing_client.post("/test/lose_then_read")
    assert response.status_code == 503
    assert response.json() == {"detail": "the database is unavailable; retry shortly"}
    assert losing_client.get("/items").status_code == 200
