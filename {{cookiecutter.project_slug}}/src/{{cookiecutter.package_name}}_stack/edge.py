"""The edge: per-client limits and CORS in nginx.conf, and the count of what nginx refused.

Renders deploy/nginx.conf's placeholders for the RATE_LIMIT* variables, CONNECTIONS_PER_CLIENT
and the app's CORS origins; counts nginx's refusals by a limit (429s, 503s, which never reach
the app) from the error lines the runner relays through ``LimitCounter.line``, into a
multiprocess file the metrics listener reads (nginx_limited_requests_total). Depends on
prometheus-client (imported only when counting starts), this package's jsonlog and metrics_files.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from .jsonlog import nginx_error_line, write_line
from .metrics_files import prepare_worker

if TYPE_CHECKING:
    from pathlib import Path

    from prometheus_client import Counter

    from .settings import StackSettings

# What nginx 1.22 writes for a refusal: `limiting requests[, dry run], excess: 1.000 by zone
# "client_rate"` and `limiting connections[, dry run] by zone "app_requests"`.
_LIMITED = re.compile(
    rb'\] \d+#\d+: \*\d+ limiting (requests|connections)(, dry run)?\b.*? by zone "(\w+)"'
)


def nginx_values(settings: StackSettings) -> dict[str, str]:
    """The placeholders of deploy/nginx.conf for the per-client limits and CORS."""
    indent = "\n        "
    if settings.rate_limit:
        per_second = settings.rate_limit
        zone = f"limit_req_zone $client_key zone=client_rate:10m rate={per_second}r/s;"
        # The burst is answered at once (delay=); past it, RATE_LIMIT_QUEUE_SECONDS of requests
        # wait their turn: a flood waits, it is not fed (docs/settings.md says why).
        queue = per_second * settings.rate_limit_queue_seconds
        burst = settings.rate_limit_burst + queue
        admitted = f" burst={burst}" if burst else ""
        instant = settings.rate_limit_burst
        waits = (f" delay={instant}" if instant else "") if queue else " nodelay"
        rate = f"limit_req zone=client_rate{admitted}{waits};"
        if settings.rate_limit_dry_run:
            rate += f"{indent}limit_req_dry_run on;   # RATE_LIMIT_DRY_RUN: count and log only"
    else:
        zone = "# RATE_LIMIT=0: no per-client rate limit."
        rate = "# RATE_LIMIT=0: no per-client rate limit."
    if settings.connections_per_client:
        connections = f"limit_conn client_requests {settings.connections_per_client};"
    else:
        connections = "# CONNECTIONS_PER_CLIENT=0: no per-client limit of requests in flight."
    if settings.cors_origins:
        # Matched only when the app sent no Access-Control-Allow-Origin (the key starts ":").
        origins = indent.join(f'":{origin}" "{origin}";' for origin in settings.cors_origins)
    else:
        origins = "# No CORS origins: nginx's errors carry no CORS headers, as the app's."
    return {
        "CLIENT_RATE_ZONE": zone,
        "CLIENT_RATE": rate,
        "CLIENT_CONNECTIONS": connections,
        "CORS_ORIGINS": origins,
    }


class LimitCounter:
    """Counts nginx's refusals by a limit, from its error lines, into this process's own file
    in the metrics directory (prometheus-client's multiprocess mode, as the workers')."""

    def __init__(self, metrics_dir: Path) -> None:
        self.counter: Counter | None = None
        # Allocated first, as the workers' (metrics_files.py): SIGBUS on a full RUN_DIR would
        # take the runner, and the whole stack, down. Refused: nginx's lines go uncounted.
        refused = prepare_worker(metrics_dir, os.getpid(), ("counter",))
        if refused is not None:
            said = {"directory": str(metrics_dir), "error": str(refused)}
            problem = "nginx's refusals are not counted: no room for the metric file"
            write_line("serve", "error", problem, **said)
            return
        # prometheus-client picks its multiprocess storage when first imported: set first.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        from prometheus_client import Counter  # noqa: PLC0415 - after the variable above

        self.counter = Counter(
            "nginx_limited_requests",
            "Requests nginx refused (or, in dry run, would have refused) by a limit: 429s by"
            " the per-client rate, 503s by the per-client or the overload connection limit",
            ["zone", "dry_run"],
            registry=None,  # read from the file by the listener, never served from here
        )
        # Every series exists from the start (at 0), so a dashboard's rate() has a baseline.
        for zone in ("client_rate", "client_requests", "app_requests"):
            for dry_run in ("false", "true"):
                self.counter.labels(zone=zone, dry_run=dry_run)

    def line(self, raw: bytes) -> str:
        """One nginx error line as the stack's JSON line, counted when it is a refusal."""
        match = _LIMITED.search(raw)
        if match is not None and self.counter is not None:
            dry_run = "true" if match[2] else "false"
            self.counter.labels(zone=match[3].decode("ascii"), dry_run=dry_run).inc()
        return nginx_error_line(raw)
