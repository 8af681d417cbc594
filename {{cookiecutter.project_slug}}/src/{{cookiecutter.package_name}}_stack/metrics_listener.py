"""Metrics listener: every gunicorn worker's Prometheus metrics plus nginx's, on METRICS_PORT.

The runner starts it beside nginx and gunicorn (``python -m {{ cookiecutter.package_name }}_stack.metrics_listener``
serves GET /metrics until SIGTERM). Needs prometheus_client and this package's settings.py
(METRICS_PORT, LISTEN_ADDRESS, PROMETHEUS_MULTIPROC_DIR), metrics_archive.py (which also
tends that directory: dead workers' files merged into one archive) and jsonlog.py; reads
nginx's stub_status socket, $RUN_DIR/nginx-status/nginx-status.sock (nginx.conf); nothing
from the app.

Why a process of its own, not a route in the app: a scrape answered by a worker would see
that worker alone, queue behind the requests it is serving, and fail while it is blocked;
this one adds up the files of all workers, killed ones included (their counts stay, in the
archive; their in-flight gauges are dropped), and answers while the workers are busy. It
listens on its own port, so the public port never exposes it. Its clients are few (a
scraper, a person with curl): at most MAX_CLIENTS at once, each cut after CLIENT_TIMEOUT
idle, so idle connections cannot pile up threads (1,500 made 1,488 threads and 119 MB,
issue 19). The runner restarts it if it dies; the stack serves on meanwhile.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
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
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .jsonlog import write_line
from .metrics_archive import TEND_INTERVAL, Archive
from .settings import SettingError, load

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from prometheus_client.metrics_core import Metric

# A scrape must not wait long for nginx: Prometheus's own scrape timeout is 10 s by default.
STATUS_TIMEOUT = 2.0
# Prometheus scrapes a target over one connection at a time; a few more for people. A
# connection past these is closed at once: no thread, no memory.
MAX_CLIENTS = 8
# A scraper sends its request at once and reads the answer (milliseconds): a client silent
# this long (per read or write) is cut, so idle ones free their slot.
CLIENT_TIMEOUT = 5.0


log = functools.partial(write_line, "metrics")


# nginx's stub_status page ("Active connections: 2 / server accepts handled requests /
# 16 16 31 / Reading: 0 Writing: 1 Waiting: 1") holds seven numbers: these, in this order.
# Name, help, counter (else gauge). The names are those of nginx-prometheus-exporter, so its
# dashboards work. nginx counts every request, also those it answered itself (413, 499,
# 502): compare with the app's ``http_server_request_duration_seconds_count``.
_STATUS = (
    ("nginx_connections_active", "Client connections active now.", False),
    ("nginx_connections_accepted", "Client connections accepted.", True),
    ("nginx_connections_handled", "Client connections handled.", True),
    ("nginx_http_requests", "Client requests, those nginx answered itself included.", True),
    ("nginx_connections_reading", "Client connections reading now.", False),
    ("nginx_connections_writing", "Client connections writing now.", False),
    ("nginx_connections_waiting", "Client connections waiting now.", False),
)


def parse_stub_status(text: str) -> dict[str, int]:
    """nginx's stub_status page as numbers by metric name; ValueError when it is not one."""
    numbers = re.findall(r"\d+", text)
    if not text.startswith("Active connections:") or len(numbers) != len(_STATUS):
        raise ValueError(f"not a stub_status page: {text[:200]!r}")
    return {name: int(number) for (name, _, _), number in zip(_STATUS, numbers, strict=True)}


def fetch_stub_status(socket_path: str) -> str:
    """GET /stub_status from nginx over its unix socket (HTTP/1.0: nginx closes after)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(STATUS_TIMEOUT)
        connection.connect(socket_path)
        connection.sendall(b"GET /stub_status HTTP/1.0\r\nHost: localhost\r\n\r\n")
        chunks = []
        while chunk := connection.recv(4096):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
        raise ValueError(f"stub_status answered {head[:40]!r}")
    return body.decode("ascii")


class NginxCollector:
    """nginx's connection and request counters (_STATUS), read at each scrape."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path

    def collect(self) -> Iterator[Metric]:
        try:
            status = parse_stub_status(fetch_stub_status(self.socket_path))
        except (OSError, ValueError) as exc:
            log("warning", "nginx stub_status unavailable", error=str(exc))
            status = {}
        yield GaugeMetricFamily(
            "nginx_up", "Whether nginx's stub_status answered.", int(bool(status))
        )
        for name, meaning, counter in _STATUS if status else ():
            family = CounterMetricFamily if counter else GaugeMetricFamily
            yield family(name, meaning, status[name])


def build_registry(archive: Archive, status_socket: str) -> CollectorRegistry:
    """The registry a scrape renders: the workers' files and archive, then nginx's counters."""
    registry = CollectorRegistry()
    registry.register(archive)
    registry.register(NginxCollector(status_socket))
    return registry


def tend_forever(archive: Archive) -> None:
    """Tend the metrics directory every TEND_INTERVAL seconds, scraped or not (a thread)."""
    while True:
        with archive.lock:
            archive.tend()
        time.sleep(TEND_INTERVAL)


# A client that hangs up or stays silent: ordinary on a network, not the listener's error.
_CLIENT_GONE = (ConnectionError, TimeoutError)


def make_server(address: str, port: int, registry: CollectorRegistry) -> ThreadingHTTPServer:
    """GET /metrics renders ``registry``; any other path is a 404."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET

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
            # A line per scrape (every 15 s, forever) would drown the service's own logs.
            pass

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True
        # The kernel's queue of connections not yet accepted (socketserver's default is 5):
        # past it, new clients' SYNs are dropped and retried seconds later.
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
            # socketserver prints a traceback to stderr: one JSON line instead, or nothing.
            del request, client_address
            exc = sys.exc_info()[1]
            if not isinstance(exc, _CLIENT_GONE):
                log("error", "metrics request failed", error=f"{type(exc).__name__}: {exc}")

    return Server((address, port), Handler)


def main(environ: Mapping[str, str]) -> int:
    try:
        settings = load(environ)
    except SettingError as exc:
        log("error", str(exc))  # one line naming the variable, the value and what is allowed
        return 1
    metrics_dir, address = settings.metrics_dir, settings.listen_address
    if not metrics_dir.is_dir():
        log("error", f"PROMETHEUS_MULTIPROC_DIR={metrics_dir} is not a directory")
        return 1
    archive = Archive(metrics_dir, log)
    try:
        registry = build_registry(archive, str(settings.status_socket))
        server = make_server(address, settings.metrics_port, registry)
    except OSError as exc:
        log("error", f"cannot listen on {address}:{settings.metrics_port} (METRICS_PORT): {exc}")
        return 1
    # shutdown() waits for serve_forever() to return: it cannot run on serve_forever's
    # thread, where this handler runs.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    threading.Thread(target=tend_forever, args=(archive,), daemon=True).start()
    log("info", "serving metrics", address=address, port=settings.metrics_port)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
