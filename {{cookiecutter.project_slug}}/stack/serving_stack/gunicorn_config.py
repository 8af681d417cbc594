"""What gunicorn_conf.py (and a 0.4.0 deploy/gunicorn.conf.py) takes by name: the worker class,
the JSON logger, the worker count, the metrics hooks. Never imports the app or prometheus_client."""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any

from gunicorn.glogging import Logger
from uvicorn_worker import UvicornWorker

from .cpus import usable_cpus
from .jsonlog import JsonFormatter, redact
from .metrics_files import prepare_worker
from .nginx_conf import nginx_workers
from .response_guard import ResponseGuard
from .settings import NO_APP_MODULE, WORKERS_EXPORT_NAME, SettingError, StackSettings, load
from .websocket_protocol import BoundedWebSocketProtocol, SessionBounds

# Info lines of no use to an operator, moved to debug: the (fixed) worker class, and gunicorn
# 27 closing a closed listener on exit.
_NOISE = ("Using worker: %s", "Error while closing socket %s")
# The workers' heartbeat files on tmpfs: no disk I/O, no writable root needed.
SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None  # noqa: S108 - heartbeat files only
# WEB_CONCURRENCY unset: a worker per usable CPU, at least 2 (one serves while another is
# restarted), at most 8 (each holds a copy of the app; past a few, replicas scale better).
FEWEST_WORKERS, MOST_WORKERS = 2, 8


@functools.cache
def settings() -> StackSettings:
    """The stack's settings, read once per process; a refusal is one line, not a traceback."""
    try:
        return load(os.environ)
    except SettingError as exc:
        raise SystemExit(str(exc)) from None


def app_module() -> str:
    if (name := settings().app_module) is None:
        raise SystemExit(NO_APP_MODULE)
    return name


def worker_count(stack: StackSettings, cpus: int) -> tuple[int, str]:
    """WEB_CONCURRENCY when set, else the usable CPUs within FEWEST_WORKERS..MOST_WORKERS."""
    if stack.web_concurrency is not None:
        return stack.web_concurrency, "WEB_CONCURRENCY"
    return min(MOST_WORKERS, max(FEWEST_WORKERS, cpus)), "cpus"


@functools.cache
def workers() -> tuple[int, dict[str, Any]]:
    """The worker count for the CPUs cpus.py counts (as nginx's `auto`), and its inputs."""
    cpus, facts = usable_cpus()
    count, source = worker_count(settings(), cpus)
    # The workers inherit it: an app sizes its pools to its share (GUNICORN_WORKERS).
    os.environ[WORKERS_EXPORT_NAME] = str(count)
    return count, {"source": source, "cpus": cpus, **facts}


class Worker(UvicornWorker):  # type: ignore[misc]  # uvicorn-worker ships no types
    """UvicornWorker plus what it does not map: graceful_timeout (else gunicorn kills it
    mid-response), a concurrency cap (503 at once), WebSocket pings and bounds; the app in
    ResponseGuard."""

    wsgi: Any  # gunicorn's name for the loaded app (ASGI here)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The exact (possibly fractional) drain; gunicorn's own value is rounded up.
        stack = settings()
        graceful = min(stack.graceful_timeout, float(self.cfg.graceful_timeout))
        self.config.timeout_graceful_shutdown = graceful
        # Above all nginx lets through: its JSON 503 comes before uvicorn's plain-text one.
        self.config.limit_concurrency = stack.worker_concurrency(nginx_workers(stack)[0])
        # nginx closes a WebSocket silent for WEBSOCKET_IDLE_TIMEOUT: a ping every third of it
        # keeps a live client's open, a missed pong ends a dead one's.
        self.config.ws_ping_interval = stack.websocket_idle_timeout / 3
        self.config.ws_ping_timeout = stack.websocket_idle_timeout / 3
        # A session's bounds (websocket_protocol.py): the message size caps the inflated size
        # too; compression off, a 16 KB message cannot cost the worker 78 ms of CPU inflating.
        self.config.ws_max_size = stack.websocket_max_message_bytes
        self.config.ws_per_message_deflate = stack.websocket_compression
        bounds = SessionBounds(stack.websocket_max_fragments, stack.websocket_message_rate)
        self.config.ws = functools.partial(BoundedWebSocketProtocol, bounds=bounds)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = ResponseGuard(self.wsgi)


class OperatorFilter(logging.Filter):
    """``_NOISE`` to debug level; secret query parameters redacted from uvicorn's paths (its
    access and WebSocket lines); uvicorn's access records get the access log's fields."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in _NOISE and record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        args = record.args
        if isinstance(args, tuple) and any(isinstance(arg, str) and "?" in arg for arg in args):
            record.args = args = tuple(redact(a) if isinstance(a, str) else a for a in args)
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            client, method, path, _, status = args
            record.__dict__.update(method=method, path=path, status=status, client=client)
        return True


class JsonLogger(Logger):  # type: ignore[misc]  # gunicorn ships no types: Logger is Any
    """gunicorn's logger, JSON lines on stdout (uvicorn's worker reuses its handlers)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setStream(sys.stdout)
                handler.setFormatter(JsonFormatter())
                handler.addFilter(OperatorFilter())


# Said with the count: an app moved here from one process now runs in several.
PER_WORKER = (
    "in-process state (WebSocket registries, caches, rate limiters) is per worker: set"
    " WEB_CONCURRENCY=1 with one pod, or share it in a store (stack/README.md)"
)


def on_starting(server: Any) -> None:
    """Log the worker count; ready the metrics directory (not at import: tools import it)."""
    stack, (count, facts) = settings(), workers()
    directory = stack.metrics_dir
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    # Given, the supervisor cleaned it; started alone, a previous run's files would add up here.
    if stack.prometheus_multiproc_dir is None and directory.is_dir():
        for stale in directory.glob("*.db"):  # the archive files too
            stale.unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    said = f"worker count decided: {count} gunicorn worker processes serve the app; {PER_WORKER}"
    server.log.info(said, extra={"workers": count, **facts})


def post_fork(server: Any, worker: Any) -> None:
    """Allocate a new worker's metric files; refused: an error line and no metrics (an exit if
    preload_app imported prometheus_client)."""
    del worker  # gunicorn's hook signature
    directory = settings().metrics_dir
    problem = prepare_worker(directory, os.getpid())
    if problem is None:
        return
    said = {"directory": str(directory), "error": str(problem)}
    if "prometheus_client" in sys.modules:  # preload_app: the values' kind is decided
        server.log.error("metric files cannot be allocated: worker exiting", extra=said)
        sys.exit(1)
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    message = "metric files cannot be allocated: this worker serves without recording metrics"
    server.log.error(message, extra=said)
