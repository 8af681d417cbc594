"""nginx.conf from the stack's template (NGINX_CONF): every @NAME@ placeholder replaced by a
value the settings decide, written atomically into RUN_DIR beside the lists it includes, one
entry a line (``python -m serving_stack render``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import ServeError
from .cpus import CGROUP_ROOT, SELF_CGROUP, usable_cpus
from .settings import (
    PROBES_PER_CLIENT,
    REQUESTS_PER_POD,
    UPLOADS_PER_POD,
    UPSTREAM_IDLE_PER_NGINX_WORKER,
    UPSTREAM_KEEPALIVE_TIME,
    StackSettings,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

APT_HINT = "nginx is not installed; install it with: sudo apt-get install -y nginx-light"
# NGINX_WORKER_PROCESSES=auto: a worker per this many usable CPUs (measured: README.md).
CPUS_PER_NGINX_WORKER = 4
# nginx refuses a 0 rate or limit_conn: a limit that is off keeps its directives, its key
# emptied by nginx.conf's map, and this number (limit_conn's largest).
UNCOUNTED_LIMIT = 65535
# Connections no cap counts, beyond the held ones (two each: client and upstream): idle
# keep-alive clients, probes, clients being refused. All may land on one nginx worker.
UNCAPPED_CONNECTIONS = 4096
CLIENT_KEEPALIVE = 65  # seconds nginx keeps an idle client connection
# In RUN_DIR while the supervisor drains the stack: nginx.conf's /readyz answers 503.
DRAIN_FLAG = "draining"
_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")
_ZONE = re.compile(r"^\s*limit_(?:req|conn)_zone\s[^;]*?\bzone=([^:\s;]+):", re.MULTILINE)


def render(template: str, values: Mapping[str, str]) -> str:
    """Replace every @NAME@ in template; an unknown or missing name is an error."""
    missing = sorted(set(_PLACEHOLDER.findall(template)) - set(values))
    if missing:
        raise ServeError(f"no value for placeholder(s) {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def declared_zones(conf: str) -> list[str]:
    """Every limit zone a rendered nginx.conf declares: the relay counts refusals by these."""
    return _ZONE.findall(conf)


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


def limit_req_burst(at_once: int, waiting: int) -> str:
    """limit_req's burst= and delay= for ``at_once`` requests over the rate and ``waiting`` more:
    nginx refuses 0 for either (its default), so a 0 is left out; delay=burst is nodelay."""
    burst = f"burst={at_once + waiting}" if at_once + waiting else ""
    return f"{burst} delay={at_once}" if at_once else burst


def worker_connections(settings: StackSettings) -> int:
    """nginx's worker_connections: what the pod-wide caps hold, twice, and what none counts."""
    held = 2 * settings.held_connections + UPSTREAM_IDLE_PER_NGINX_WORKER
    return held + UNCAPPED_CONNECTIONS


def nginx_values(
    settings: StackSettings, workers: int, *, keepalive: bool = True
) -> dict[str, str]:
    """nginx.conf's placeholder values, for this many nginx workers; keepalive off: the config
    the supervisor reloads nginx into halfway through a drain."""
    address, per_second = settings.listen_address, settings.rate_limit
    connections, websockets = settings.connections_per_client, settings.websockets_per_client
    held = worker_connections(settings)
    # The workers a drain's reload retires keep this first config's: the drain, then the stop.
    retiring = settings.drain_seconds if keepalive else 0.0
    return {
        "WORKER_PROCESSES": str(workers),
        "WORKER_CONNECTIONS": str(held),
        "WORKER_RLIMIT_NOFILE": str(2 * held),
        "REQUESTS_PER_POD": str(REQUESTS_PER_POD),
        "UPLOADS_PER_POD": str(UPLOADS_PER_POD),
        "CLIENT_PREFIX_BYTES": str(settings.client_ipv6_prefix // 8),
        "STREAMS_PER_POD": str(settings.streams_per_pod),
        "WEBSOCKETS_PER_POD": str(settings.websockets_per_pod),
        "PROBES_PER_CLIENT": str(PROBES_PER_CLIENT),
        "UPSTREAM_IDLE": str(UPSTREAM_IDLE_PER_NGINX_WORKER),
        "RUN_DIR": str(settings.run_dir),
        "TEMP_DIR": str(settings.temp_dir),
        "LISTEN": f"{f'[{address}]' if ':' in address else address}:{settings.port}",
        "UPSTREAM_SOCKET": str(settings.gunicorn_socket),
        "STATUS_SOCKET": str(settings.status_socket),
        "ACCESS_LOGGED": str(int(settings.nginx_access_log)),
        "PROXY_TIMEOUT": nginx_time(settings.proxy_timeout),
        "SHUTDOWN_TIMEOUT": nginx_time(settings.nginx_drain + retiring),
        "KEEPALIVE_TIMEOUT": f"{CLIENT_KEEPALIVE}s" if keepalive else "0s",
        "DRAIN_FLAG": str(settings.run_dir / DRAIN_FLAG),
        "UPSTREAM_KEEPALIVE_TIMEOUT": f"{settings.upstream_keepalive}s",
        "UPSTREAM_KEEPALIVE_TIME": nginx_time(UPSTREAM_KEEPALIVE_TIME),
        "RATE_LIMITED": str(int(per_second > 0)),
        "RATE_LIMIT": str(per_second or UNCOUNTED_LIMIT),
        "CLIENT_RATE_BURST": limit_req_burst(
            settings.rate_limit_burst, per_second * settings.rate_limit_queue_seconds
        ),
        "RATE_LIMIT_DRY_RUN": "on" if settings.rate_limit_dry_run else "off",
        "CONNECTIONS_LIMITED": str(int(connections > 0)),
        "CONNECTIONS_PER_CLIENT": str(connections or UNCOUNTED_LIMIT),
        "WEBSOCKETS_LIMITED": str(int(websockets > 0)),
        "WEBSOCKETS_PER_CLIENT": str(websockets or UNCOUNTED_LIMIT),
        "WEBSOCKET_IDLE_TIMEOUT": nginx_time(settings.websocket_idle_timeout),
    }


def nginx_lists(settings: StackSettings) -> dict[str, str]:
    """The files nginx.conf includes from RUN_DIR, by name: one entry a line."""
    proxies, locations = settings.trusted_proxies, settings.nginx_locations
    # nginx's $host keeps an IPv6 address in brackets; "~." (a regex) matches any Host.
    hosts = ['"~."' if h == "*" else f"[{h}]" if ":" in h else h for h in settings.allowed_hosts]
    return {
        # set_real_ip_from takes one address and no variable: the only list of directives.
        "set_real_ip_from.conf": "".join(f"set_real_ip_from {cidr};\n" for cidr in proxies),
        "trusted_proxies.geo": "".join(f"{cidr} 1;\n" for cidr in proxies),
        "allowed_hosts.map": "".join(f"{host} 1;\n" for host in hosts),
        "cors_origins.map": "".join(f'"{o}" "{o}";\n' for o in settings.cors_origins),
        # The project's own locations, in the server block (NGINX_LOCATIONS): one include.
        "locations.conf": f"include {locations};\n" if locations else "",
    }


def write_nginx_conf(settings: StackSettings, workers: int, *, keepalive: bool = True) -> Path:
    """Render $RUN_DIR/nginx.conf after the lists it includes, each atomically; its path."""
    values = nginx_values(settings, workers, keepalive=keepalive)
    text = render(settings.nginx_conf.read_text(encoding="utf-8"), values)
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # nginx creates the status socket 0666: this directory is what keeps others out.
    settings.status_socket.parent.mkdir(mode=0o700, exist_ok=True)
    settings.status_socket.parent.chmod(0o700)  # also when a previous run left it
    for name, content in {**nginx_lists(settings), settings.rendered_conf.name: text}.items():
        partial = settings.run_dir / f"{name}.tmp"
        partial.write_text(content, encoding="utf-8")
        partial.replace(settings.run_dir / name)
    return settings.rendered_conf


def nginx_command(settings: StackSettings, *extra: str) -> list[str]:
    """nginx with the rendered config; `-e stderr` before the config is read, as non-root."""
    if settings.nginx_bin is None:
        raise ServeError(APT_HINT)
    run_dir, conf = str(settings.run_dir), str(settings.rendered_conf)
    return [settings.nginx_bin, "-e", "stderr", "-p", run_dir, "-c", conf, *extra]
