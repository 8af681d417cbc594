"""The children's output as JSON lines on stdout, in whole lines; nginx's refusals counted."""

from __future__ import annotations

import functools
import os
import re
import time
from typing import TYPE_CHECKING

from .child_lines import nginx_error_line
from .jsonlog import json_line, write_line
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

log = functools.partial(write_line, "supervisor")


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

    def _count(self, counter: Counter | None, **labels: str) -> None:
        """Increment, and say once (never raise) when the metric file refuses."""
        if counter is None:
            return
        try:
            (counter.labels(**labels) if labels else counter).inc()
        except Exception as exc:  # noqa: BLE001 - the relay must outlive any error
            if not self.failed:
                self.failed = True
                log("error", "nginx's refusals are no longer counted", error=repr(exc))
