"""Processes started each in a process group of its own and stopped with the whole group.

Stopping is TERM, a grace period, then KILL to the leader's group and to every group one of
its descendants leads (the serving stack's nginx and gunicorn lead their own), so no worker
outlives its test or benchmark, even on Ctrl-C or an error. Output goes to a log file, or
through a pipe into a small in-memory tail (a server under load for minutes logs gigabytes),
shown when a server fails to start.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness import procfs
from harness.clients import status

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path

READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 15.0  # a server that has not stopped 15 s after TERM is killed
OUTPUT_SHOWN = 4000  # characters of a failed server's output in an error


class ServerError(RuntimeError):
    """A server did not start or answer; the message carries the end of its output."""


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path | None = None  # its output, or None: the tail below
    tail: collections.deque[bytes] = field(default_factory=lambda: collections.deque(maxlen=64))
    drain: threading.Thread | None = None

    def output(self) -> str:
        if self.log is not None:
            return self.log.read_text(encoding="utf-8", errors="replace")[-OUTPUT_SHOWN:]
        return b"".join(self.tail).decode("utf-8", "replace")[-OUTPUT_SHOWN:]


class Processes:
    """Owns every process it starts; `stop_all` leaves none running."""

    def __init__(self, grace: float = STOP_GRACE_S) -> None:
        self.grace = grace
        self.running: list[Process] = []

    def start(  # noqa: PLR0913 - the output's two ways by keyword
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        log: Path | None = None,
        *,
        stdout: int | None = None,
    ) -> Process:
        """Start argv; its output to log, else to the file descriptor stdout, else the tail."""
        with contextlib.ExitStack() as files:
            output = files.enter_context(log.open("wb")) if log else stdout or subprocess.PIPE
            popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        process = Process(name, popen, log)
        self.running.append(process)
        if log is None and stdout is None:
            process.drain = threading.Thread(target=_drain, args=(process,), daemon=True)
            process.drain.start()
        return process

    def stop(self, process: Process, groups: Iterable[int] = ()) -> None:
        """Stop process, its group, the groups its descendants lead, and groups."""
        leader = process.popen.pid  # start_new_session: the group id is the leader's pid
        doomed = {leader, *groups, *(proc.group for proc in procfs.tree(leader))}
        doomed.discard(os.getpgrp())  # never the caller's own group
        if process.popen.poll() is None:
            _signal_group(leader, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(self.grace)
        # Whatever is left: a SIGKILL is delivered, not awaited, so wait (bounded) for it.
        for group in doomed:
            _signal_group(group, signal.SIGKILL)
        process.popen.wait()
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline:
            if not doomed & {proc.group for proc in procfs.table().values() if proc.alive}:
                break
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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def _drain(process: Process) -> None:
    stream = process.popen.stdout
    if stream is None:
        return
    # os.read returns what is there: the tail stays current without waiting for 64 KiB.
    while chunk := os.read(stream.fileno(), 65536):
        process.tail.append(chunk)


def wait_ready(
    process: Process,
    address: Path | tuple[str, int],
    path: str,
    timeout: float = READY_TIMEOUT_S,
) -> None:
    """Wait until GET path answers 200 at address; fail fast if the process dies."""
    deadline = time.monotonic() + timeout
    answered = None
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise ServerError(
                f"{process.name} exited with {process.popen.returncode} before answering:\n"
                f"{process.output()}"
            )
        answered = status(address, path)
        if answered == 200:
            return
        if answered == 500:  # the app itself fails (a proxy's 502 may just mean "not yet")
            break
        time.sleep(0.1)
    raise ServerError(f"{process.name}: GET {path} answered {answered}:\n{process.output()}")
