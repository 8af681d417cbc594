"""Start the servers one configuration needs (gunicorn or uvicorn, then nginx in front), on
127.0.0.1, inside a temp directory, through the shared harness (harness/processes.py), which
stops each with its whole process group.

Inputs: the project (lab/project.py: its stack's gunicorn_conf.py and nginx.conf, its app
factory for lab/apps.py) and the Python running the lab, the project's own, which has
gunicorn and uvicorn.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.ports import free_port
from harness.processes import wait_ready
from lab import nginx
from lab.project import FACTORY_VARIABLE

if TYPE_CHECKING:
    from harness.processes import Process, Processes
    from lab.experiments import ServerSet
    from lab.project import Project


def shipped_worker_count(project: Project) -> int:
    """The worker count the stack's gunicorn config decides on this machine (WEB_CONCURRENCY...)."""
    # The config names the app it serves, which the stack refuses to leave unset.
    os.environ.setdefault("APP_MODULE", project.app_module)
    namespace = runpy.run_path(str(project.gunicorn_conf))
    return int(namespace["workers"])


class Launcher:
    """Starts the processes of a ServerSet and returns the URL wrk should load."""

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

    def start(self, stack: ServerSet, ready_path: str) -> str:
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

    def _start_app(
        self, stack: ServerSet, run_dir: Path, address: Path | tuple[str, int]
    ) -> Process:
        module = stack.app if ":" in stack.app else f"lab.apps:{stack.app}"
        env = dict(self.env, **dict(stack.env))
        if stack.server == "uvicorn":
            if not isinstance(address, tuple) or stack.workers is None:
                raise ValueError("uvicorn runs only directly on TCP with an explicit worker count")
            argv = [sys.executable, "-m", "uvicorn", module, "--host", address[0]]
            argv += ["--port", str(address[1]), "--workers", str(stack.workers)]
            # As the stack's gunicorn config: the app logs each request itself; nginx's keepalive.
            argv += ["--no-access-log", "--timeout-keep-alive", "75"]
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
