"""The generated projects' whole `make lint` + `make test`, run side by side in the background.

The default bake's and the postgresql bake's full suites are the two longest steps of the
template's run (about 8 and 10 minutes alone), and each keeps one of the machine's two CPUs
busy only part of the time (waits on servers, sockets, sleeps). Started together, the second
runs while the first waits: the template's run is shorter by most of the shorter suite, and
each suite still runs whole, in its own bake, venv, ports and PostgreSQL server. The tests
that measure speed or noise (tests/test_bench.py) call wait_all() first, so nothing of these
suites runs beside a measurement.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from .conftest import ProjectEnv

TARGETS = ("lint", "test")


@dataclass
class FullSuite:
    """`make lint`, then (if it passed) `make test`, of one bake, in a thread of its own."""

    env: ProjectEnv
    project: Path
    results: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    _process: subprocess.Popen[str] | None = None
    _stopped: bool = False
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"suite {self.project}")
        self._thread.start()

    def _run(self) -> None:
        for target in TARGETS:
            command = ["make", "--no-print-directory", "-C", str(self.project), target]
            with self._lock:
                if self._stopped:
                    return
                # A session of its own: stop() ends make and every server its tests started.
                self._process = subprocess.Popen(
                    [*command, f"VENV={self.env.venv}"],
                    env=self.env.environ(self.project),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            stdout, stderr = self._process.communicate()
            result = subprocess.CompletedProcess(command, self._process.returncode, stdout, stderr)
            self.results.append(result)
            if result.returncode != 0:
                return

    def wait(self) -> list[subprocess.CompletedProcess[str]]:
        """Every target's result, in order, once the suite has finished."""
        if self._thread is not None:
            self._thread.join()
        return self.results

    def stop(self) -> None:
        """End a suite still running (the session was interrupted or stopped on a failure)."""
        with self._lock:
            self._stopped = True
            if self._process is not None and self._process.poll() is None:
                os.killpg(self._process.pid, signal.SIGTERM)
        self.wait()


class FullSuites:
    """The full suites the session selected, started at once on first use."""

    def __init__(self, suites: dict[str, FullSuite]) -> None:
        self._suites = suites
        for suite in suites.values():
            suite.start()

    def result(self, name: str) -> list[subprocess.CompletedProcess[str]]:
        return self._suites[name].wait()

    def wait_all(self) -> None:
        for suite in self._suites.values():
            suite.wait()

    def stop(self) -> None:
        for suite in self._suites.values():
            suite.stop()
