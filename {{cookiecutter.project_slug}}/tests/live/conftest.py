"""One live stack for the contract tests: `python -m serving_stack`, started once.

Real nginx, a real unix socket and real gunicorn workers serving live_app.py (the app plus
test routes). Needs the project installed and nginx on PATH or in /usr/sbin (else the
tests skip, saying so). Started as root (a container's CI), the stack stays root only
because SERVE_AS_ROOT=on says so (docs/settings.md)."""

import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE = "{{ cookiecutter.package_name }}"
# The app's request deadline: short, for quick 504 and stream tests; /slow below it finishes.
DEADLINE_SECONDS = 1
# A stream's longest silence here (the app's STREAM_IDLE_TIMEOUT_SECONDS), and the WebSockets
# one client address may hold open (nginx's WEBSOCKETS_PER_CLIENT): small, for quick tests.
STREAM_IDLE_SECONDS = 1
WEBSOCKETS_PER_CLIENT = 4
SYSTEM_PATH = f"{os.environ.get('PATH', os.defpath)}{os.pathsep}/usr/sbin"
Answer = tuple[int, dict[str, str], bytes]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll condition until it holds; fail naming what did not happen in time."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def exchange(port: int, wire: bytes, timeout: float = 10) -> Answer:
    """Send raw bytes (what an HTTP client would refuse to send); status, headers (lower case),
    body. Reads the answer to its own end, not to the close: after refusing a body it has not
    read, nginx lingers up to 5 s before closing (lingering_timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        with contextlib.suppress(OSError):  # nginx may answer and close before reading all
            client.sendall(wire)
        answer = http.client.HTTPResponse(client)
        answer.begin()
        headers = {name.lower(): value for name, value in answer.getheaders()}
        return answer.status, headers, answer.read()


def get(port: int, target: str, *headers: str, host: str = "localhost") -> Answer:
    """GET target on a fresh connection (Connection: close), with any more header lines."""
    head = "".join(f"{line}\r\n" for line in [f"Host: {host}", "Connection: close", *headers])
    return exchange(port, f"GET {target} HTTP/1.1\r\n{head}\r\n".encode("latin-1"))


def answers(port: int, target: str) -> bool:
    """Whether GET target answers 200 (False while nothing listens yet)."""
    try:
        return get(port, target)[0] == 200
    except (OSError, http.client.HTTPException):  # refused, or closed before a status line
        return False


def assert_json_error(answer: Answer, expected: int) -> None:
    """An error in the service's shape: a JSON detail, the request id in X-Request-ID and in
    the body, whoever wrote it (nginx, the app's handlers, its deadline, its error guard)."""
    status, headers, body = answer
    assert status == expected, body[:300]
    assert headers["content-type"].startswith("application/json"), headers
    assert re.fullmatch(r"[0-9a-f]{32}", headers.get("x-request-id", "")), headers
    error = json.loads(body)
    assert error["detail"], error
    assert error["request_id"] == headers["x-request-id"], error


@dataclass
class LiveStack:
    """The runner's process, its ports and its log (every line of every process)."""

    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log_path: Path

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON line the stack wrote so far (runner, gunicorn, app, nginx)."""
        lines = []
        for raw in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):  # a line being written
                lines.append(json.loads(raw))
        return lines

    def access_lines(self) -> dict[str, dict[str, Any]]:
        """The app's access lines by request id: the requests that reached the app."""
        access = f"{PACKAGE}.access"
        return {line["request_id"]: line for line in self.log_lines() if line["logger"] == access}


def launch(run_dir: Path) -> LiveStack:
    """The stack as the image starts it, serving live_app.py with a short deadline."""
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
        # This project's deploy/ files, as edited: the stack runs from tests/live/ (below).
        "NGINX_CONF": str(HERE.parent.parent / "deploy" / "nginx.conf"),
        "GUNICORN_CONF": str(HERE.parent.parent / "deploy" / "gunicorn.conf.py"),
        "WEB_CONCURRENCY": "2",
        "NGINX_WORKER_PROCESSES": "1",
        # The app's access line says which requests (and ids) reached it (off by default).
        f"{prefix}_ACCESS_LOG": "true",
        "REQUEST_TIMEOUT_SECONDS": str(DEADLINE_SECONDS),
        # A stream that sends nothing for this long is cut (the live app's /events?stall=).
        f"{prefix}_STREAM_IDLE_TIMEOUT_SECONDS": str(STREAM_IDLE_SECONDS),
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


# Started once the tests are chosen, so it boots while the others run; the live ones run last.
LAUNCHED: list[LiveStack] = []


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    live = [item for item in items if item.path.is_relative_to(HERE)]
    items[:] = [item for item in items if item not in live] + live
    installed = shutil.which("nginx", path=SYSTEM_PATH) is not None
    if live and installed and not config.option.collectonly:
        LAUNCHED.append(launch(Path(tempfile.mkdtemp(prefix="live-stack-"))))


def pytest_sessionfinish() -> None:
    """TERM the runner, KILL it if it hangs: its children die with it (PR_SET_PDEATHSIG)."""
    for live in LAUNCHED:
        live.process.terminate()
        try:
            live.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            live.process.kill()
            live.process.wait(timeout=10)
        shutil.rmtree(live.log_path.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def stack() -> LiveStack:
    """The stack every test here shares, once it serves; test_contract.py's last test stops it."""
    if not LAUNCHED:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    live = LAUNCHED[0]
    # The metrics listener starts last: every process is up once it answers.
    wait_for(
        lambda: live.process.poll() is not None or answers(live.metrics_port, "/metrics"),
        60,
        "the stack's metrics listener to answer",
    )
    assert answers(live.port, "/livez"), live.log_path.read_text(errors="replace")
    return live
