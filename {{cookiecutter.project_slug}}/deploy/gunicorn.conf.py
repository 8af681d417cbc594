# gunicorn configuration: uvicorn workers serving the ASGI app on a unix socket that only
# nginx (same user or group) may reach. Needs gunicorn >= 25.1, uvicorn-worker, and beside this
# file deploy/stack_settings.py (every variable), deploy/stack_log.py (the JSON log lines) and
# deploy/cpus.py (the CPUs the worker count is sized from).
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

from {{ cookiecutter.package_name }}_stack.cpus import usable_cpus
from {{ cookiecutter.package_name }}_stack.jsonlog import JsonFormatter
from {{ cookiecutter.package_name }}_stack.settings import {% if cookiecutter.database == "postgresql" %}WORKERS_EXPORT_NAME, {% endif %}SettingError, load

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


# The CPUs deploy/cpus.py counts (affinity lowered by any cgroup quota): serve.py sizes
# nginx's workers from the same count when NGINX_WORKER_PROCESSES=auto.
_cpus, _cpu_facts = usable_cpus()
workers, _workers_source = worker_count(dict(os.environ), _cpus)
{%- if cookiecutter.database == "postgresql" %}
# The workers inherit this: each sizes its database pool to its share of the connection
# budget (src/{{ cookiecutter.package_name }}/db/pool.py), so the shares add up to the budget.
os.environ[WORKERS_EXPORT_NAME] = str(workers)
{%- endif %}


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
    """Log the worker-count decision and its inputs once, from the master; ready the metrics."""
    _prepare_metrics_dir()
    server.log.info(
        "worker count decided",
        extra={"workers": workers, "source": _workers_source, "cpus": _cpus, **_cpu_facts},
    )


# --- metrics (deploy/metrics.py, docs/observability.md) ---------------------------------

# Each worker writes its Prometheus values to files here, and the metrics listener adds
# them up. Set in on_starting, before any worker imports prometheus_client (it reads the
# variable at import), rather than at this file's import: tools import this file too.
# PROMETHEUS_MULTIPROC_DIR set: deploy/serve.py owns the directory (and cleaned it).
_metrics_from_runner = _settings.prometheus_multiproc_dir is not None
_metrics_dir = _settings.metrics_dir


def _prepare_metrics_dir() -> None:
    """Point the workers at the metric files' directory; clean it when we own it."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_metrics_dir)
    if _metrics_from_runner:
        # The runner cleaned it at its start; a reload's new gunicorn must keep the counts.
        _metrics_dir.mkdir(parents=True, exist_ok=True)
        return
    # Started on its own: a previous run's files would be added to this run's counts.
    if _metrics_dir.is_dir():
        for stale in _metrics_dir.glob("*.db"):
            stale.unlink()
    _metrics_dir.mkdir(parents=True, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """A worker died (recycled, killed, crashed): drop its in-flight gauge, keep its counts."""
    del server  # gunicorn's hook signature
    # Imported here: the master must not import prometheus_client before on_starting.
    from prometheus_client import multiprocess  # noqa: PLC0415

    # prometheus_client leaves this function unannotated.
    multiprocess.mark_process_dead(worker.pid, str(_metrics_dir))  # type: ignore[no-untyped-call]
