"""The live stacks of the contract tests: `python -m serving_stack`, launched as the session
starts (one the tests share, one the SIGTERM test stops), booting while the others run.

Real nginx, a real unix socket and real gunicorn workers serving live_app.py (the app plus
test routes). Needs the project installed and nginx on PATH or in /usr/sbin (else the
tests skip, saying so). Started as root (a container's CI), the stack stays root only
because SERVE_AS_ROOT=on says so (docs/settings.md)."""

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
from serving_stack import DRAIN_MARGIN, PROXY_MARGIN
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

HERE = Path(__file__).resolve().parent
PACKAGE = "{{ cookiecutter.package_name }}"
# The app's request deadline: short, for quick 504 and stream tests; /_tests/slow below it
# finishes.
DEADLINE_SECONDS = 1
# A stream's longest silence here (the app's STREAM_IDLE_TIMEOUT_SECONDS), and the WebSockets
# one client address may hold open (nginx's WEBSOCKETS_PER_CLIENT): small, for quick tests.
STREAM_IDLE_SECONDS = 1
WEBSOCKETS_PER_CLIENT = 4
# The stack the SIGTERM test stops has twice the deadline and idle bound: its event streams'
# gaps stay far within it however busy the machine, and the streams still end within the
# stop's 5 s handover. The streams: small events and 64 KiB ones (above nginx's
# proxy_buffer_size and busy buffers), a quarter of the idle bound apart, the last one past
# twice the deadline. (Plain requests in flight: the battery's test_faults.py.)
STOPPED_DEADLINE_SECONDS = 2
STREAM_SIZES = (0, 65536)
STREAM_INTERVAL = STOPPED_DEADLINE_SECONDS / 4
STREAM_EVENTS = int(2 * STOPPED_DEADLINE_SECONDS / STREAM_INTERVAL) + 2
SYSTEM_PATH = f"{os.environ.get('PATH', os.defpath)}{os.pathsep}/usr/sbin"
Answer = tuple[int, dict[str, str], bytes]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def exchange(port: int, wire: bytes, timeout: float = 10) -> Answer:
    """Send raw bytes (what an HTTP client would refuse to send); status, headers (lower case),
    body. Reads the answer to its own end, not to the close: after refusing a body it has not
    read, nginx lingers up to 2 s before closing (lingering_time)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        with contextlib.suppress(OSError):  # nginx may answer and close before reading all
            client.sendall(wire)
        answer = http.client.HTTPResponse(client)
        answer.begin()
        headers = {name.lower(): value for name, value in answer.getheaders()}
        return answer.status, headers, answer.read()


def get(port: int, target: str) -> Answer:
    wire = f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    return exchange(port, wire.encode("latin-1"))


def answers(port: int, target: str) -> bool:
    try:
        return get(port, target)[0] == 200
    except (OSError, http.client.HTTPException):  # refused, or closed before a status line
        return False


def json_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):  # a line being written
            lines.append(json.loads(raw))
    return lines


@dataclass
class LiveStack:
    """The supervisor's process, its ports and its log (every line of every process)."""

    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log_path: Path

    def log_lines(self, **fields: object) -> list[dict[str, Any]]:
        """Every line, or those with these ``fields`` (request_id, logger, level...)."""
        return [line for line in json_lines(self.log_path) if fields.items() <= line.items()]

    def access_lines(self) -> dict[str, dict[str, Any]]:
        """The app's access lines by request id: the requests that reached the app."""
        return {line["request_id"]: line for line in self.log_lines(logger=f"{PACKAGE}.access")}


def launch(
    deadline: float = DEADLINE_SECONDS, stream_idle: float = STREAM_IDLE_SECONDS
) -> LiveStack:
    """The stack as the image starts it, serving live_app.py with a short deadline."""
    run_dir = Path(tempfile.mkdtemp(prefix="live-stack-"))
    port, metrics_port, prefix = free_port(), free_port(), PACKAGE.upper()
    environment = {
        **os.environ,
        "PATH": SYSTEM_PATH,
        "RUN_DIR": str(run_dir / "run"),
        "PORT": str(port),
        # Never the default 9464: a developer's own stack may be using it.
        "METRICS_PORT": str(metrics_port),
        "LISTEN_ADDRESS": "127.0.0.1",
        "APP_MODULE": "live_app:app",
        # This project's own nginx locations, as edited: the stack runs from tests/live/ (below).
        "NGINX_LOCATIONS": str(HERE.parent.parent / "deploy" / "nginx-locations.conf"),
        "WEB_CONCURRENCY": "2",
        "NGINX_WORKER_PROCESSES": "1",
        # The app's access line says which requests (and ids) reached it (off by default).
        f"{prefix}_ACCESS_LOG": "true",
        "REQUEST_TIMEOUT_SECONDS": str(deadline),
        f"{prefix}_STREAM_IDLE_TIMEOUT_SECONDS": str(stream_idle),
        "WEBSOCKETS_PER_CLIENT": str(WEBSOCKETS_PER_CLIENT),
        # Nothing queues here: a stop's handover (supervisor.py) is 5 s after nginx's QUIT, not 9.
        "RATE_LIMIT_QUEUE_SECONDS": "0",
        **({"SERVE_AS_ROOT": "on"} if os.geteuid() == 0 else {}),
    }
    log_path = run_dir / "stack.log"
    with log_path.open("wb") as output:
        # cwd: gunicorn imports APP_MODULE from its working directory, and the app and the
        # stack read .env there; there is none, so a developer's own changes nothing here.
        process = subprocess.Popen(
            [sys.executable, "-m", "serving_stack"],
            cwd=HERE,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    return LiveStack(process, port, metrics_port, log_path)


def ready(live: LiveStack) -> LiveStack:
    """``live`` once it serves: the metrics listener starts last, so every process is up."""
    wait_for(
        lambda: live.process.poll() is not None or answers(live.metrics_port, "/metrics"),
        60,
        "the stack's metrics listener to answer",
    )
    assert answers(live.port, "/livez"), live.log_path.read_text(errors="replace")
    return live


def websocket(port: int) -> ClientConnection:
    return connect(f"ws://127.0.0.1:{port}/_tests/ws", open_timeout=10, close_timeout=5)


@dataclass
class Stream:
    """A server-sent event stream as a client read it."""

    headers: dict[str, str]
    # Each event's number, when the app sent it and when it arrived (time.time(), one host).
    events: list[tuple[int, float, float]]
    complete: bool  # the chunked body ended with its terminator (False: cut)
    request_id: str


def read_stream(port: int, target: str) -> Stream:
    """GET target, asking for gzip, and read its events as they arrive."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", target, headers={"Accept-Encoding": "gzip"})
    response = connection.getresponse()
    headers = {name.lower(): value for name, value in response.getheaders()}
    events, complete, pending = [], True, b""
    try:
        # read1, not readline: readline takes a missing terminating chunk for a clean end.
        while data := response.read1(262144):
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if line.startswith(b"data: "):
                    number, sent = line.split()[1:3]
                    events.append((int(number), float(sent), time.time()))
    except (http.client.IncompleteRead, OSError):  # no terminating chunk: the stream was cut
        complete = False
    finally:
        connection.close()
    return Stream(headers, events, complete, headers.get("x-request-id", ""))


@dataclass
class Stopped:
    """What the clients of a stack got when it was sent SIGTERM, and how its supervisor ended."""

    streams: list[Stream]  # one of each STREAM_SIZES
    close_code: int | None  # the WebSocket's close frame's; None: the connection was dropped
    exit_code: int
    log_path: Path


def clients_through_sigterm(port: int, log_path: Path, pid: int) -> dict[str, Any]:
    """SIGTERM the supervisor ``pid`` once event streams and a WebSocket session are in flight; what
    each client got (the streams, the close frame's code), as JSON can carry it."""
    drain = STOPPED_DEADLINE_SECONDS + PROXY_MARGIN + DRAIN_MARGIN
    streams = [
        f"/_tests/events?tokens={STREAM_EVENTS}&interval={STREAM_INTERVAL}&size={size}"
        for size in STREAM_SIZES
    ]
    with websocket(port) as session, ThreadPoolExecutor(max_workers=2) as pool:
        session.send("hello")
        assert session.recv(timeout=10) == "hello"
        read = [pool.submit(read_stream, port, target) for target in streams]

        def started() -> int:  # the streams that reached the app
            return sum(line.get("message") == "stream started" for line in json_lines(log_path))

        wait_for(lambda: started() == len(streams), 20, "the streams to reach the app")
        os.kill(pid, signal.SIGTERM)
        try:
            session.recv(timeout=drain)
            close = None  # a message instead of a close: the assertion on close says so
        except ConnectionClosed as closed:
            close = closed.rcvd
        return {
            "streams": [asdict(each.result(timeout=30)) for each in read],
            "close_code": None if close is None else close.code,
        }


def stop_under_load(live: LiveStack) -> Stopped:
    """``live`` sent SIGTERM under load by clients in a process of their own, this file run as
    a script: in pytest's, a test holding the GIL in a long C call would delay their reads (a
    subprocess, not multiprocessing: its resource tracker outlived the session)."""
    ready(live)
    argv = [sys.executable, __file__, str(live.port), str(live.log_path), str(live.process.pid)]
    clients = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert clients.returncode == 0, clients.stderr[-3000:]
    seen = json.loads(clients.stdout)
    streams = [Stream(**stream) for stream in seen["streams"]]
    exit_code = live.process.wait(30)
    return Stopped(streams, seen["close_code"], exit_code, live.log_path)


# Launched once the tests are chosen, so they boot while the unit and stack tests run (the
# live ones run last): the stack the tests share and, for the SIGTERM test, one stopped in
# the background, its 5 s handover beside the other tests rather than after them.
LAUNCHED: dict[str, LiveStack] = {}
STOPPED: list[Future[Stopped]] = []
BACKGROUND = ThreadPoolExecutor(max_workers=1)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    live = [item for item in items if item.path.is_relative_to(HERE)]
    items[:] = [item for item in items if item not in live] + live
    if not live or shutil.which("nginx", path=SYSTEM_PATH) is None:
        return
    if config.option.collectonly:
        return
    if any("stack" in getattr(item, "fixturenames", ()) for item in live):
        LAUNCHED["stack"] = launch()
    if any("stopped" in getattr(item, "fixturenames", ()) for item in live):
        LAUNCHED["stopped"] = launch(STOPPED_DEADLINE_SECONDS, STOPPED_DEADLINE_SECONDS)
        STOPPED.append(BACKGROUND.submit(stop_under_load, LAUNCHED["stopped"]))


def pytest_sessionfinish() -> None:
    """TERM the supervisors, KILL one that hangs: its children die with it (PR_SET_PDEATHSIG)."""
    for live in LAUNCHED.values():
        live.process.terminate()
        try:
            live.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            live.process.kill()
            live.process.wait(timeout=10)
    BACKGROUND.shutdown(cancel_futures=True)
    for live in LAUNCHED.values():
        shutil.rmtree(live.log_path.parent, ignore_errors=True)


def launched(name: str) -> LiveStack:
    if name not in LAUNCHED:  # the hook launches each one a chosen test asks for
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    return LAUNCHED[name]


@pytest.fixture(scope="session")
def stack() -> LiveStack:
    """The stack the tests share, once it serves."""
    return ready(launched("stack"))


@pytest.fixture(scope="session")
def stopped() -> Stopped:
    """The stack sent SIGTERM under load since the session's start (stop_under_load)."""
    launched("stopped")
    return STOPPED[0].result(timeout=120)


if __name__ == "__main__":  # stop_under_load's clients
    port, log_path, pid = sys.argv[1:]
    sys.stdout.write(json.dumps(clients_through_sigterm(int(port), Path(log_path), int(pid))))
