"""nginx.conf from the project's template: every @NAME@ placeholder replaced by a value the
settings decide (limits, timeouts, addresses, CORS), written atomically into RUN_DIR.

``python -m serving_stack render`` runs ``write_nginx_conf``; the project owns the template
(deploy/nginx.conf, NGINX_CONF), the stack only fills it in.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .cpus import CGROUP_ROOT, SELF_CGROUP, usable_cpus
from .errors import ServeError
from .settings import UPSTREAM_KEEPALIVE_TIME, StackSettings

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

APT_HINT = "nginx is not installed; install it with: sudo apt-get install -y nginx-light"
# NGINX_WORKER_PROCESSES=auto: one nginx worker per this many usable CPUs, at least one
# (measured: docs/serving.md, "How the runner works").
CPUS_PER_NGINX_WORKER = 4
_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")


def render(template: str, values: Mapping[str, str]) -> str:
    """Replace every @NAME@ in template; an unknown or missing name is an error."""
    missing = sorted(set(_PLACEHOLDER.findall(template)) - set(values))
    if missing:
        raise ServeError(f"no value for placeholder(s) {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def nginx_time(seconds: float) -> str:
    """A duration as nginx reads it: seconds, or milliseconds for a fraction (30.5 -> 30500ms)."""
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def nginx_workers(
    settings: StackSettings, root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP
) -> tuple[int, dict[str, Any]]:
    """nginx's worker count and its source: NGINX_WORKER_PROCESSES, or the CPUs cpus.py counts."""
    if settings.nginx_worker_processes != "auto":
        return int(settings.nginx_worker_processes), {"source": "NGINX_WORKER_PROCESSES"}
    cpus, facts = usable_cpus(root, self_cgroup)
    workers = -(-cpus // CPUS_PER_NGINX_WORKER)  # rounded up: at least one
    return workers, {"source": "cpus", "cpus": cpus, **facts}


def nginx_values(
    settings: StackSettings, upstream_socket: Path, workers: int | None = None
) -> dict[str, str]:
    """deploy/nginx.conf's placeholder values; ``workers`` unset: as nginx_workers() decides."""
    if workers is None:
        workers = nginx_workers(settings)[0]
    address, proxies = settings.listen_address, settings.trusted_proxies
    if proxies:
        real_ip = "\n    ".join(
            [f"set_real_ip_from {cidr};" for cidr in proxies]
            + ["real_ip_header X-Forwarded-For;", "real_ip_recursive on;"]
        )
    else:
        real_ip = "# TRUSTED_PROXIES is empty: no load balancer may set the client address."
    # The same peers may say which scheme the client used (nginx.conf's $forwarded_proto).
    trusted_geo = "\n    ".join(
        ["geo $realip_remote_addr $from_trusted_proxy {", "    default 0;"]
        + [f"    {cidr} 1;" for cidr in proxies]
        + ["}"]
    )
    if "*" in (hosts := settings.allowed_hosts):
        allowed = '"~." 1;   # ALLOWED_HOSTS=*: any Host'
    else:  # nginx's $host keeps an IPv6 address in brackets
        allowed = "\n        ".join(f"{f'[{h}]' if ':' in h else h} 1;" for h in hosts)
    if per_second := settings.rate_limit:
        zone = f"limit_req_zone $client_key zone=client_rate:10m rate={per_second}r/s;"
        # The burst is answered at once (delay=); past it, RATE_LIMIT_QUEUE_SECONDS of requests
        # wait their turn: a flood waits, it is not fed (docs/settings.md says why).
        queue, instant = per_second * settings.rate_limit_queue_seconds, settings.rate_limit_burst
        admitted = f" burst={instant + queue}" if instant + queue else ""
        waits = (f" delay={instant}" if instant else "") if queue else " nodelay"
        rate = f"limit_req zone=client_rate{admitted}{waits};"
        # The probes' own rate (deploy/nginx.conf, zone probes): on with the per-client one.
        rate += "\n        limit_req zone=probes burst=50 delay=10;"
        if settings.rate_limit_dry_run:
            rate += "\n        limit_req_dry_run on;   # RATE_LIMIT_DRY_RUN: count and log only"
        # 413s: 5 at once, then one a second, 28 waiting, then 429s (docs/settings.md: why).
        zone += "\n    limit_req_zone $binary_remote_addr zone=oversized:1m rate=1r/s;"
        oversized = "limit_req zone=oversized burst=32 delay=4;"
        # WebSocket handshakes: their own rate (nginx.conf says why), off with RATE_LIMIT=0.
        handshakes = "limit_req zone=websocket_handshakes burst=20 nodelay;"
    else:
        zone = rate = oversized = handshakes = "# RATE_LIMIT=0: no per-client rate limit."
    if settings.connections_per_client:
        connections = f"limit_conn client_requests {settings.connections_per_client};"
        connections += "\n        limit_conn probe_connections 16;"  # a probe's own
    else:
        connections = "# CONNECTIONS_PER_CLIENT=0: no per-client limit of requests in flight."
    # Always a limit_conn of its own: without one, @websocket would inherit the server's and
    # count sessions in the overload cap. 65535, nginx's largest, is no cap.
    sessions = settings.websockets_per_client or 65535
    websockets = f"limit_conn websockets {sessions};"
    if not settings.websockets_per_client:
        websockets += "   # WEBSOCKETS_PER_CLIENT=0: no per-client cap of open WebSockets"
    # Matched only when the app sent no Access-Control-Allow-Origin (the key starts ":").
    origins = "\n        ".join(f'":{origin}" "{origin}";' for origin in settings.cors_origins)
    return {
        "WORKER_PROCESSES": str(workers),
        "PID_FILE": str(settings.run_dir / "nginx.pid"),
        "TEMP_DIR": str(settings.temp_dir),
        "LISTEN": f"{f'[{address}]' if ':' in address else address}:{settings.port}",
        "UPSTREAM_SOCKET": str(upstream_socket),
        "STATUS_SOCKET": str(settings.status_socket),
        "REAL_IP": f"{real_ip}\n    {trusted_geo}",
        # Buffered within PIPE_BUF (two workers' writes never interleave): the relay costs
        # 3-5 us a request instead of 15-22 (docs/serving.md); nginx flushes on stop.
        "ACCESS_LOG": "/dev/stdout json buffer=4k flush=1s" if settings.nginx_access_log else "off",
        "ALLOWED_HOSTS": allowed,
        "PROXY_TIMEOUT": nginx_time(settings.proxy_timeout),
        "SHUTDOWN_TIMEOUT": nginx_time(settings.nginx_drain),
        "UPSTREAM_KEEPALIVE_TIMEOUT": f"{settings.upstream_keepalive}s",
        "UPSTREAM_KEEPALIVE_TIME": nginx_time(UPSTREAM_KEEPALIVE_TIME),
        "CLIENT_RATE_ZONE": zone,
        "CLIENT_RATE": rate,
        "CLIENT_CONNECTIONS": connections,
        "OVERSIZED_RATE": oversized,
        "WEBSOCKET_CONNECTIONS": websockets,
        "WEBSOCKET_HANDSHAKE_RATE": handshakes,
        "WEBSOCKET_IDLE_TIMEOUT": nginx_time(settings.websocket_idle_timeout),
        "CORS_ORIGINS": origins or "# No CORS origins: nginx's errors carry no CORS headers.",
    }


def write_nginx_conf(
    settings: StackSettings, upstream_socket: Path, workers: int | None = None
) -> Path:
    """Render deploy/nginx.conf into $RUN_DIR/nginx.conf (atomically) and return its path."""
    text = render(
        settings.nginx_conf.read_text(encoding="utf-8"),
        nginx_values(settings, upstream_socket, workers),
    )
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # nginx creates the status socket 0666: this directory is what keeps others out.
    settings.status_socket.parent.mkdir(mode=0o700, exist_ok=True)
    settings.status_socket.parent.chmod(0o700)  # also when a previous run left it
    partial = settings.rendered_conf.with_suffix(".conf.tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(settings.rendered_conf)
    return settings.rendered_conf


def nginx_command(settings: StackSettings, *extra: str) -> list[str]:
    """nginx with the rendered config; `-e stderr` before the config is read, as non-root."""
    if settings.nginx_bin is None:
        raise ServeError(APT_HINT)
    run_dir, conf = str(settings.run_dir), str(settings.rendered_conf)
    return [settings.nginx_bin, "-e", "stderr", "-p", run_dir, "-c", conf, *extra]
