"""Start and stop the servers one configuration needs, on 127.0.0.1, inside a temp directory.

Every process is started in a process group of its own and stopped with its whole group
(TERM, then KILL after a grace period) in a `finally`, so gunicorn's or nginx's workers never
outlive the benchmark, even on Ctrl-C or an error. Their output goes through a pipe into a
small in-memory tail (the app logs every request: files would grow by gigabytes), shown when
a server fails to start.

Inputs: the project (lab/project.py: its deploy/gunicorn.conf.py and deploy/nginx.conf, its
app factory for lab/apps.py) and the Python running the lab, the project's own, which has
gunicorn and uvicorn.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lab import nginx
from lab.project import FACTORY_VARIABLE

if TYPE_CHECKING:
    from lab.experiments import Stack
    from lab.project import Project

READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 15.0


class ServerError(RuntimeError):
    """A server did not start or answer; the message carries the tail of its output."""


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    tail: collections.deque[bytes] = field(default_factory=lambda: collections.deque(maxlen=64))
    drain: threading.Thread | None = None

    def output(self) -> str:
        return b"".join(self.tail).decode("utf-8", "replace")[-4000:]


class Processes:
    """Owns every process the benchmark starts; `stop_all` leaves none running."""

    def __init__(self) -> None:
        self.running: list[Process] = []

    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> Process:
        popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole
        )
        process = Process(name, popen)
        self.running.append(process)
        process.drain = threading.Thread(target=_drain, args=(process,), daemon=True)
        process.drain.start()
        return process

    def stop(self, process: Process) -> None:
        group = process.popen.pid  # start_new_session: the group id is the leader's pid
        if process.popen.poll() is None:
            _signal_group(group, signal.SIGTERM)
            try:
                process.popen.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(group, signal.SIGKILL)
                process.popen.wait()
        # Workers whose master died first would linger in the group: make sure, and wait
        # (bounded) for them to go: a SIGKILL is delivered, not awaited.
        _signal_group(group, signal.SIGKILL)
        deadline = time.monotonic() + STOP_GRACE_S
        while group_members(group) and time.monotonic() < deadline:
            time.sleep(0.02)
        if process.drain is not None:
            process.drain.join(timeout=5)  # EOF once every holder of the pipe is gone
        if process.popen.stdout is not None:
            process.popen.stdout.close()
        if process in self.running:
            self.running.remove(process)

    def stop_all(self) -> None:
        # Reverse order: nginx before the app it proxies to.
        for process in reversed(list(self.running)):
            self.stop(process)


def _signal_group(group: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signum)


def group_members(group: int) -> list[int]:
    """The running processes of a process group (a zombie is not running)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def _drain(process: Process) -> None:
    stream = process.popen.stdout
    if stream is None:
        return
    # os.read returns what is there: the tail stays current without waiting for 64 KiB.
    while chunk := os.read(stream.fileno(), 65536):
        process.tail.append(chunk)


def free_port() -> int:
    """A TCP port nothing listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(self.path))


def _get_status(address: Path | tuple[str, int], path: str) -> int | None:
    if isinstance(address, Path):
        connection: http.client.HTTPConnection = _UnixHTTPConnection(address)
    else:
        connection = http.client.HTTPConnection(*address, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
    except OSError:
        return None
    else:
        return response.status
    finally:
        connection.close()


def wait_ready(process: Process, address: Path | tuple[str, int], path: str) -> None:
    """Wait until GET path answers 200 at address; fail fast if the process dies."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    status = None
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise ServerError(
                f"{process.name} exited with {process.popen.returncode} before answering:\n"
                f"{process.output()}"
            )
        status = _get_status(address, path)
        if status == 200:
            return
        if status == 500:  # the app itself fails (a proxy's 502 may just mean "not yet")
            break
        time.sleep(0.1)
    raise ServerError(f"{process.name}: GET {path} answered {status}:\n{process.output()}")


def shipped_worker_count(project: Project) -> int:
    """The worker count deploy/gunicorn.conf.py decides on this machine (WEB_CONCURRENCY...)."""
    # gunicorn.conf.py names the app it serves, which the stack refuses to leave unset.
    os.environ.setdefault("APP_MODULE", project.app_module)
    namespace = runpy.run_path(str(project.gunicorn_conf))
    return int(namespace["workers"])


class Launcher:
    """Starts the processes of a Stack and returns the URL wrk should load."""

    def __init__(self, project: Project, workdir: Path, processes: Processes) -> None:
        self.project = project
        self.workdir = workdir
        self.processes = processes
        self.count = 0
        self.env = dict(os.environ)
        # The template's root for `lab` (the servers import lab.apps), the project's src/ for
        # its packages when they are not installed.
        paths = [
            str(Path(__file__).resolve().parent.parent),
            str(project.root / "src"),
            str(project.root / "stack"),
        ]
        paths.append(self.env.get("PYTHONPATH", ""))
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        if project.factory is not None:
            self.env[FACTORY_VARIABLE] = project.factory

    def start(self, stack: Stack, ready_path: str) -> str:
        self.count += 1
        run_dir = self.workdir / f"stack-{self.count}"
        run_dir.mkdir()
        via_socket = stack.front is not None and stack.front.transport == "unix"
        socket_path = run_dir / "gunicorn.sock"
        app_address: Path | tuple[str, int] = (
            socket_path if via_socket else ("127.0.0.1", free_port())
        )
        app = self._start_app(stack, run_dir, app_address)
        wait_ready(app, app_address, ready_path)
        if stack.front is None:
            assert isinstance(app_address, tuple)  # noqa: S101 - narrowed above for mypy
            return f"http://127.0.0.1:{app_address[1]}"
        site = nginx.prepare(self.project, run_dir / "nginx", free_port(), stack.front, app_address)
        # Every process runs in the project directory: easy to find, by cwd, if one survived.
        env = {"PATH": self.env["PATH"], "TZ": "UTC"}
        proxy = self.processes.start("nginx", site.command, env, self.project.root)
        wait_ready(proxy, ("127.0.0.1", site.port), ready_path)
        return f"http://127.0.0.1:{site.port}"

    def _start_app(self, stack: Stack, run_dir: Path, address: Path | tuple[str, int]) -> Process:
        module = stack.app if ":" in stack.app else f"lab.apps:{stack.app}"
        env = dict(self.env, **dict(stack.env))
        if stack.server == "uvicorn":
            if not isinstance(address, tuple) or stack.workers is None:
                raise ValueError("uvicorn runs only directly on TCP with an explicit worker count")
            argv = [
                sys.executable, "-m", "uvicorn", module,
                "--host", address[0], "--port", str(address[1]),
                "--workers", str(stack.workers),
                # As gunicorn.conf.py: the app logs each request itself; nginx's keepalive.
                "--no-access-log", "--timeout-keep-alive", "75",
            ]  # fmt: skip
            return self.processes.start(f"uvicorn ({stack.app})", argv, env, self.project.root)
        env.update(APP_MODULE=module, RUN_DIR=str(run_dir))
        if stack.workers is not None:
            env["WEB_CONCURRENCY"] = str(stack.workers)
        argv = [
            sys.executable,
            "-m",
            "gunicorn",
            "--config",
            str(self.project.gunicorn_conf),
        ]
        if isinstance(address, Path):
            env["GUNICORN_SOCKET"] = str(address)
        else:
            argv += ["--bind", f"{address[0]}:{address[1]}"]
        if stack.server == "gunicorn-asgi":
            argv += ["--worker-class", "asgi"]
        if stack.threads is not None:
            argv += ["--threads", str(stack.threads)]
        return self.processes.start(
            f"gunicorn ({stack.server}, {stack.app})", argv, env, self.project.root
        )
