"""The children's output as JSON lines on stdout, in whole lines, never blocking the loop;
nginx's refusals counted."""

from __future__ import annotations

import contextlib
import os
import re
import select
import time
from typing import TYPE_CHECKING

from .child_lines import nginx_error_line
from .jsonlog import json_line
from .metrics_files import prepare_worker

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

    from prometheus_client import Counter

# nginx's refusal lines, from the first byte to the ", client: " nginx appends: all of it nginx's
# own text. What a client wrote (request line, Host, Referer) comes after and can imitate one.
_LIMITED = re.compile(
    rb"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\w+\] \d+#\d+: \*\d+ "
    rb"limiting (requests|connections)(, dry run)?(?:, excess: \d+\.\d{3})? "
    rb'by zone "([^"\s]+)", client: '
)
# An error line is cut here before it is read, so a client's long request line, Host and Referer
# cannot make the relay's CPU and the log's bytes its own (README.md's design notes).
MAX_ERROR_LINE = 1024
# Error lines relayed a second at most; the rest dropped and counted (refusals counted first).
ERROR_LINES_PER_SECOND = 200

# Bytes stdout has not taken yet that the supervisor holds; past this, lines are dropped.
BACKLOG = 1 << 20
DROPPED = "log lines were dropped: stdout did not take them"


class Output:
    """The supervisor's stdout, never blocking and never raising (README.md's design notes):
    what its reader has not taken waits, BACKLOG bytes at most; lines past that, or that a
    closed stdout refuses, are dropped and counted, and said in one line once stdout takes
    lines again."""

    def __init__(self, fd: int = 1) -> None:
        self.fd = fd
        self.pending = bytearray()
        self.dropped = 0  # since last said
        self.counted: Callable[[int], object] = lambda _: None  # the metric, once made

    def start(self) -> None:
        """Before serving: stdout non-blocking; closed (`>&-`), /dev/null, so that no pipe of
        ours becomes fd 1."""
        try:
            os.fstat(self.fd)
        except OSError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.fd)
        os.set_blocking(self.fd, False)

    def stop(self, timeout: float = 1.0) -> None:
        """At exit: what waits gets up to timeout to be written; stdout blocking again (a
        terminal's is the shell's too)."""
        deadline = time.monotonic() + timeout
        while not self.flush() and (left := deadline - time.monotonic()) > 0:
            select.select([], [self.fd], [], left)
        with contextlib.suppress(OSError):
            os.set_blocking(self.fd, True)

    def write(self, data: bytes) -> None:
        """Whole lines to write now, or as soon as stdout takes them, or to drop past BACKLOG."""
        if len(self.pending) + len(data) > BACKLOG:
            self.flush()  # what stdout takes now makes room first
        if len(self.pending) + len(data) > BACKLOG:
            self._drop(data.count(b"\n"))
            return
        self.pending += data
        self.flush()

    def flush(self) -> bool:
        """Write what waits, as far as stdout takes it now; True when nothing is left."""
        while self.pending:
            try:
                written = os.write(self.fd, self.pending)
            except BlockingIOError:
                return False
            except OSError:  # no reader (EPIPE), a full disk: these lines are lost
                self._drop(self.pending.count(b"\n"))
                self.pending.clear()
                return True
            del self.pending[:written]
            if not self.pending and self.dropped:
                said = json_line("supervisor", "warning", DROPPED, dropped=self.dropped)
                self.pending += said.encode("ascii") + b"\n"
                self.dropped = 0
        return True

    def _drop(self, lines: int) -> None:
        self.dropped += lines
        self.counted(lines)


OUTPUT = Output()


def log(level: str, message: str, /, **fields: object) -> None:
    """One line of the supervisor's own, through OUTPUT."""
    OUTPUT.write(json_line("supervisor", level, message, **fields).encode("ascii") + b"\n")


class LineRelay:
    """Cuts a child's output into whole lines for ``convert`` (lines -> JSON lines to write)."""

    # A line longer than this is passed on in pieces rather than held without bound.
    LIMIT = 1 << 16

    def __init__(self, convert: Callable[[bytes], bytes]) -> None:
        self.convert = convert
        self.pending = b""

    def feed(self, data: bytes) -> bytes:
        """What to write for this chunk; b"" at the end of the stream flushes the rest."""
        if not data:
            rest, self.pending = self.pending, b""
            return self.convert(rest) if rest.strip() else b""
        data = self.pending + data
        complete, newline, self.pending = data.rpartition(b"\n")
        if len(self.pending) > self.LIMIT:
            complete, newline, self.pending = data, b"\n", b""
        return self.convert(complete) if newline else b""


class LimitCounter:
    """Counts nginx's refusals by a limit from its error lines, into this process's metric file."""

    def __init__(
        self, metrics_dir: Path, zones: Iterable[str], budget: int = ERROR_LINES_PER_SECOND
    ) -> None:
        # The rendered config's zones (nginx_conf.declared_zones), the only labels counted: the
        # counter file's series are fixed at start and it never grows.
        self.zones = frozenset(zones)
        self.counter: Counter | None = None
        self.dropped_counter: Counter | None = None
        self.budget = budget
        # The second (monotonic) the budget is for, the lines it relayed and dropped.
        self.second, self.relayed, self.dropped = 0, 0, 0
        self.failed = False  # a counter raised once: said once
        # Allocated first, as the workers': SIGBUS on a full RUN_DIR would take the supervisor down.
        if refused := prepare_worker(metrics_dir, os.getpid(), ("counter",)):
            problem = "nginx's refusals are not counted: no room for the metric file"
            log("error", problem, directory=str(metrics_dir), error=str(refused))
            return
        # prometheus-client picks its multiprocess storage when first imported: set first.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        from prometheus_client import Counter  # noqa: PLC0415 - after the variable above

        self.counter = Counter(
            "nginx_limited_requests",
            "Requests nginx refused (or, in dry run, would have refused) by a limit, by its"
            " zone in nginx.conf: 429s by a rate, 503s by a connection limit",
            ["zone", "dry_run"],
            registry=None,  # read from the file by the listener, never served from here
        )
        self.dropped_counter = Counter(
            "nginx_log_lines_dropped",
            "nginx error lines not written: over the relay's budget of lines a second",
            registry=None,
        )
        stdout_dropped = Counter(
            "stdout_lines_dropped",
            "Log lines of every process not written: stdout had no reader, or took none for"
            f" longer than the supervisor's backlog of {BACKLOG} bytes holds",
            registry=None,
        )
        OUTPUT.counted = lambda lines: self._count(stdout_dropped, lines)
        # Every series exists from the start (at 0), so a dashboard's rate() has a baseline.
        for zone in self.zones:
            for dry_run in ("false", "true"):
                self.counter.labels(zone=zone, dry_run=dry_run)

    def line(self, raw: bytes) -> str:
        """An nginx error line as JSON, counted when a refusal; "" past the second's budget."""
        raw = raw[:MAX_ERROR_LINE]
        match = _LIMITED.match(raw)
        if match is not None and (zone := match[3].decode("ascii")) in self.zones:
            dry_run = "true" if match[2] else "false"
            self._count(self.counter, zone=zone, dry_run=dry_run)
        said = self._over_budget()
        return "" if said is None else said + nginx_error_line(raw)

    def _over_budget(self) -> str | None:
        """None to drop this line; else what to write first: "", or last second's drops said."""
        now = int(time.monotonic())
        said = ""
        if now != self.second:
            if self.dropped:
                said = json_line(
                    "supervisor",
                    "warning",
                    "nginx's error lines over the budget were dropped",
                    dropped=self.dropped,
                    lines_per_second=self.budget,
                )
                said += "\n"
            self.second, self.relayed, self.dropped = now, 0, 0
        if self.relayed >= self.budget:
            self.dropped += 1
            self._count(self.dropped_counter)
            return None
        self.relayed += 1
        return said

    def _count(self, counter: Counter | None, amount: int = 1, **labels: str) -> None:
        """Increment, and say once (never raise) when the metric file refuses."""
        if counter is None:
            return
        try:
            (counter.labels(**labels) if labels else counter).inc(amount)
        except Exception as exc:  # noqa: BLE001 - the relay must outlive any error
            if not self.failed:
                self.failed = True
                log("error", "nginx's refusals are no longer counted", error=repr(exc))
