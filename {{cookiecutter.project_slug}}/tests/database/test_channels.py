"""WebSocket /channels/{name} on a real PostgreSQL: two apps on one database are two workers
(each its own hub and LISTEN connection), each served by uvicorn on loopback, to a real
WebSocket client. Needs the session's server (tests/conftest.py's fixtures)."""

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import text
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from {{ cookiecutter.package_name }}.api.channels import BAD_NAME, BINARY, TOO_BIG
from {{ cookiecutter.package_name }}.db.channels import LOST, PAYLOAD_BYTES, TOO_SLOW
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import Settings

{%- if cookiecutter.auth == "oidc" %}

from token_issuer import SHARED, bearer, trusting

# A session reads and writes: its handshake carries a token with the write scope.
HEADERS = bearer(SHARED.token(scope="channels:write"))
{%- else %}

HEADERS: dict[str, str] = {}
{%- endif %}
SECONDS = 10.0  # a message that has not come by then is missing
# Messages that fill a reader's buffers and its queue (QUEUE_MESSAGES) several times over.
MESSAGES = 1_500


@pytest.fixture
def url(new_database: Callable[..., str]) -> str:
    return new_database()


@asynccontextmanager
async def served(url: str) -> AsyncIterator[tuple[FastAPI, str]]:
    """An app of its own (a worker) served on a free loopback port: it and its ws:// base."""
{%- if cookiecutter.auth == "oidc" %}
    app = trusting(create_app(Settings(database_url=SecretStr(url))))
{%- else %}
    app = create_app(Settings(database_url=SecretStr(url)))
{%- endif %}
    listening = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, ws="websockets-sansio", lifespan="on")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    while not server.started:
        assert not serving.done(), "uvicorn stopped before serving"
        await asyncio.sleep(0.01)
    try:
        yield app, f"ws://127.0.0.1:{listening.getsockname()[1]}/channels"
    finally:
        server.should_exit = True
        await serving
        listening.close()


async def join(base: str, name: str, **options: Any) -> ClientConnection:
    """A session of channel ``name``: no compression (the stack's default, and a compressed
    message would not fill a buffer), no client pings (a session paused on purpose must not
    end on its own)."""
    address = f"{base}/{name}"
    options |= {"compression": None, "ping_interval": None}
    return await connect(address, additional_headers=HEADERS, **options)


async def read(session: ClientConnection, count: int) -> list[str]:
    return [str(await asyncio.wait_for(session.recv(), SECONDS)) for _ in range(count)]


async def closed(session: ClientConnection) -> tuple[int, str]:
    """The code and reason the server closed the session with."""
    with pytest.raises(ConnectionClosed) as ended:
        await asyncio.wait_for(read(session, 1_000_000), SECONDS)
    assert ended.value.rcvd is not None
    return ended.value.rcvd.code, ended.value.rcvd.reason


def test_each_subscriber_on_either_worker_gets_each_message_once(url: str) -> None:
    """Four sessions of one channel, two on each worker, each publishing: every session gets
    every message once, its own included, and nothing of another channel."""

    async def scenario() -> None:
        async with served(url) as (_, one), served(url) as (_, two):
            sessions = [await join(base, "room") for base in (one, two, one, two)]
            other = await join(two, "other")
            sent = [f"{n} from {i} é" for n in range(5) for i in range(len(sessions))]
            for message in sent:
                await sessions[int(message.split()[2])].send(message)
            for session in sessions:
                assert sorted(await read(session, len(sent))) == sorted(sent)
            # Published after all the others reached every session: any copy would come first.
            await sessions[0].send("last")
            await other.send("elsewhere")
            assert [await read(session, 1) for session in sessions] == [["last"]] * 4
            assert await read(other, 1) == ["elsewhere"]

    asyncio.run(scenario())


def test_hostile_input_is_refused_in_one_line(url: str) -> None:
    """A bad channel name: the handshake's JSON 400; a binary frame: 1003; a message over
    NOTIFY's payload limit: 1009; a client that reads nothing: 1008 once it is far behind.
{%- if cookiecutter.auth == "oidc" %}
    No token: 401; one without the scope: 403.
{%- endif %}"""

    async def scenario() -> None:
        async with served(url) as (app, base):
            for name in ("a" * 65, "room%20one", "caf%C3%A9"):
                with pytest.raises(InvalidStatus) as refused:
                    await join(base, name)
                answer = refused.value.response
                assert answer.status_code == 400
                assert json.loads(answer.body or b"")["detail"] == BAD_NAME
{%- if cookiecutter.auth == "oidc" %}
            # No token: 401; a token without the scope channels:write (items:write): 403.
            for headers, status in (({}, 401), (bearer(SHARED.token()), 403)):
                with pytest.raises(InvalidStatus) as denied:
                    await connect(f"{base}/room", additional_headers=headers)
                assert denied.value.response.status_code == status
{%- endif %}
            binary = await join(base, "room")
            await binary.send(b"\x00")
            assert await closed(binary) == BINARY
            large = await join(base, "room")
            await large.send("x" * PAYLOAD_BYTES)
            assert await closed(large) == TOO_BIG
            # Never read, on a small receive buffer (loopback's grows to 32 MiB): its socket
            # buffers fill, then its queue, and the hub ends it.
            small = socket.socket()
            small.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before the window
            small.connect(("127.0.0.1", urlsplit(base).port or 0))
            idle = await join(base, "busy", sock=small)
            (behind,) = app.state.channels.subscribers["busy"]
            idle.transport.pause_reading()
            publisher = await join(base, "busy")
            echoes = asyncio.create_task(read(publisher, MESSAGES))
            for _ in range(MESSAGES):
                await publisher.send("y" * (PAYLOAD_BYTES - 100))
            await asyncio.wait_for(behind.ended.wait(), SECONDS)
            idle.transport.resume_reading()  # within the close's wait, so the frame arrives
            assert await closed(idle) == TOO_SLOW
            await echoes

    asyncio.run(scenario())


def test_a_lost_listener_closes_its_subscribers_and_reconnects(url: str) -> None:
    """The LISTEN connection killed: that worker's sessions get 1012 (what was published
    meanwhile would be missed), and a new session there gets messages again."""

    async def scenario() -> None:
        async with served(url) as (app, base):
            session = await join(base, "room")
            pid = app.state.channels.connection.get_server_pid()
            async with app.state.database.engine.connect() as connection:
                await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            assert await closed(session) == LOST
            again = await join(base, "room")
            await again.send("back")
            assert await read(again, 1) == ["back"]

    asyncio.run(scenario())
