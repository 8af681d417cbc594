"""State across workers and pods (issue 48), through real stacks: nginx, gunicorn with several
uvicorn workers, real WebSocket clients. The database bake's channels deliver each message
once to each subscriber across 2 stacks of 2 workers on one PostgreSQL; and the adoption path
(stack/README.md, Workers and in-process state) with two foreign apps: an in-process pub/sub
app, every message with WEB_CONCURRENCY=1 and only its worker's share with 2 (the split the
docs describe), and a stateless echo app, whole with 2 workers.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from websockets.sync.client import ClientConnection, connect

from harness import postgres
from harness.processes import Processes
from harness.stack import RunningStack, start

from .conftest import Bake, ProjectEnv, install_env

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

SECONDS = 10.0  # a message not there by then is missing
# Stacks as small as they serve: one nginx worker, and root may serve in a throwaway run.
BASE_ENV = {
    "NGINX_WORKER_PROCESSES": "1",
    **({"SERVE_AS_ROOT": "on"} if os.geteuid() == 0 else {}),
}

# Foreign apps, as a team brings them: plain ASGI, no dependency. Each session's first message
# is its worker's pid, so the test knows where it landed. PUBSUB keeps its subscribers in a
# module-level set (in-process state); ECHO keeps nothing.
APPS = {
    "pubsub": """\
import os

SUBSCRIBERS = set()


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
    elif scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        SUBSCRIBERS.add(send)
        await send({"type": "websocket.send", "text": f"pid {os.getpid()}"})
        try:
            while (message := await receive())["type"] == "websocket.receive":
                for subscriber in list(SUBSCRIBERS):
                    await subscriber({"type": "websocket.send", "text": message["text"]})
        finally:
            SUBSCRIBERS.discard(send)
""",
    "echo": """\
import os


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
    elif scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": f"pid {os.getpid()}"})
        while (message := await receive())["type"] == "websocket.receive":
            await send({"type": "websocket.send", "text": message["text"]})
""",
}


@pytest.fixture
def processes() -> Iterator[Processes]:
    started = Processes()
    yield started
    started.stop_all()


def serve(
    processes: Processes,
    workdir: Path,
    *,
    python: Path,
    cwd: Path,
    env: Mapping[str, str],
    workers: int,
) -> RunningStack:
    """A stack started (not yet ready) with ``workers`` gunicorn workers."""
    workdir.mkdir()
    stack_env = {**BASE_ENV, **env, "WEB_CONCURRENCY": str(workers)}
    return start(processes, workdir, stack_env, python=str(python), cwd=cwd)


def ws_url(stack: RunningStack, path: str) -> str:
    return f"ws://127.0.0.1:{stack.port}{path}"


def read(session: ClientConnection, count: int, timeout: float = SECONDS) -> list[str]:
    return [str(session.recv(timeout=timeout)) for _ in range(count)]


# --- the database bake's channels -----------------------------------------------------------

LISTENING = "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"app_channels\"'"


def listeners(server: Any, url: str) -> int:
    """Workers listening on the channels' PostgreSQL channel (none has published yet)."""
    psql = Path(server.bindir) / "psql"
    libpq = url.replace("+asyncpg://", "://", 1)
    done = subprocess.run(
        [psql, "-d", libpq, "-tAc", LISTENING], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.slow
def test_channels_reach_each_subscriber_once_across_two_stacks_of_two_workers(
    database_bake: Bake, tmp_path: Path, processes: Processes
) -> None:
    """Two stacks of the database bake (2 workers each, through nginx) on one PostgreSQL:
    subscribers on all four workers (as the workers' LISTEN connections show), three of them
    publishing; every subscriber gets every message once, its own included."""
    project = database_bake.project
    env = ProjectEnv(install_env(project), tmp_path / "mypy").environ(project)
    python = Path(env["VIRTUAL_ENV"]) / "bin" / "python"
    server = postgres.start(project)
    try:
        url = server.create_database("template1")
        served = {**env, "APP_MODULE": f"{database_bake.package_name}.main:app"}
        served["DATABASE_URL"] = url
        stacks = [
            serve(
                processes, tmp_path / f"stack{n}", python=python, cwd=project, env=served, workers=2
            )
            for n in (1, 2)
        ]
        for stack in stacks:
            stack.wait_ready()
        opened = ExitStack()  # closed before the stacks stop: they drain open sessions
        sessions: list[ClientConnection] = []
        # Handshakes until every worker of both stacks holds a subscriber (each worker's
        # LISTEN connection opens at its first); the kernel deals them among the workers.
        while listeners(server, url) < 4:
            assert len(sessions) < 32, "32 sessions never reached all four workers"
            address = ws_url(stacks[len(sessions) % 2], "/channels/room")
            sessions.append(opened.enter_context(connect(address)))
        sent = [f"{n} from {p}" for n in range(8) for p in range(3)]
        for message in sent:
            sessions[int(message.rsplit(" ", 1)[1])].send(message)
        for session in sessions:
            assert sorted(read(session, len(sent))) == sorted(sent)
        # After every message reached everyone: a copy of any would come before this one.
        sessions[-1].send("last")
        assert {tuple(read(session, 1)) for session in sessions} == {("last",)}
        opened.close()
    finally:
        processes.stop_all()
        server.remove()


# --- the adoption path's foreign apps -------------------------------------------------------


def sessions_on_workers(
    stack: RunningStack, workers: int, opened: ExitStack
) -> list[tuple[int, ClientConnection]]:
    """Sessions (with their worker's pid) until ``workers`` workers hold one, at least four;
    ``opened`` closes them."""
    sessions: list[tuple[int, ClientConnection]] = []
    while len({pid for pid, _ in sessions}) < workers or len(sessions) < 4:
        assert len(sessions) < 24, f"24 sessions never reached {workers} workers"
        session = opened.enter_context(connect(ws_url(stack, "/")))
        pid = int(read(session, 1)[0].removeprefix("pid "))
        sessions.append((pid, session))
    return sessions


def adopted(
    default_bake: Bake,
    project_env: ProjectEnv,
    tmp_path: Path,
    processes: Processes,
    app: str,
    workers: int,
) -> RunningStack:
    """The default bake's stack serving a foreign app (``app:app``) from a directory of its
    own, with ``workers`` workers, as the README's adoption steps have it; ready."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "app.py").write_text(APPS[app], encoding="utf-8")
    env = {**project_env.environ(default_bake.project), "APP_MODULE": "app:app"}
    python = project_env.venv / "bin" / "python"
    stack = serve(
        processes, tmp_path / "stack", python=python, cwd=foreign, env=env, workers=workers
    )
    stack.wait_ready()
    return stack


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_an_in_process_pubsub_app_is_whole_on_one_worker_and_split_on_two(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path, processes: Processes, workers: int
) -> None:
    """The README's advice holds and the failure it warns of is real: a publisher's messages
    reach every subscriber with WEB_CONCURRENCY=1, and only its own worker's with 2."""
    stack = adopted(default_bake, project_env, tmp_path, processes, "pubsub", workers)
    sent = [f"message {n}" for n in range(4)]
    with ExitStack() as opened:  # closed before the stack stops: it drains open sessions
        sessions = sessions_on_workers(stack, workers, opened)
        publisher_pid, publisher = sessions[0]
        for message in sent:
            publisher.send(message)
        received = []
        for pid, session in sessions:
            received += read(session, len(sent) if pid == publisher_pid else 0)
            # Nothing more: no copy, and nothing from the other worker (half a second to come).
            with pytest.raises(TimeoutError):
                session.recv(timeout=0.5 if pid != publisher_pid else 0.1)
    on_its_worker = sum(pid == publisher_pid for pid, _ in sessions)
    assert sorted(received) == sorted(sent * on_its_worker)
    if workers == 1:
        assert len(received) == len(sent) * len(sessions), "one worker: all, every message"
    else:
        assert len(received) < len(sent) * len(sessions), "two: the other's subscribers miss all"


@pytest.mark.slow
def test_a_stateless_websocket_app_is_whole_on_two_workers(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path, processes: Processes
) -> None:
    """An app that keeps nothing between messages needs no change: with 2 workers, every
    session on either gets each of its messages back, and only those."""
    stack = adopted(default_bake, project_env, tmp_path, processes, "echo", 2)
    with ExitStack() as opened:
        sessions = sessions_on_workers(stack, 2, opened)
        for n, (_, session) in enumerate(sessions):
            session.send(f"{n}-a")
            session.send(f"{n}-b")
        for n, (_, session) in enumerate(sessions):
            assert read(session, 2) == [f"{n}-a", f"{n}-b"]
            with pytest.raises(TimeoutError):
                session.recv(timeout=0.1)
