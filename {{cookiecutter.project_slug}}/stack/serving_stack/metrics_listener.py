"""Metrics listener: every gunicorn worker's Prometheus metrics plus nginx's, on METRICS_PORT,
until SIGTERM; it tends PROMETHEUS_MULTIPROC_DIR (``Archive``). Why a process of its own, its
client limits and the archive's rules: README.md's design notes."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from .jsonlog import write_line
from .metrics_files import ARCHIVE, file_kind, file_pid, reserve_growth
from .settings import SettingError, load

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from pathlib import Path

# A scrape must not wait long for nginx: Prometheus's own scrape timeout is 10 s by default.
STATUS_TIMEOUT = 2.0
# Prometheus scrapes over one connection; a few more for people. Past these a connection is
# closed at once; a client silent this long is cut (README.md's design notes).
MAX_CLIENTS = 8
CLIENT_TIMEOUT = 5.0
# Dead workers' files go within seconds; each file's next doubling is reserved in time.
TEND_INTERVAL = 5.0
# The kinds whose values add up across processes (prometheus_client's file kinds).
ADDITIVE = frozenset({"counter", "histogram", "summary"})

log = functools.partial(write_line, "metrics")

# stub_status's seven numbers in its order: name, help, counter (else gauge), named as by
# nginx-prometheus-exporter, so its dashboards work.
_STATUS = (
    ("nginx_connections_active", "Client connections active now.", False),
    ("nginx_connections_accepted", "Client connections accepted.", True),
    ("nginx_connections_handled", "Client connections handled.", True),
    ("nginx_http_requests", "Client requests, those nginx answered itself included.", True),
    ("nginx_connections_reading", "Client connections reading now.", False),
    ("nginx_connections_writing", "Client connections writing now.", False),
    ("nginx_connections_waiting", "Client connections waiting now.", False),
)


class NginxCollector:
    """nginx's connection and request counters (_STATUS), read at each scrape."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path

    def status(self) -> list[bytes]:
        """GET /stub_status over nginx's unix socket: its seven numbers; OSError or ValueError."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(STATUS_TIMEOUT)
            connection.connect(self.socket_path)
            # HTTP/1.0: nginx closes after the answer.
            connection.sendall(b"GET /stub_status HTTP/1.0\r\nHost: localhost\r\n\r\n")
            received = b"".join(iter(lambda: connection.recv(4096), b""))
        head, _, body = received.partition(b"\r\n\r\n")
        numbers = re.findall(rb"\d+", body)
        if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
            raise ValueError(f"stub_status answered {head[:40]!r}")
        if not body.startswith(b"Active connections:") or len(numbers) != len(_STATUS):
            raise ValueError(f"not a stub_status page: {body[:200]!r}")
        return numbers

    def collect(self) -> Iterator[Metric]:
        try:
            numbers = self.status()
        except (OSError, ValueError) as exc:
            log("warning", "nginx stub_status unavailable", error=str(exc))
            numbers = []
        up = int(bool(numbers))
        yield GaugeMetricFamily("nginx_up", "Whether nginx's stub_status answered.", up)
        for (name, meaning, counter), number in zip(_STATUS, numbers, strict=False):
            family = CounterMetricFamily if counter else GaugeMetricFamily
            yield family(name, meaning, int(number))


def _alive(pid: int) -> bool:
    """Whether a process exists (another user's included); a zombie counts until reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class Archive:
    """The metrics directory's live files and the archive of dead workers' values, under one
    lock: a scrape never counts a worker twice nor misses one."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.lock = threading.Lock()
        self.problem = ""

    def files(self) -> list[Path]:
        return sorted(path for path in self.directory.glob("*.db") if file_pid(path))

    def tend(self) -> None:
        """Archive the dead processes' files and reserve every file's growth; a failure (a full
        filesystem) is said once, and once that it is over."""
        try:
            self.archive_dead()
            for path in self.files():
                reserve_growth(path)
            problem = ""
        except (OSError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem and problem != self.problem:
            log("error", "cannot tend the metric files", error=problem)
        elif self.problem and not problem:
            log("info", "the metric files are tended again")
        self.problem = problem

    def tend_forever(self) -> None:
        """Tend every TEND_INTERVAL seconds, scraped or not (a thread of its own)."""
        while True:
            with self.lock:
                self.tend()
            time.sleep(TEND_INTERVAL)

    def archive_dead(self) -> None:
        """Drop dead processes' gauges; merge each additive kind's dead files and its archive
        file into a new archive file, then remove them."""
        dead = {pid for pid in map(file_pid, self.files()) if pid and not _alive(pid)}
        for pid in dead:
            mark_process_dead(pid, str(self.directory))  # type: ignore[no-untyped-call]  # unannotated upstream
        files = [path for path in self.files() if file_pid(path) in dead]
        for kind in ADDITIVE:
            merged = [path for path in files if file_kind(path) == kind]
            if merged:
                self.rewrite(self.directory / f"{kind}_{ARCHIVE}.db", merged)

    @staticmethod
    def rewrite(archive: Path, merged: list[Path]) -> None:
        """The archive file replaced by its values plus these files' (histogram buckets raw,
        as in a worker's file), written into allocated blocks; the files removed."""
        paths = [str(path) for path in [*merged, archive] if path.exists()]
        metrics = MultiProcessCollector.merge(paths, accumulate=False)  # type: ignore[no-untyped-call]  # unannotated upstream
        values = {
            mmap_key(m.name, s.name, [*s.labels], [*s.labels.values()], m.documentation): s.value
            for m in metrics
            for s in m.samples
        }
        partial = archive.with_suffix(".tmp")  # not *.db: never read as a metric file
        try:
            fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o660)
            try:
                # Allocated: a full filesystem fails here, not a write into the map (SIGBUS).
                # An entry as MmapedDict._init_value packs it, 8-aligned with two doubles: key + 28.
                os.posix_fallocate(fd, 0, 8 + sum(len(key.encode()) + 28 for key in values))
            finally:
                os.close(fd)
            written: Any = MmapedDict(str(partial))  # type: ignore[no-untyped-call]  # unannotated upstream
            for key, value in values.items():
                written.write_value(key, value, 0.0)
            written.close()
            partial.replace(archive)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
        for path in merged:
            path.unlink()

    def collect(self) -> Iterable[Metric]:
        """The live files plus the archive files, each series once (what a scrape renders)."""
        with self.lock:
            self.tend()
            paths = [str(path) for path in self.directory.glob("*.db")]
            return MultiProcessCollector.merge(paths)  # type: ignore[no-any-return,no-untyped-call]  # unannotated upstream


def make_server(address: str, port: int, registry: CollectorRegistry) -> ThreadingHTTPServer:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET  # an IP address (settings)

    class Handler(BaseHTTPRequestHandler):
        timeout = CLIENT_TIMEOUT

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            try:
                body = generate_latest(registry)
            except Exception as exc:  # noqa: BLE001 - any collector's failure: a failed scrape
                log("error", "cannot render the metrics", error=f"{type(exc).__name__}: {exc}")
                self.send_error(500)
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass  # a line per scrape (every 15 s, forever) would drown the service's own logs

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True
        # socketserver's default, 5, drops SYNs under a burst.
        request_queue_size = 128
        slots = threading.BoundedSemaphore(MAX_CLIENTS)

        def process_request(self, request: Any, client_address: Any) -> None:
            if not self.slots.acquire(blocking=False):
                self.shutdown_request(request)  # MAX_CLIENTS busy: closed, not queued
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

        def handle_error(self, request: Any, client_address: Any) -> None:
            # One JSON line instead of socketserver's traceback; none for a client that hangs
            # up or stays silent (ordinary on a network).
            del request, client_address
            exc = sys.exc_info()[1]
            if not isinstance(exc, (ConnectionError, TimeoutError)):
                log("error", "metrics request failed", error=f"{type(exc).__name__}: {exc}")

    return Server((address, port), Handler)


def main(environ: Mapping[str, str]) -> int:
    try:
        settings = load(environ)
    except SettingError as exc:
        log("error", str(exc))
        return 1
    metrics_dir, address = settings.metrics_dir, settings.listen_address
    if not metrics_dir.is_dir():
        log("error", f"PROMETHEUS_MULTIPROC_DIR={metrics_dir} is not a directory")
        return 1
    archive, registry = Archive(metrics_dir), CollectorRegistry()
    registry.register(archive)
    registry.register(NginxCollector(str(settings.status_socket)))
    try:
        server = make_server(address, settings.metrics_port, registry)
    except OSError as exc:
        log("error", f"cannot listen on {address}:{settings.metrics_port} (METRICS_PORT): {exc}")
        return 1
    # shutdown() waits for serve_forever() to return: not on its thread, where this runs.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    threading.Thread(target=archive.tend_forever, daemon=True).start()
    log("info", "serving metrics", address=address, port=settings.metrics_port)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
