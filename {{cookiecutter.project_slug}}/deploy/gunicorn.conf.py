# gunicorn configuration: uvicorn workers serving the ASGI app on a unix socket that only
# nginx (same user or group) may reach. Needs gunicorn >= 25.1, uvicorn-worker, and beside this
# file deploy/stack_settings.py (every variable) and deploy/stack_log.py (the JSON log lines).
# Run: gunicorn -c deploy/gunicorn.conf.py   (deploy/serve.py does this for you)
#
# Inputs: the environment variables of deploy/stack_settings.py (APP_MODULE, RUN_DIR,
# WEB_CONCURRENCY, GRACEFUL_TIMEOUT, KEEPALIVE, LOG_LEVEL, ...), defined, bounded and documented
# there once (docs/settings.md lists them); a wrong value stops gunicorn with one line.
# Logs: one JSON object per line on stdout, by deploy/stack_log.py (the stack's one formatter).

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

from gunicorn.glogging import Logger
from uvicorn_worker import UvicornWorker

# deploy/ is not a package (its files are copied alone): gunicorn loads this file by path, so
# its siblings become importable once its directory is on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stack_log import JsonFormatter
from stack_settings import SettingError, load

try:
    _settings = load(os.environ)
except SettingError as exc:
    raise SystemExit(str(exc)) from None  # one line, not gunicorn's traceback


# --- where ------------------------------------------------------------------------------

wsgi_app = _settings.app_module
bind = [f"unix:{_settings.gunicorn_socket}"]
# 0660: the app's user and nginx (same user, or in the app's group) may connect; nobody else.
# Not the seeds' "717": as decimal that is 0o1315 (socket 0462), as 0o717 socket 0060.
umask = 0o117
# nginx queues at most this many connections per nginx worker beyond what gunicorn has
# accepted; a larger kernel queue absorbs bursts instead of answering 502.
backlog = _settings.backlog
# Since 25.1 gunicorn opens a control socket under $HOME or $XDG_RUNTIME_DIR: pointless in a
# container and impossible on a read-only root filesystem.
control_socket_disable = True
# Workers touch a heartbeat file every few seconds; on tmpfs that costs no disk I/O and works
# with a read-only root filesystem.
_SHM = "/dev/shm"  # noqa: S108 - tmpfs on purpose: only gunicorn's heartbeat files go there
worker_tmp_dir = _settings.worker_tmp_dir or (_SHM if Path(_SHM).is_dir() else None)
# Only nginx can reach the 0660 socket, and nginx overwrites X-Forwarded-For/-Proto, so the
# headers are trusted from any socket peer (over a unix socket the peer has no address).
forwarded_allow_ips = _settings.forwarded_allow_ips
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
    """WEB_CONCURRENCY when set, else CPUs x WORKERS_PER_CORE within MIN_WORKERS..MAX_WORKERS.

    MIN_WORKERS defaults to two: while one worker is recycled or killed by the watchdog the
    other serves. MAX_WORKERS to eight: each worker holds a whole copy of the app; past a
    handful, more replicas scale better.
    """
    settings = load(environ)
    if settings.web_concurrency is not None:
        return settings.web_concurrency, "WEB_CONCURRENCY"
    computed = round(cpus * settings.workers_per_core)
    return max(1, min(settings.max_workers, max(settings.min_workers, computed))), "cpus"


_cpus, _cpu_facts = usable_cpus()
workers, _workers_source = worker_count(dict(os.environ), _cpus)


# --- timeouts: one chain, derived from the app's deadline (stack_settings.TimeoutChain) ---

# Heartbeat watchdog, NOT a request deadline: an async worker whose event loop is blocked
# this long is killed and replaced. A slow `await` is bounded by the app's deadline instead.
# gunicorn takes whole seconds: rounded up, so it never undercuts the chain.
timeout = math.ceil(_settings.chain.watchdog)
# After SIGTERM, workers finish what they hold for this long, then are killed: at least the
# app's request deadline. gunicorn takes whole seconds (rounded up); uvicorn gets the exact
# value (Worker below), so uvicorn finishes first and gunicorn's kill never cuts a response.
graceful_timeout = math.ceil(_settings.chain.graceful)
# nginx keeps idle upstream connections 15 s less (its upstream keepalive_timeout, rendered
# from this value): we must keep them longer, or nginx may reuse a connection we just
# closed and answer 502.
keepalive = _settings.keepalive
# Recycling is off by default: a recycled uvicorn worker resets connections holding unread
# requests (gunicorn issues 2409, 2529), which nginx retries only for idempotent methods.
max_requests = _settings.max_requests
max_requests_jitter = _settings.max_requests_jitter


# --- the worker -------------------------------------------------------------------------


class Worker(UvicornWorker):  # type: ignore[misc]  # uvicorn-worker ships no types
    """UvicornWorker plus what it does not map from gunicorn's settings.

    graceful_timeout becomes uvicorn's timeout_graceful_shutdown (otherwise uvicorn waits for
    open connections forever and gunicorn kills the worker mid-response), and a concurrency
    cap makes an overloaded worker answer 503 at once instead of queueing without bound.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = load(os.environ)
        # The exact (possibly fractional) drain; gunicorn's own value is rounded up.
        self.config.timeout_graceful_shutdown = min(
            settings.chain.graceful, float(self.cfg.graceful_timeout)
        )
        self.config.limit_concurrency = settings.limit_concurrency or None


worker_class = Worker


# --- logs -------------------------------------------------------------------------------

loglevel = _settings.log_level
errorlog = "-"
# nginx's access log already records every request with its id and timings; this one is
# for debugging gunicorn directly.
accesslog = "-" if _settings.gunicorn_access_log else None
# Said at info level on every start or stop, and of no use to an operator: the worker class
# (fixed in this file), and gunicorn 27 closing an already-closed listener socket on exit
# ("Error while closing socket [Errno 9] Bad file descriptor"). Kept at debug level.
_NOISE = ("Using worker: %s", "Error while closing socket %s")


class OperatorFilter(logging.Filter):
    """Move gunicorn's noise (``_NOISE``) to debug level; shape uvicorn's access records.

    uvicorn's access record carries (client, method, path, HTTP version, status) as %-args:
    they become the access-log contract's fields, so its line reads like the app's.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in _NOISE and record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            client, method, path, _, status = args
            record.__dict__.update(method=method, path=path, status=status, client=client)
        return True


class JsonLogger(Logger):  # type: ignore[misc]  # gunicorn ships no types: Logger is Any
    """gunicorn's logger with the stack's JSON lines on stdout, for gunicorn's and uvicorn's
    records (uvicorn's worker reuses these handlers)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setStream(sys.stdout)
                handler.setFormatter(JsonFormatter())
                handler.addFilter(OperatorFilter())


logger_class = JsonLogger


def on_starting(server: Any) -> None:
    """Log the worker-count decision and its inputs once, from the master."""
    server.log.info(
        "worker count decided",
        extra={"workers": workers, "source": _workers_source, "cpus": _cpus, **_cpu_facts},
    )
