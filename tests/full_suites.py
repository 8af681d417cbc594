"""The generated projects' whole runs, side by side in the background: threads of steps.

The default bake's `make lint` and `make test`, the battery (battery/, the heavy proofs of the
service's promises, run as `./scripts/battery` would against a bake of its own, kubernetes=true
for its probe tests), and the postgresql bake's documented changes (a route and a migration
added as its README and docs/database.md say), `make lint`, `make test` and the battery's
database and probe tests (restarts under load, readiness while the database is stopped), are
the longest steps of the template's run. Each keeps one of the machine's two CPUs busy only
part of the time (waits on servers, sockets, sleeps): started together, one runs while the
other waits, and each still runs whole, in its own bake, venv, ports and PostgreSQL server.
The tests that measure speed or noise call wait_all() first, so nothing of these suites runs
beside a measurement.

The lab's commands that count instructions (the cost gate, the lab's own tests, the floors) or
judge no ratio (the experiment grid, the CPU share) are a suite too: each keeps one CPU busy
for up to a minute, and in the foreground, after the bakes' suites had ended, the other CPU
waited (a cold run's CPU use was 73 % on average, about 50 % for its last five minutes). It
starts when other suites have ended (``after``): started with the others, it slowed the battery
from 5 to 11 minutes. Each step's start and end are kept (``spans``); the session's summary
prints them."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


@dataclass(frozen=True)
class Step:
    """One command of a suite; ``name`` is what results are looked up and reported by."""

    name: str
    command: list[str]
    cwd: Path | None = None
    env: Mapping[str, str] | None = None  # instead of the suite's environment


@dataclass
class FullSuite:
    """Steps run in order in a thread of their own, each whatever the previous one gave."""

    steps: list[Step]
    env: Mapping[str, str]
    # Suites that must end before this one starts: what keeps this one off the CPUs its
    # neighbours are busiest on (the lab's suite waits for the postgresql bake's), or what
    # it reads (the rollout's, the images).
    after: tuple[FullSuite, ...] = ()
    results: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    # Each step's start and end, in seconds of time.monotonic(), in order: where the time went.
    spans: list[tuple[str, float, float]] = field(default_factory=list)
    _process: subprocess.Popen[str] | None = None
    _stopped: bool = False
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ended: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"suite {self.steps[0].name}")
        self._thread.start()

    def _run(self) -> None:
        try:
            for first in self.after:
                first._ended.wait()
            self._run_steps()
        finally:
            self._ended.set()

    def _run_steps(self) -> None:
        for step in self.steps:
            with self._lock:
                if self._stopped:
                    return
                # A session of its own: stop() ends the step and every server it started.
                self._process = subprocess.Popen(
                    step.command,
                    cwd=step.cwd,
                    env=dict(self.env if step.env is None else step.env),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            started = time.monotonic()
            stdout, stderr = self._process.communicate()
            self.spans.append((step.name, started, time.monotonic()))
            code = self._process.returncode
            # On, even after a failure: each step's own result says more than "not run".
            self.results.append(subprocess.CompletedProcess([step.name], code, stdout, stderr))

    def wait(self) -> list[subprocess.CompletedProcess[str]]:
        """Every step's result (``args`` is ``[step name]``), in order, once the suite ended."""
        if self._thread is not None:
            self._thread.join()
        return self.results

    def stop(self) -> None:
        """End a suite still running (the session was interrupted or stopped on a failure)."""
        with self._lock:
            self._stopped = True
            if self._process is not None and self._process.poll() is None:
                os.killpg(self._process.pid, signal.SIGTERM)


class FullSuites:
    """The full suites the session selected, started at once on first use."""

    def __init__(self, suites: dict[str, FullSuite]) -> None:
        self._suites = suites
        self._started = time.monotonic()
        for suite in suites.values():
            suite.start()

    def result(self, name: str) -> list[subprocess.CompletedProcess[str]]:
        return self._suites[name].wait()

    def step(self, suite: str, name: str) -> subprocess.CompletedProcess[str]:
        """One step's result, by its name, once the suite ended."""
        (found,) = [step for step in self.result(suite) if step.args[0] == name]
        return found

    def wait_all(self) -> None:
        for suite in self._suites.values():
            suite.wait()

    def stop(self) -> None:
        for suite in self._suites.values():
            suite.stop()
        self.wait_all()

    def timeline(self) -> list[str]:
        """A line a step: its suite, name, and start and end in minutes since the suites began."""
        return [
            f"{name:<18} {step:<20} {(start - self._started) / 60:5.1f} -> "
            f"{(end - self._started) / 60:5.1f} min"
            for name, suite in self._suites.items()
            for step, start, end in suite.spans
        ]
