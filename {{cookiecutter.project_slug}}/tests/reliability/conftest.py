"""Fixtures for the reliability battery: a live stack serving fault_app, raw clients, load.

Inputs: nginx on PATH or in /usr/sbin (the tests skip, saying so, where it is missing); as
root, setpriv (util-linux) to run the stack as an unprivileged user, as the image does.
Reuses the serving tests' helpers (tests/serving/conftest.py): the identity the stack runs
as, the runner's log, free ports and polling. Every wait here polls with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from serving.conftest import (
    PACKAGE,
    SYSTEM_PATH,
    LiveStack,
    launch_stack,
    wait_for,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

HERE = Path(__file__).resolve().parent
FAULT_APP = "fault_app:app"
REAL_APP = f"{PACKAGE}.main:app"
APP_ACCESS_LOGGER = f"{PACKAGE}.access"
# The app's request deadline variable (settings.py): the package name, upper case, prefixed.
DEADLINE_VARIABLE = f"{PACKAGE.upper()}_REQUEST_TIMEOUT_SECONDS"


# --- a live stack serving fault_app ------------------------------------------------------


class Stacks:
    """Starts deploy/serve.py stacks from a copy of the project; stops them all at the end."""

    def __init__(self, nginx_bin: str) -> None:
        self.nginx_bin = nginx_bin
        self.started: list[tuple[LiveStack, Path]] = []

    def start(
        self,
        app_module: str = FAULT_APP,
        *,
        ready: bool = True,
        extra_env: Mapping[str, str] | None = None,
        nginx_directives: Mapping[str, str] | None = None,
        **env: str,
    ) -> LiveStack:
        """Start the runner; with ready, wait until GET /livez answers through nginx.

        nginx_directives shortens timeouts in this stack's copy of deploy/nginx.conf (they
        are not environment variables): each directive must appear exactly once.
        """

        def shorten_timeouts(deploy: Path) -> None:
            if nginx_directives:
                override_directives(deploy / "nginx.conf", nginx_directives)

        stack, staging = launch_stack(
            self.nginx_bin,
            app_module,
            [HERE / "fault_app.py"],
            {**(extra_env or {}), **env},
            shorten_timeouts,
        )
        self.started.append((stack, staging))
        process = stack.process
        if ready:
            wait_for(
                lambda: process.poll() is not None or get(stack.port, "/livez")[0] == 200,
                90,
                f"the stack to answer GET /livez on port {stack.port}",
            )
            assert process.poll() is None, f"the runner exited during start:\n{stack.log_text()}"
        return stack

    def stop_all(self) -> None:
        for stack, staging in self.started:
            stack.stop_everything()
            # A reload starts gunicorn generations the serving fixture does not know about.
            for pid in runner_children(stack):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    _killpg(pid)
            shutil.rmtree(staging, ignore_errors=True)
        self.started.clear()


def override_directives(conf: Path, directives: Mapping[str, str]) -> None:
    """Set each directive's value in an nginx config, failing if it is not there once."""
    text = conf.read_text(encoding="utf-8")
    for name, value in directives.items():
        pattern = re.compile(rf"^(\s*{name}\s+)[^;]+;", re.MULTILINE)
        text, found = pattern.subn(rf"\g<1>{value};", text)
        assert found == 1, f"{conf} has {found} {name} directives, expected one"
    conf.write_text(text, encoding="utf-8")


def _killpg(pid: int) -> None:
    import os  # noqa: PLC0415 - only clean-up needs it
    import signal  # noqa: PLC0415

    os.killpg(pid, signal.SIGKILL)


def runner_children(stack: LiveStack) -> list[int]:
    """Pids of every process the runner logged as started (each leads its process group)."""
    return [
        pid
        for line in stack.log_lines()
        if line.get("logger") == "serve"
        and str(line.get("message", "")).startswith("started ")
        and isinstance(pid := line.get("pid"), int)
    ]


@pytest.fixture
def stacks(nginx_bin: str) -> Iterator[Stacks]:
    """Start stacks in one test; all are stopped (and killed if need be) after it."""
    started = Stacks(nginx_bin)
    yield started
    started.stop_all()


@pytest.fixture(scope="module")
def shared_stack(nginx_bin: str) -> Iterator[LiveStack]:
    """One stack for a module of tests that only send requests (they do not stop it)."""
    started = Stacks(nginx_bin)
    yield started.start(TRUSTED_PROXIES="192.0.2.0/24")
    started.stop_all()


# The serving tests' nginx_bin fixture is function-scoped; a module-scoped stack needs its own.
@pytest.fixture(scope="module")
def nginx_bin() -> str:
    """The nginx executable; the test is skipped, with the reason, where there is none."""
    found = shutil.which("nginx", path=SYSTEM_PATH)
    if found is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    return found


# --- logs -----------------------------------------------------------------------------------


def lines_of(stack: LiveStack, logger: str) -> list[dict[str, object]]:
    """The stack's JSON log lines written by one logger ("nginx.access", the app's, ...)."""
    return [line for line in stack.log_lines() if line.get("logger") == logger]


def nginx_access(stack: LiveStack) -> list[dict[str, object]]:
    return lines_of(stack, "nginx.access")


def app_access(stack: LiveStack) -> list[dict[str, object]]:
    return lines_of(stack, APP_ACCESS_LOGGER)


def wait_for_line(
    stack: LiveStack, predicate: Callable[[dict[str, object]], bool], what: str, count: int = 1
) -> list[dict[str, object]]:
    """Poll the stack's log until count lines match; return them."""
    found: list[dict[str, object]] = []

    def enough() -> bool:
        found[:] = [line for line in stack.log_lines() if predicate(line)]
        return len(found) >= count

    wait_for(enough, 30, what)
    return found


# --- raw HTTP ----------------------------------------------------------------------------


def exchange(port: int, payload: bytes | list[bytes], timeout: float = 10.0) -> bytes:
    """Send raw bytes (pieces in order) to nginx and read until it closes or goes quiet."""
    pieces = [payload] if isinstance(payload, bytes) else payload
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        # No shutdown(SHUT_WR) after sending: nginx takes a half-closed client for one that
        # gave up (499). Requests say "Connection: close", so nginx closes when done.
        try:
            for piece in pieces:
                conn.sendall(piece)
        except OSError:
            pass  # nginx may answer and close before reading everything: read what it said
        with contextlib.suppress(OSError):
            while not _complete(received) and (chunk := conn.recv(65536)):
                received += chunk
    return received


def _complete(raw: bytes) -> bool:
    """Whether raw holds a whole response (nginx may linger before closing after an error)."""
    head, found, body = raw.partition(b"\r\n\r\n")
    if not found:
        return False
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return length is not None and len(body) >= int(length.group(1))


def parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one HTTP/1.1 response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        return 0, {}, raw
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers, body


def get(
    port: int, path: str, headers: dict[str, str] | None = None, timeout: float = 10.0
) -> tuple[int, dict[str, str], bytes]:
    """One GET through nginx on a fresh connection; status 0 when nothing came back."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    request = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n"
    try:
        return parse_response(exchange(port, request.encode("latin-1"), timeout))
    except OSError:
        return 0, {}, b""


def request(
    port: int,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, dict[str, str], bytes]:
    """One request with a body through nginx on a fresh connection."""
    fields = {"Host": "localhost", "Connection": "close", "Content-Length": str(len(body))}
    fields.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return parse_response(exchange(port, (head + "\r\n").encode("latin-1") + body, timeout))


# --- mixed load with keep-alive connections ---------------------------------------------------


@dataclass
class LoadReport:
    """What the clients saw: successes per method, failures, and stale keep-alive retries."""

    ok: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    # A reused keep-alive connection closed before any byte of the answer: the request never
    # reached nginx (its access log proves it), and clients resend it on a new connection.
    stale_retries: int = 0
    latencies: list[float] = field(default_factory=list)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


class _Stale(Exception):  # noqa: N818 - a signal between two functions, not an error
    """The connection closed before any byte of the response arrived."""


async def _exchange_once(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire: bytes
) -> tuple[int, bytes, bool]:
    writer.write(wire)
    await writer.drain()
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if not error.partial:
            raise _Stale from error
        raise
    except ConnectionResetError as error:
        raise _Stale from error
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    keep = headers.get("connection", "").lower() != "close"
    return int(status_line.split(" ", 2)[1]), body, keep


async def _client(port: int, method: str, deadline: float, report: LoadReport, expect: int) -> None:
    """One keep-alive connection sending requests back to back until the deadline."""
    # GET /: the app's index, a route every variant of the example has, through the router.
    path = "/" if method == "GET" else "/fault/echo"
    body = b'{"name":"load","n":1}' if method == "POST" else b""
    wire = (
        f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    reused = False
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        if conn is None:
            conn = await asyncio.open_connection("127.0.0.1", port)
            reused = False
        started = loop.time()
        try:
            status, _, keep = await asyncio.wait_for(_exchange_once(*conn, wire), 30)
        except _Stale:
            conn[1].close()
            conn = None
            if not reused:
                report.failures.append(f"{method}: closed before answering on a new connection")
            else:
                report.stale_retries += 1
            continue
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as error:
            report.failures.append(f"{method}: {type(error).__name__}: {error}")
            conn[1].close()
            conn = None
            continue
        report.latencies.append(loop.time() - started)
        if status == expect:
            report.ok[method] += 1
        else:
            report.failures.append(f"{method}: status {status}")
        reused = True
        if not keep:
            conn[1].close()
            conn = None
    if conn is not None:
        conn[1].close()


def mixed_load(
    port: int, seconds: float, connections: int = 4
) -> tuple[threading.Thread, LoadReport]:
    """Start GET and POST keep-alive clients in a thread for seconds; join the thread to end."""
    report = LoadReport()

    async def main() -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        await asyncio.gather(
            *(_client(port, "GET", deadline, report, 200) for _ in range(connections)),
            *(_client(port, "POST", deadline, report, 201) for _ in range(connections)),
        )

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    return thread, report


def server_errors(stack: LiveStack) -> list[dict[str, object]]:
    """nginx access-log lines with a 5xx, or a 499 (the client gave up waiting)."""
    return [
        line
        for line in nginx_access(stack)
        if isinstance(status := line.get("status"), int) and (status >= 500 or status == 499)
    ]


def error_lines(stack: LiveStack, last: int = 6) -> list[str]:
    """The stack's last error lines (nginx's upstream errors, the app's tracebacks cut
    short): what an assertion on statuses prints, so a rare 5xx says where it came from."""
    said = [line for line in stack.log_lines() if line.get("level") in {"error", "critical"}]
    return [json.dumps(line)[:1500] for line in said[-last:]]


def elapsed(start: float) -> float:
    return time.monotonic() - start


def parse_json(body: bytes) -> dict[str, object]:
    parsed = json.loads(body)
    assert isinstance(parsed, dict)
    return parsed
