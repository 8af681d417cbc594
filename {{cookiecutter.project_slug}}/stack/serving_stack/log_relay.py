"""The children's output as the stack's JSON lines on stdout: cut into whole lines, each
converted (jsonlog), nginx's refusals by a limit counted on the way (LimitCounter).
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING

from .jsonlog import nginx_error_line, write_line
from .metrics_files import prepare_worker

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from prometheus_client import Counter

# What nginx 1.22 writes for a refusal: `limiting requests[, dry run], excess: 1.000 by zone
# "client_rate"` and `limiting connections[, dry run] by zone "app_requests"`.
_LIMITED = re.compile(
    rb'\] \d+#\d+: \*\d+ limiting (requests|connections)(, dry run)?\b.*? by zone "(\w+)"'
)

log = functools.partial(write_line, "serve")


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
    """Counts nginx's refusals by a limit (429s, 503s that never reach the app) from its error
    lines, into this process's own multiprocess file (the metrics listener serves it)."""

    def __init__(self, metrics_dir: Path) -> None:
        self.counter: Counter | None = None
        # Allocated first, as the workers' (metrics_files.py): SIGBUS on a full RUN_DIR would
        # take the runner, and the whole stack, down. Refused: nginx's lines go uncounted.
        if refused := prepare_worker(metrics_dir, os.getpid(), ("counter",)):
            problem = "nginx's refusals are not counted: no room for the metric file"
            log("error", problem, directory=str(metrics_dir), error=str(refused))
            return
        # prometheus-client picks its multiprocess storage when first imported: set first.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        from prometheus_client import Counter  # noqa: PLC0415 - after the variable above

        self.counter = Counter(
            "nginx_limited_requests",
            "Requests nginx refused (or, in dry run, would have refused) by a limit: 429s by"
            " the per-client rate or oversized bodies' queue, 503s by the per-client or the"
            " overload connection limit",
            ["zone", "dry_run"],
            registry=None,  # read from the file by the listener, never served from here
        )
        # Every series exists from the start (at 0), so a dashboard's rate() has a baseline.
        for zone in ("client_rate", "oversized", "client_requests", "app_requests"):
            for dry_run in ("false", "true"):
                self.counter.labels(zone=zone, dry_run=dry_run)

    def line(self, raw: bytes) -> str:
        """One nginx error line as the stack's JSON line, counted when it is a refusal."""
        match = _LIMITED.search(raw)
        if match is not None and self.counter is not None:
            dry_run = "true" if match[2] else "false"
            self.counter.labels(zone=match[3].decode("ascii"), dry_run=dry_run).inc()
        return nginx_error_line(raw)
