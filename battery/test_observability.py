"""Live observability tests: a real Prometheus scrapes the stack; a real OTLP receiver gets spans.

Each starts the supervisor (`python -m serving_stack`) as the container does (2 gunicorn
workers, real nginx) serving apps/observed_app.py (the real app plus a /hold route).
Prometheus is Debian's `prometheus` (skipped, with the reason, where it is missing); the
OTLP/HTTP receiver is a small HTTP server in this process that decodes what the exporter
posts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from harness.clients import fetch
from harness.ports import free_port, wait_for
from harness.processes import Processes
from harness.stack import RunningStack

from . import conftest
from .conftest import PACKAGE, SYSTEM_PATH, Stacks, needs_the_example, wait_for_line, worker_pids

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.live

APP = "observed_app:app"
# An id no item has, whichever store the example uses (not an encoded item; far above any id
# the other tests create): each GET is a 404 under the route template.
NO_SUCH_ITEM = 900_000_000
ITEMS = 'sum(http_server_request_duration_seconds_count{route="/items/{item_id}"})'
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"


@dataclass
class Observed:
    """A live stack and the port of its metrics listener."""

    stack: RunningStack
    metrics_port: int

    @property
    def base(self) -> str:
        return self.stack.base

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


@pytest.fixture
def observed_stack(stacks: Stacks) -> Callable[..., Observed]:
    """Start the stack serving observed_app.py, once its metrics listener answers too."""

    def start(**env: str) -> Observed:
        stack = stacks.start(APP, **env)
        metrics_url = f"http://127.0.0.1:{stack.metrics_port}/metrics"
        wait_for(
            lambda: stack.process.poll() is not None or _ok(metrics_url), 30, "the metrics listener"
        )
        assert stack.process.poll() is None, f"the supervisor exited:\n{stack.log_text()}"
        return Observed(stack, stack.metrics_port)

    return start


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)
    except OSError:
        return False


def scrape(observed: Observed) -> str:
    status, _, body = fetch(observed.metrics_url)
    assert status == 200
    return body.decode()


def sample(text: str, name: str) -> float | None:
    """The value of an unlabelled sample in an exposition; None when it is absent."""
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def kill_worker(stack: RunningStack, pid: int) -> None:
    """SIGKILL one worker and wait until gunicorn has replaced it."""
    before = worker_pids(stack)
    assert pid in before
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: pid not in worker_pids(stack) and len(worker_pids(stack)) == len(before),
        30,
        f"gunicorn to replace worker {pid}",
    )


# --- Prometheus ---------------------------------------------------------------------------


class Prometheus:
    """Debian's prometheus server, scraping one target every second."""

    def __init__(self, target: str, directory: Path) -> None:
        binary = shutil.which("prometheus", path=SYSTEM_PATH)
        if binary is None:
            pytest.skip("prometheus is not installed (sudo apt-get install -y prometheus)")
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: service\n"
            f"    static_configs:\n      - targets: ['{target}']\n",
            encoding="utf-8",
        )
        argv = [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}"]
        argv += [f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        self.processes = Processes()
        log = directory / "prometheus.log"
        self.processes.start("prometheus", argv, os.environ, directory, log)

    def vector(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result (label set and value of each series); [] on no answer."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql}
        )
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:
            # 400/422: the query itself is wrong. Anything else (503 while Prometheus starts)
            # is "no answer yet".
            if error.code in {400, 422}:
                pytest.fail(f"Prometheus refused {promql}: {error.read().decode()}")
            return []
        except OSError:
            return []
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def query(self, promql: str) -> float | None:
        """An instant query's single value, or None when the result is empty."""
        result = self.vector(promql)
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def wait_value(self, promql: str, expected: float, timeout: float = 30) -> None:
        """Poll until the query returns exactly ``expected``; fail showing the last value."""
        last: list[float | None] = [None]

        def reached() -> bool:
            last[0] = self.query(promql)
            return last[0] == expected

        try:
            wait_for(reached, timeout, f"{promql} to be {expected}")
        except TimeoutError:
            pytest.fail(f"{promql} stayed {last[0]}, expected {expected}")


@pytest.fixture
def prometheus() -> Iterator[Callable[[Observed], Prometheus]]:
    servers: list[tuple[Prometheus, Path]] = []

    def start(observed: Observed) -> Prometheus:
        directory = Path(tempfile.mkdtemp(prefix="prometheus-test-"))
        server = Prometheus(f"127.0.0.1:{observed.metrics_port}", directory)
        servers.append((server, directory))
        server.wait_value('up{job="service"}', 1, timeout=60)
        return server

    yield start
    for server, directory in servers:
        server.processes.stop_all()
        shutil.rmtree(directory, ignore_errors=True)


@needs_the_example()
def test_prometheus_counts_every_request_across_workers_and_worker_kills(
    observed_stack: Callable[..., Observed], prometheus: Callable[[Observed], Prometheus]
) -> None:
    """After N requests PromQL returns N, and still N, then N+M, after every worker was killed."""
    observed = observed_stack()
    stack = observed.stack
    server = prometheus(observed)
    first, then = 40, 15
    original = worker_pids(stack)
    assert len(original) == 2

    for item in range(first):
        assert fetch(f"{stack.base}/items/{NO_SUCH_ITEM + item}")[0] == 404
    server.wait_value(ITEMS, first)
    # Hold a request in one worker, so that worker dies with a request in flight.
    holder = threading.Thread(target=fetch, args=(f"{stack.base}/hold?seconds=60",))
    holder.start()
    wait_for(
        lambda: any(line.get("message") == "holding" for line in stack.log_lines()),
        30,
        "the /hold request to start",
    )
    held_in = next(
        int(str(line["pid"])) for line in stack.log_lines() if line.get("message") == "holding"
    )
    assert sample(scrape(observed), "http_server_active_requests") == 1
    for pid in [held_in, *(original - {held_in})]:
        kill_worker(stack, pid)
    holder.join(timeout=60)

    server.wait_value(ITEMS, first)
    # The listener marked the killed worker dead: its in-flight request no longer counts (the
    # gauge reappears at 0 once the replacements have loaded the app).
    wait_for(
        lambda: sample(scrape(observed), "http_server_active_requests") == 0,
        30,
        "http_server_active_requests to return to 0",
    )
    for item in range(then):
        assert fetch(f"{stack.base}/items/{NO_SUCH_ITEM + item}")[0] == 404
    server.wait_value(ITEMS, first + then)
    # The raw paths never became series: one route template, one status, one method.
    server.wait_value('count(http_server_request_duration_seconds_count{route=~"/items/.+"})', 1)
    # nginx counted them too (and the /livez, /hold and killed requests besides).
    nginx_requests = server.query("nginx_http_requests_total")
    assert nginx_requests is not None
    assert nginx_requests >= first + then
    server.wait_value("nginx_up", 1)

    # Every query docs/observability.md offers is valid PromQL over these series.
    rate, errors, p99, in_flight, nginx_only = [server.vector(q) for q in documented_queries()]
    assert "/items/{item_id}" in {series["metric"]["route"] for series in rate}
    assert errors == []  # no 5xx was answered
    assert "/items/{item_id}" in {series["metric"]["route"] for series in p99}
    assert [float(series["value"][1]) for series in in_flight] == [0.0]
    assert len(nginx_only) == 1


def documented_queries() -> list[str]:
    """The PromQL blocks of docs/observability.md, in order."""
    text = (conftest.PROJECT / "docs" / "observability.md").read_text(encoding="utf-8")
    return [
        " ".join(block.split()) for block in re.findall(r"```promql\n(.*?)```", text, re.DOTALL)
    ]


def test_metrics_are_served_on_their_own_port_only(
    observed_stack: Callable[..., Observed],
) -> None:
    """METRICS_PORT serves the app's and nginx's metrics; the public port serves neither."""
    stack = observed_stack()
    fetch(f"{stack.base}/livez")

    text = scrape(stack)
    public = [fetch(f"{stack.base}{path}") for path in ("/metrics", "/stub_status")]

    assert 'route="/livez"' in text
    assert sample(text, "nginx_up") == 1
    accepted = sample(text, "nginx_connections_accepted_total")
    assert accepted is not None
    assert accepted >= 1
    for status, _, body in public:
        assert status == 404
        assert b"http_server_request" not in body
        assert b"Active connections" not in body
    assert fetch(stack.metrics_url.replace("/metrics", "/other"))[0] == 404


# --- OpenTelemetry ----------------------------------------------------------------------------


class OtlpReceiver:
    """A minimal OTLP/HTTP trace receiver: decodes each POST to /v1/traces, answers 200."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    for scope_spans in resource_spans.scope_spans:
                        receiver.spans.extend(
                            (resource_spans.resource, span) for span in scope_spans.spans
                        )
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def named(self, name: str) -> list[Any]:
        return [span for _, span in self.spans if span.name == name]


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


@needs_the_example()
@pytest.mark.parametrize("trusted", [True, False], ids=["trusted-proxy", "untrusted-client"])
def test_spans_reach_an_otlp_receiver_and_continue_a_trusted_trace(
    observed_stack: Callable[..., Observed], otlp_receiver: OtlpReceiver, *, trusted: bool
) -> None:
    """An OTLP endpoint set: each request's span is exported under its route template, and
    joins the caller's trace only when a trusted proxy sent the traceparent."""
    observed = observed_stack(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=otlp_receiver.endpoint,
        OTEL_SERVICE_NAME="observed-service",
        OTEL_BSP_SCHEDULE_DELAY="100",
        **({"TRUSTED_PROXIES": "127.0.0.1/32"} if trusted else {}),
    )

    stack = observed.stack
    missing = f"/items/{NO_SUCH_ITEM}"
    status, headers, _ = fetch(f"{stack.base}{missing}", headers={"traceparent": TRACEPARENT})
    wait_for(lambda: bool(otlp_receiver.named("GET /items/{item_id}")), 30, "the span export")

    assert status == 404
    (span,) = otlp_receiver.named("GET /items/{item_id}")
    resource = next(r for r, s in otlp_receiver.spans if s is span)
    attributes = {a.key: a.value.string_value for a in resource.attributes}
    assert attributes["service.name"] == "observed-service"
    joined = span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_SPAN_ID
    assert joined is trusted
    # The app's JSON log line of this request carries the same request id and trace id. Waited
    # for: the relay may pass it on after the span's export (a busy CI run read it too early).
    access = wait_for_line(
        stack,
        lambda line: line.get("logger") == f"{PACKAGE}.access" and line.get("path") == missing,
        "the request's access line",
    )
    assert [(line["request_id"], line["trace_id"]) for line in access] == [
        (headers["X-Request-ID"], span.trace_id.hex())
    ]
