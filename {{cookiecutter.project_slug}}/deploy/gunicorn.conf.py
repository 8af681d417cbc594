# gunicorn configuration: uvicorn workers serving the ASGI app on a unix socket that only
# nginx (same user or group) may reach. Standalone: needs gunicorn >= 25.1 and uvicorn-worker.
# Run: gunicorn -c deploy/gunicorn.conf.py   (deploy/serve.py does this for you)
#
# Inputs (environment variables, all optional; defaults in brackets):
#   APP_MODULE          ASGI app to serve                [{{ cookiecutter.app_module }}]
#   RUN_DIR             directory of the socket          [/run/app]
#   GUNICORN_SOCKET     socket path                      [$RUN_DIR/gunicorn.sock]
#   WEB_CONCURRENCY     worker count; when unset it is computed from the CPUs this process may
#                       use (cgroup v2 cpu.max, cgroup v1 cfs quota, CPU affinity), times
#   WORKERS_PER_CORE    [1], at least MIN_WORKERS [2], at most MAX_WORKERS [8]
#   GUNICORN_TIMEOUT    blocked-event-loop watchdog, s   [60]
#   GRACEFUL_TIMEOUT    drain time after SIGTERM, s      [30]
#   KEEPALIVE           idle keep-alive of nginx's upstream connections, s [75]
#   LIMIT_CONCURRENCY   connections + tasks per worker before it answers 503 [1000]
#   MAX_REQUESTS        recycle a worker after N requests, 0 = never [0]
#   MAX_REQUESTS_JITTER random extra requests so workers do not recycle together [MAX_REQUESTS/10]
#   BACKLOG             listen backlog of the socket     [2048]
#   FORWARDED_ALLOW_IPS peers whose X-Forwarded-* headers are trusted [*]
#   LOG_LEVEL           gunicorn and uvicorn log level   [info]
#   ACCESS_LOG          1 = also log each request here (nginx already does) [0]
#   WORKER_TMP_DIR      heartbeat files' directory       [/dev/shm when present]
# Logs: one JSON object per line on stdout (time, level, logger, message, then extra fields).

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from gunicorn.glogging import Logger
from uvicorn_worker import UvicornWorker

_TRUE = {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


# --- where ------------------------------------------------------------------------------

wsgi_app = os.environ.get("APP_MODULE", "{{ cookiecutter.app_module }}")
_run_dir = os.environ.get("RUN_DIR", "/run/app")
bind = [f"unix:{os.environ.get('GUNICORN_SOCKET', f'{_run_dir}/gunicorn.sock')}"]
# 0660: the app's user and nginx (same user, or in the app's group) may connect; nobody else.
# Not the seeds' "717": as decimal that is 0o1315 (socket 0462), as 0o717 socket 0060.
umask = 0o117
# nginx queues at most this many connections per nginx worker beyond what gunicorn has
# accepted; a larger kernel queue absorbs bursts instead of answering 502.
backlog = _env_int("BACKLOG", 2048)
# Since 25.1 gunicorn opens a control socket under $HOME or $XDG_RUNTIME_DIR: pointless in a
# container and impossible on a read-only root filesystem.
control_socket_disable = True
# Workers touch a heartbeat file every few seconds; on tmpfs that costs no disk I/O and works
# with a read-only root filesystem.
_SHM = "/dev/shm"  # noqa: S108 - tmpfs on purpose: only gunicorn's heartbeat files go there
worker_tmp_dir = os.environ.get("WORKER_TMP_DIR") or (_SHM if Path(_SHM).is_dir() else None)
# Only nginx can reach the 0660 socket, and nginx overwrites X-Forwarded-For/-Proto, so the
# headers are trusted from any socket peer (over a unix socket the peer has no address).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "*")
proc_name = wsgi_app.partition(":")[0].partition(".")[0]


# --- how many workers -------------------------------------------------------------------


def cgroup_v2_cpu_limit(cpu_max: str) -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` line ("max 100000" or "150000 100000")."""
    quota, _, period = cpu_max.strip().partition(" ")
    if quota == "max" or not period:
        return None
    return int(quota) / int(period)


def cgroup_v1_cpu_limit(cfs_quota_us: str, cfs_period_us: str) -> float | None:
    """CPUs allowed by cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1 = none)."""
    quota = int(cfs_quota_us.strip())
    period = int(cfs_period_us.strip())
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def cgroup_cpu_limit(
    root: Path = Path("/sys/fs/cgroup"), self_cgroup: Path = Path("/proc/self/cgroup")
) -> tuple[float | None, str]:
    """The tightest CPU limit of this process's cgroup and its ancestors, and its source.

    Looks at the process's own cgroup path first (a host or a container without a cgroup
    namespace), then at the mount's root (a container, where the root is its own cgroup).
    """
    try:
        membership = self_cgroup.read_text(encoding="utf-8")
    except OSError:
        membership = ""
    paths: dict[str, str] = {}
    for line in membership.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path.lstrip("/")
    if (root / "cgroup.controllers").is_file():  # cgroup v2 (unified hierarchy)
        limits = [
            limit
            for directory in _ancestors(root, paths.get("", ""))
            if (limit := _read_limit(directory / "cpu.max", None)) is not None
        ]
        return (min(limits), "cgroup v2 cpu.max") if limits else (None, "cgroup v2: no limit")
    for mount in ("cpu,cpuacct", "cpu", "cpuacct,cpu"):
        if not (root / mount).is_dir():
            continue
        limits = [
            limit
            for directory in _ancestors(root / mount, paths.get("cpu", ""))
            if (limit := _read_limit(directory / "cpu.cfs_quota_us", directory)) is not None
        ]
        return (min(limits), "cgroup v1 cfs quota") if limits else (None, "cgroup v1: no limit")
    return None, "no cgroup cpu controller"


def _ancestors(mount: Path, relative: str) -> list[Path]:
    """The cgroup directory and each parent up to the mount (only those that exist)."""
    directory = mount / relative if relative else mount
    found = [directory, *directory.parents]
    return [d for d in found if d.is_dir() and (d == mount or mount in d.parents)]


def _read_limit(path: Path, v1_directory: Path | None) -> float | None:
    try:
        if v1_directory is None:
            return cgroup_v2_cpu_limit(path.read_text(encoding="utf-8"))
        period = (v1_directory / "cpu.cfs_period_us").read_text(encoding="utf-8")
        return cgroup_v1_cpu_limit(path.read_text(encoding="utf-8"), period)
    except (OSError, ValueError):
        return None


def usable_cpus(
    root: Path = Path("/sys/fs/cgroup"), self_cgroup: Path = Path("/proc/self/cgroup")
) -> tuple[int, dict[str, Any]]:
    """CPUs this process may really use: CPU affinity, lowered by any cgroup quota (rounded up)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = os.cpu_count() or 1
    limit, source = cgroup_cpu_limit(root, self_cgroup)
    cpus = affinity if limit is None else max(1, min(affinity, math.ceil(limit)))
    return cpus, {"cpu_affinity": affinity, "cgroup_cpu_limit": limit, "cgroup": source}


def worker_count(environ: dict[str, str], cpus: int) -> tuple[int, str]:
    """WEB_CONCURRENCY when set, else CPUs x WORKERS_PER_CORE within MIN_WORKERS..MAX_WORKERS."""
    explicit = environ.get("WEB_CONCURRENCY", "").strip()
    if explicit:
        return max(1, int(explicit)), "WEB_CONCURRENCY"
    per_core = float(environ.get("WORKERS_PER_CORE", "").strip() or 1)
    # Two at least: while one worker is recycled or killed by the watchdog the other serves.
    floor = int(environ.get("MIN_WORKERS", "").strip() or 2)
    # Each worker holds a whole copy of the app; past a handful, more replicas scale better.
    cap = int(environ.get("MAX_WORKERS", "").strip() or 8)
    return max(1, min(cap, max(floor, round(cpus * per_core)))), "cpus"


_cpus, _cpu_facts = usable_cpus()
workers, _workers_source = worker_count(dict(os.environ), _cpus)


# --- timeouts (the generated README's "timeout chain" table; tests check the ordering) ---

# Heartbeat watchdog, NOT a request deadline: an async worker whose event loop is blocked
# this long is killed and replaced. A slow `await` is bounded by the app's deadline instead.
timeout = _env_int("GUNICORN_TIMEOUT", 60)
# After SIGTERM, workers finish what they hold for this long, then are killed. At least the
# app's request deadline (30 s), below the stop grace period (compose.yaml) minus nginx's
# drain, which deploy/serve.py waits for first.
graceful_timeout = _env_int("GRACEFUL_TIMEOUT", 30)
# nginx keeps idle upstream connections 60 s (upstream keepalive_timeout); we must keep
# them longer, or nginx may reuse a connection we just closed and answer 502.
keepalive = _env_int("KEEPALIVE", 75)
# Recycling is off by default: a recycled uvicorn worker resets connections holding unread
# requests (gunicorn issues 2409, 2529), which nginx retries only for idempotent methods.
max_requests = _env_int("MAX_REQUESTS", 0)
max_requests_jitter = _env_int("MAX_REQUESTS_JITTER", max_requests // 10)


# --- the worker -------------------------------------------------------------------------


class Worker(UvicornWorker):
    """UvicornWorker plus what it does not map from gunicorn's settings.

    graceful_timeout becomes uvicorn's timeout_graceful_shutdown (otherwise uvicorn waits for
    open connections forever and gunicorn kills the worker mid-response), and a concurrency
    cap makes an overloaded worker answer 503 at once instead of queueing without bound.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config.timeout_graceful_shutdown = self.cfg.graceful_timeout
        self.config.limit_concurrency = _env_int("LIMIT_CONCURRENCY", 1000) or None


worker_class = Worker


# --- logs -------------------------------------------------------------------------------

loglevel = os.environ.get("LOG_LEVEL", "info")
errorlog = "-"
# nginx's access log already records every request with its id and timings; this one is
# for debugging gunicorn directly.
accesslog = "-" if os.environ.get("ACCESS_LOG", "0").strip().lower() in _TRUE else None
# Standard LogRecord attributes, plus uvicorn's ANSI-coloured duplicate of the message.
_RECORD_FIELDS = set(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        line: dict[str, Any] = {
            "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            client, method, path, _, status = args
            line.update(method=method, path=path, status=status, client=client)
        extra = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
        if "request_id" in extra:
            line["request_id"] = extra.pop("request_id")
        line.update(extra)
        if record.exc_info:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(line, default=str, separators=(",", ":"))


class JsonLogger(Logger):
    """gunicorn's logger with JSON lines on stdout, for gunicorn's and uvicorn's records."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setStream(sys.stdout)
                handler.setFormatter(JsonFormatter())


logger_class = JsonLogger


def on_starting(server: Any) -> None:
    """Log the worker-count decision and its inputs once, from the master."""
    server.log.info(
        "worker count decided",
        extra={"workers": workers, "source": _workers_source, "cpus": _cpus, **_cpu_facts},
    )
