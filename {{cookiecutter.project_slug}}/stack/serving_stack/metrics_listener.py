"""Metrics listener: every gunicorn worker's Prometheus metrics plus nginx's, on METRICS_PORT,
until SIGTERM; it tends PROMETHEUS_MULTIPROC_DIR (``Archive``). Why a process of its own, its
client limits and the archive's rules: docs/observability.md."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, Sample
from prometheus_client.exposition import CONTENT_TYPE_LATEST
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
# (sample name, sorted label pairs) -> value
Values = dict[tuple[str, tuple[tuple[str, str], ...]], float]
Family = tuple[str, str, Values]  # type, help, values

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
    """The metrics directory's live files and its archive of dead workers' values, under one
    lock: a scrape never counts a worker twice nor misses one (docs/observability.md)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / ARCHIVE
        self.lock = threading.Lock()
        self.problem = ""

    def load(self) -> dict[str, Any]:
        """The archive: {"kinds": [...], "metrics": {name: {"type", "help", "samples"}}}."""
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"kinds": [], "metrics": {}}
        if not isinstance(loaded, dict) or not isinstance(loaded.get("metrics"), dict):
            raise ValueError(f"{self.path} is not an archive of metrics")  # noqa: TRY004 - bad data, as json's own errors
        return loaded

    def files(self) -> list[Path]:
        return sorted(path for path in self.directory.glob("*.db") if file_pid(path))

    def tend(self) -> None:
        """Archive the dead processes' files and reserve every file's growth; a failure (a full
        filesystem) is said once, and once that it is over."""
        try:
            self.load()  # a damaged archive is said here, once, not at every scrape
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
        """Drop dead processes' gauges, add their additive files into the archive, remove them."""
        dead = {pid for pid in map(file_pid, self.files()) if pid and not _alive(pid)}
        for pid in dead:
            mark_process_dead(pid, str(self.directory))  # type: ignore[no-untyped-call]  # unannotated upstream
        merged = [p for p in self.files() if file_pid(p) in dead and file_kind(p) in ADDITIVE]
        if not merged:
            return
        archive = self.load()
        metrics: dict[str, Any] = {}
        for name, (typ, documentation, values) in _families(archive["metrics"], merged).items():
            samples = [[sample, dict(labels), v] for (sample, labels), v in values.items()]
            metrics[name] = {"type": typ, "help": documentation, "samples": samples}
        archive["metrics"] = metrics
        archive["kinds"] = sorted({*archive.get("kinds", []), *map(file_kind, merged)})
        partial = self.path.with_suffix(".json.tmp")
        try:
            partial.write_text(json.dumps(archive, separators=(",", ":")), encoding="utf-8")
            partial.replace(self.path)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
        for path in merged:
            path.unlink()

    def collect(self) -> Iterator[Metric]:
        """The live files plus the archive, each series once (what a scrape renders)."""
        with self.lock:
            self.tend()
            try:
                archived: dict[str, Any] = self.load()["metrics"]
            except (OSError, ValueError):  # said by tend(); the live values still count
                archived = {}
            families = _families(archived, self.files())
        for name, (typ, documentation, values) in families.items():
            metric = Metric(name, documentation, typ)
            samples = _accumulated(name, values) if typ == "histogram" else values
            metric.samples = [Sample(n, dict(labels), v) for (n, labels), v in samples.items()]
            yield metric


def _families(archived: Mapping[str, Any], files: list[Path]) -> dict[str, Family]:
    """The archive's metrics plus these files', each series added up (histogram buckets raw);
    a metric the files give another type is theirs alone: the running code redefined it."""
    merged: Iterable[Metric] = MultiProcessCollector.merge(  # type: ignore[no-untyped-call]  # unannotated upstream
        [str(path) for path in files], accumulate=False
    )
    found = [(name, e["type"], e["help"], e["samples"]) for name, e in archived.items()]
    for metric in merged:
        samples = [(s.name, s.labels, s.value) for s in metric.samples]
        found.append((metric.name, metric.type, metric.documentation, samples))
    families: dict[str, Family] = {}
    for name, typ, documentation, samples in found:
        known, _, values = families.get(name, (typ, "", {}))
        values = values if known == typ else {}
        for sample, labels, value in samples:  # labels: a dict
            key = (sample, tuple(sorted(labels.items())))
            values[key] = values.get(key, 0.0) + value
        families[name] = (typ, documentation, values)
    return families


def _accumulated(name: str, values: Values) -> Values:
    """Raw per-bucket counts made cumulative, with ``_count``, as prometheus_client renders."""
    buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, str, float]]]
    buckets = defaultdict(list)
    others: dict[tuple[tuple[str, str], ...], Values] = defaultdict(dict)
    for (sample, labels), value in values.items():
        le = dict(labels).get("le")
        rest = tuple(pair for pair in labels if pair[0] != "le")
        if sample == f"{name}_bucket" and le is not None:
            buckets[rest].append((float(le), le, value))
        else:
            others[rest][(sample, labels)] = value
    out: Values = {}
    for rest in sorted(buckets.keys() | others.keys()):
        total = 0.0
        for _, le, value in sorted(buckets[rest]):
            total += value
            out[(f"{name}_bucket", (*rest, ("le", le)))] = total  # le last, as upstream
        if buckets[rest]:
            out[(f"{name}_count", rest)] = total
        out.update(others[rest])
    return out


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
