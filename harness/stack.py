"""A serving stack, started as the container starts it: `python -m serving_stack`, the
stack's public command line, with only an environment, a working directory and a run dir.

Each stack gets a work directory of its own: RUN_DIR is work/run (nginx's config, the
sockets, the metrics files), and work/stack.log holds every line the stack writes (the
supervisor's, gunicorn's, the app's and nginx's JSON). Ports are free ones on 127.0.0.1, never
the defaults: stacks run side by side, and one may be a developer's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.ports import free_port
from harness.processes import ServerError, wait_ready

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from harness.processes import Process, Processes

MODULE = "serving_stack"  # the stack's distribution has this name in every bake
# nginx, where Debian puts it: an ordinary user's PATH often lacks /usr/sbin.
PATH = f"{os.environ.get('PATH', os.defpath)}{os.pathsep}/usr/sbin"


def json_lines(log: Path) -> list[dict[str, object]]:
    """The JSON objects of a log, one a line (other lines left out)."""
    lines = []
    for raw in log.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            if isinstance(parsed := json.loads(raw), dict):
                lines.append(parsed)
    return lines


def started(log: Path) -> list[int]:
    """Pids of every process a supervisor logged as started (`make serve`'s too)."""
    return [
        pid
        for line in json_lines(log)
        if line.get("logger") == "supervisor"
        and str(line.get("message", "")).startswith("started ")
        and isinstance(pid := line.get("pid"), int)
    ]


@dataclass
class RunningStack:
    """One running `python -m serving_stack`."""

    supervisor: Process
    port: int
    metrics_port: int
    workdir: Path
    processes: Processes  # its owner, which stops it

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self.supervisor.popen

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def run_dir(self) -> Path:
        return self.workdir / "run"

    @property
    def log_path(self) -> Path:
        return self.workdir / "stack.log"

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "gunicorn.sock"

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_lines(self) -> list[dict[str, object]]:
        """Every JSON line the stack wrote so far (supervisor, gunicorn, app, nginx)."""
        return json_lines(self.log_path)

    def children(self) -> list[int]:
        """Pids of every process the supervisor logged as started (each leads its process group)."""
        return started(self.log_path)

    def child_pid(self, name: str) -> int:
        """The pid of the first child the supervisor logged as started ("nginx", "gunicorn")."""
        for line in self.log_lines():
            if line.get("logger") == "supervisor" and line.get("message") == f"started {name}":
                pid = line["pid"]
                if isinstance(pid, int):
                    return pid
        raise LookupError(f"the supervisor never logged starting {name}:\n{self.log_text()}")

    def wait_ready(
        self, path: str = "/livez", timeout: float = 90, *, metrics: bool = False
    ) -> None:
        """Wait until GET path answers 200 (through nginx, or on the metrics port)."""
        port = self.metrics_port if metrics else self.port
        wait_ready(self.supervisor, ("127.0.0.1", port), path, timeout)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            message = f"the supervisor was still running after {timeout:g} s:\n{self.log_text()}"
            raise ServerError(message) from None

    def stop(self) -> None:
        """Stop the supervisor and every process group it logged as started, even after it died."""
        self.processes.stop(self.supervisor, self.children() if self.supervisor.log else [])


def start(  # noqa: PLR0913 - what differs between callers, all by keyword
    processes: Processes,
    workdir: Path,
    env: Mapping[str, str],
    *,
    python: str,
    cwd: Path,
    prefix: Sequence[str] = (),
    owner: tuple[int, int] | None = None,
    log: bool = True,
    stdout: int | None = None,
) -> RunningStack:
    """Start `python -m serving_stack` with env over this process's environment.

    prefix runs before the interpreter (setpriv, to drop root); owner (uid, gid) then owns
    the run dir, which that user must write. Without log, only the tail of the output is
    kept, in memory (a stack under load for minutes writes gigabytes), and the log methods
    have nothing to read; given stdout (a file descriptor), the output goes there instead.
    The caller waits for readiness (wait_ready).
    """
    run_dir = workdir / "run"
    run_dir.mkdir(mode=0o755)
    if owner is not None:
        os.chown(run_dir, *owner)
    port, metrics_port = free_port(), free_port()
    # A parent's multiprocess directory would mix another server's metrics into the stack's.
    inherited = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    environment = {
        **inherited,
        "PATH": PATH,
        "RUN_DIR": str(run_dir),
        "PORT": str(port),
        "METRICS_PORT": str(metrics_port),
        "LISTEN_ADDRESS": "127.0.0.1",
        **env,
    }
    argv = [*prefix, python, "-m", MODULE]
    output = workdir / "stack.log" if log and stdout is None else None
    supervisor = processes.start("stack", argv, environment, cwd, output, stdout=stdout)
    return RunningStack(supervisor, port, metrics_port, workdir, processes)
