"""Process runner: nginx (TCP) -> unix socket -> gunicorn, as one foreground program.

The container's entrypoint and `make serve` alike: renders deploy/nginx.conf from the settings
(limits and CORS included), runs nginx, gunicorn and the metrics listener, relays their logs
and counts nginx's refusals by a limit. docs/serving.md ("How the runner works") says what it
does on start, SIGTERM, SIGHUP and a child's death, and why. Needs nginx (on PATH or in
/usr/sbin), gunicorn and prometheus-client; uses this package's settings, jsonlog, cpus and
metrics_files. Never imports the app: gunicorn gets APP_MODULE.

    python -m serving_stack [serve]   the stack and the metrics listener, in the foreground
    python -m serving_stack render    write $RUN_DIR/nginx.conf and print its path
    python -m serving_stack check     exit 0 if GET /livez through nginx answers 200
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import pwd
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cpus import CGROUP_ROOT, SELF_CGROUP, usable_cpus
from .jsonlog import access_lines, nginx_error_line, stderr_line, write_line
from .metrics_files import prepare_worker
from .settings import (
    NO_APP_MODULE,
    STOP_MARGIN,
    UPSTREAM_KEEPALIVE_TIME,
    SettingError,
    StackSettings,
    load,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from prometheus_client import Counter

# A dead metrics listener is restarted after 1 s, then 2, 4... up to this while it keeps
# dying; one that served METRICS_HEALTHY seconds starts again from 1 s.
METRICS_BACKOFF_MAX = 30.0
METRICS_HEALTHY = 60.0
# Asked of the app through nginx by `check`, and through the new socket before a reload.
HEALTH = "/livez"
_HEALTH_REQUEST = f"GET {HEALTH} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
APT_HINT = "nginx is not installed; install it with: sudo apt-get install -y nginx-light"
# NGINX_WORKER_PROCESSES=auto: one nginx worker per this many usable CPUs, at least one
# (measured: docs/serving.md, "How the runner works").
CPUS_PER_NGINX_WORKER = 4
_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")
# What nginx 1.22 writes for a refusal: `limiting requests[, dry run], excess: 1.000 by zone
# "client_rate"` and `limiting connections[, dry run] by zone "app_requests"`.
_LIMITED = re.compile(
    rb'\] \d+#\d+: \*\d+ limiting (requests|connections)(, dry run)?\b.*? by zone "(\w+)"'
)

log = functools.partial(write_line, "serve")


class LineRelay:
    """Cuts a child's output into whole lines for ``convert`` (lines -> JSON lines to write)."""

    # A line longer than this is passed on in pieces rather than held without bound.
    LIMIT = 1 << 16

    def __init__(self, convert: Callable[[bytes], bytes]) -> None:
        self.convert = convert
        self.pending = b""

    def feed(self, data: bytes) -> bytes:
        """What to write for this chunk; b"" at the end of the stream flushes the rest."""
        if not data:
            rest, self.pending = self.pending, b""
            return self.convert(rest) if rest.strip() else b""
        data = self.pending + data
        complete, newline, self.pending = data.rpartition(b"\n")
        if len(self.pending) > self.LIMIT:
            complete, newline, self.pending = data, b"\n", b""
        return self.convert(complete) if newline else b""


class ServeError(Exception):
    """A problem the runner explains in one line and exits on."""


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
        if settings.rate_limit_dry_run:
            rate += "\n        limit_req_dry_run on;   # RATE_LIMIT_DRY_RUN: count and log only"
        # 413s: 5 at once, then one a second, 28 waiting, then 429s (docs/settings.md: why).
        zone += "\n    limit_req_zone $binary_remote_addr zone=oversized:1m rate=1r/s;"
        oversized = "limit_req zone=oversized burst=32 delay=4;"
    else:
        zone = rate = oversized = "# RATE_LIMIT=0: no per-client rate limit."
    if settings.connections_per_client:
        connections = f"limit_conn client_requests {settings.connections_per_client};"
    else:
        connections = "# CONNECTIONS_PER_CLIENT=0: no per-client limit of requests in flight."
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


class LimitCounter:
    """Counts nginx's refusals by a limit (429s, 503s that never reach the app) from its error
    lines, into this process's own multiprocess file (the metrics listener serves it)."""

    def __init__(self, metrics_dir: Path) -> None:
        self.counter: Counter | None = None
        # Allocated first, as the workers' (metrics_files.py): SIGBUS on a full RUN_DIR would
        # take the runner, and the whole stack, down. Refused: nginx's lines go uncounted.
        if refused := prepare_worker(metrics_dir, os.getpid(), ("counter",)):
            problem = "nginx's refusals are not counted: no room for the metric file"
            log("error", problem, directory=str(metrics_dir), error=str(refused))
            return
        # prometheus-client picks its multiprocess storage when first imported: set first.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        from prometheus_client import Counter  # noqa: PLC0415 - after the variable above

        self.counter = Counter(
            "nginx_limited_requests",
            "Requests nginx refused (or, in dry run, would have refused) by a limit: 429s by"
            " the per-client rate or oversized bodies' queue, 503s by the per-client or the"
            " overload connection limit",
            ["zone", "dry_run"],
            registry=None,  # read from the file by the listener, never served from here
        )
        # Every series exists from the start (at 0), so a dashboard's rate() has a baseline.
        for zone in ("client_rate", "oversized", "client_requests", "app_requests"):
            for dry_run in ("false", "true"):
                self.counter.labels(zone=zone, dry_run=dry_run)

    def line(self, raw: bytes) -> str:
        """One nginx error line as the stack's JSON line, counted when it is a refusal."""
        match = _LIMITED.search(raw)
        if match is not None and self.counter is not None:
            dry_run = "true" if match[2] else "false"
            self.counter.labels(zone=match[3].decode("ascii"), dry_run=dry_run).inc()
        return nginx_error_line(raw)


@dataclass
class Child:
    """A process the runner started and will reap."""

    name: str
    process: subprocess.Popen[bytes]
    status: int | None = None
    sent: int = 0  # the last signal sent to it

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.status is None

    @property
    def stopped_as_asked(self) -> bool:
        """Exited 0, or killed by the signal sent (one still starting has no handler yet)."""
        return self.status in (0, -self.sent)

    def signal(self, signum: signal.Signals) -> None:
        if self.running:
            log("info", f"sending {signum.name} to {self.name}", pid=self.pid)
            self.sent = signum
            os.kill(self.pid, signum)


class Stack:
    """nginx, gunicorn (two generations during a reload) and the metrics listener, driven by one
    select() loop: signals through a wakeup fd, children and orphans reaped, output relayed."""

    def __init__(self, settings: StackSettings, nginx_globals: str = "") -> None:
        self.settings = settings
        self.nginx_globals = nginx_globals
        self.children: dict[int, Child] = {}
        self.nginx: Child | None = None
        self.gunicorn: Child | None = None
        self.metrics: Child | None = None
        # The metrics listener's restarts (tend_metrics): consecutive failures, its last
        # start, and when the next start is due.
        self.metrics_failures = 0
        self.metrics_started = 0.0
        self.metrics_due: float | None = None
        self.generation = 0
        self.requested: signal.Signals | None = None
        self.reload_requested = False
        self.selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)  # as set_wakeup_fd requires
        self.selector.register(self._wake_read, selectors.EVENT_READ, self._on_wakeup)

    def pump(self, timeout: float) -> None:
        """Wait up to timeout for a signal, a child's exit or log output, and handle them."""
        for key, _ in self.selector.select(timeout):
            key.data(key.fileobj)
        self._reap()

    def wait_until(
        self, done: Callable[[], bool], timeout: float, *, stop_on_signal: bool = True
    ) -> bool:
        """Pump until done() or the timeout; False on timeout or an early stop request."""
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (stop_on_signal and self.requested is not None):
                return False
            self.pump(min(remaining, 0.05))
        return True

    def _on_wakeup(self, fd: int) -> None:
        for number in os.read(fd, 512):  # select() said it is readable: never blocks
            signum = signal.Signals(number)
            if signum in (signal.SIGTERM, signal.SIGINT) and self.requested is None:
                log("info", f"received {signum.name}: stopping gracefully")
                self.requested = signum
            elif signum == signal.SIGHUP and self.requested is None:
                log("info", "received SIGHUP: reloading")
                self.reload_requested = True

    def relayed_pipe(self, convert: Callable[[bytes], bytes]) -> int:
        """A pipe's write end for one child; the loop writes its lines, converted, to stdout."""
        read_end, write_end = os.pipe()
        relay = LineRelay(convert)

        def on_output(fd: int) -> None:
            data = os.read(fd, 65536)
            if out := relay.feed(data):
                sys.stdout.buffer.write(out)
                sys.stdout.buffer.flush()
            if not data:
                self.selector.unregister(fd)
                os.close(fd)

        self.selector.register(read_end, selectors.EVENT_READ, on_output)
        return write_end

    def _reap(self) -> None:
        with contextlib.suppress(ChildProcessError):  # no child left
            while (reaped := os.waitpid(-1, os.WNOHANG))[0]:
                pid, status = reaped
                child = self.children.get(pid)
                if child is None:
                    continue  # an orphan re-parented to us (PID 1): reaped, nothing else to do
                child.status = os.waitstatus_to_exitcode(status)
                child.process.returncode = child.status
                level = "info" if child.stopped_as_asked else "warning"
                log(level, f"{child.name} exited", pid=pid, exit_code=child.status)

    def spawn(
        self,
        name: str,
        command: list[str],
        env: Mapping[str, str],
        err: Callable[[bytes], str],
        out: Callable[[bytes], bytes] | None = None,
    ) -> Child:
        """A child leading its own process group, dying with the runner (docs/serving.md); each
        line of its stderr relayed as err(line), its stdout (given out) as out(lines)."""

        def each_line(block: bytes) -> bytes:
            lines = (err(line) + "\n" for line in block.split(b"\n") if line.strip())
            return "".join(lines).encode("ascii")

        stderr = self.relayed_pipe(each_line)
        stdout = self.relayed_pipe(out) if out else None
        arm = functools.partial(_die_with_parent, os.getpid())
        try:
            process = subprocess.Popen(
                command, env=dict(env), stdout=stdout, stderr=stderr, process_group=0,
                preexec_fn=arm,  # noqa: PLW1509 - one thread here
            )  # fmt: skip
        finally:  # the child holds the write ends now: the relay ends with the child
            for end in (stdout, stderr):
                if end is not None:
                    os.close(end)
        child = Child(name, process)
        self.children[process.pid] = child
        log("info", f"started {name}", pid=process.pid, command=command)
        return child

    def python_env(self) -> dict[str, str]:
        """Every gunicorn generation's and the metrics listener's: one metrics directory."""
        run_dir, metrics = self.settings.run_dir, self.settings.metrics_dir
        return {**os.environ, "RUN_DIR": str(run_dir), "PROMETHEUS_MULTIPROC_DIR": str(metrics)}

    def wait_accepting(self, child: Child, address: Path | tuple[str, int], timeout: float) -> bool:
        """Pump until child accepts connections; False if it exited, timed out or stopped."""
        accepting = self.wait_until(lambda: not child.running or _accepts(address), timeout)
        return accepting and child.running

    def start_gunicorn(self, generation: int) -> Child:
        """Start a generation on its own socket; publish() then makes it the one nginx uses."""
        sock = generation_socket(self.settings, generation)
        sock.unlink(missing_ok=True)
        env = {**self.python_env(), "GUNICORN_SOCKET": str(sock)}
        command = [sys.executable, "-m", "gunicorn", "-c", str(self.settings.gunicorn_conf)]
        # gunicorn logs JSON to stdout; its stderr (warnings, an early crash) becomes JSON too.
        err = functools.partial(stderr_line, "gunicorn.stderr")
        name = f"gunicorn[{generation}]" if generation else "gunicorn"
        child, timeout = self.spawn(name, command, env, err), self.settings.startup_timeout
        if not self.wait_accepting(child, sock, timeout):
            if not child.running:
                raise ServeError(
                    f"gunicorn exited ({child.status}) before binding {sock}: see its log"
                )
            if self.requested is None:
                raise ServeError(f"gunicorn did not bind {sock} within {timeout:g} s")
            return child
        mode = f"{sock.stat().st_mode & 0o777:04o}"
        log("info", "gunicorn is accepting connections", socket=str(sock), mode=mode)
        return child

    def start_nginx(self) -> Child:
        env = {"PATH": os.environ.get("PATH", os.defpath), "TZ": "UTC"}
        command = nginx_command(self.settings, "-g", f"daemon off; {self.nginx_globals}".strip())
        # The access log (stdout) is JSON already, made printable ASCII here; the error log
        # (stderr) becomes the stack's JSON lines, its refusals by a limit counted.
        err = LimitCounter(self.settings.metrics_dir).line
        child = self.spawn("nginx", command, env, err, out=access_lines)
        if self.wait_accepting(child, (self.settings.local_address, self.settings.port), 10.0):
            log("info", "ready", url=f"{self.settings.local_url}/")
        return child

    def start_metrics(self, *, wait: bool = True) -> Child:
        """The metrics listener (docs/observability.md); wait: until it accepts (at start only)."""
        command = [sys.executable, "-m", f"{__package__}.metrics_listener"]
        err = functools.partial(stderr_line, "metrics.stderr")
        child = self.spawn("metrics", command, self.python_env(), err)
        self.metrics_started = time.monotonic()
        if wait:
            address = (self.settings.local_address, self.settings.metrics_port)
            self.wait_accepting(child, address, 10.0)
        return child

    def tend_metrics(self) -> None:
        """Restart a dead metrics listener alone, after a backoff: it must not stop the stack."""
        now, child = time.monotonic(), self.metrics
        if child is not None and child.running:
            if self.metrics_failures and now - self.metrics_started > METRICS_HEALTHY:
                self.metrics_failures = 0
            return
        delay = min(METRICS_BACKOFF_MAX, 2.0**self.metrics_failures)
        if child is not None:  # died (its exit is logged by _reap): schedule the restart
            self.children.pop(child.pid, None)
            self.metrics, self.metrics_due = None, now + delay
            self.metrics_failures += 1
            log("warning", "restarting the metrics listener", after_seconds=delay,
                exit_code=child.status)  # fmt: skip
        elif self.metrics_due is not None and now >= self.metrics_due:
            self.metrics_due = None
            try:
                self.metrics = self.start_metrics(wait=False)
            except OSError as exc:  # cannot fork now: try again after the next backoff
                log("error", "cannot start the metrics listener", error=str(exc))
                self.metrics_due = now + delay
                self.metrics_failures += 1

    def stop(self, child: Child | None, signum: signal.Signals, budget: float) -> bool:
        """Signal child, wait up to budget; kill it past that. True when it stopped cleanly."""
        if child is None:
            return True
        if not child.running:
            self._stop_leftovers(child, budget)
            return child.status == 0
        child.signal(signum)
        if self.wait_until(lambda: not child.running, budget, stop_on_signal=False):
            return child.stopped_as_asked
        log("error", f"{child.name} did not stop within {budget:g} s: killing it", pid=child.pid)
        child.signal(signal.SIGKILL)
        self.wait_until(lambda: not child.running, 5.0, stop_on_signal=False)
        self._stop_leftovers(child, 5.0)
        return False

    def stop_gunicorn(self, child: Child) -> bool:
        """Stop a gunicorn generation within its drain and forget it."""
        stopped = self.stop(child, signal.SIGTERM, self.settings.graceful_timeout + STOP_MARGIN)
        self.children.pop(child.pid, None)
        return stopped

    def _stop_leftovers(self, child: Child, budget: float) -> None:
        """TERM, then KILL past the budget, what a dead master left in its group (its workers)."""
        if not _group_alive(child.pid):
            return
        log("warning", f"stopping the processes {child.name} left behind", pgid=child.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        if not self.wait_until(lambda: not _group_alive(child.pid), budget, stop_on_signal=False):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)

    def stop_all(self) -> bool:
        nginx_ok = self.stop(self.nginx, signal.SIGQUIT, self.settings.nginx_drain + STOP_MARGIN)
        # Last scrapes may still come while nginx drains: the listener stops after it. One
        # that died before (its restart pending) was said then and spoils nothing now.
        metrics = self.metrics if self.metrics is not None and self.metrics.running else None
        metrics_ok = self.stop(metrics, signal.SIGTERM, STOP_MARGIN)
        # Every gunicorn generation still running (two, if a reload was interrupted).
        generations = [c for c in self.children.values() if c.name.startswith("gunicorn")]
        return all([nginx_ok, metrics_ok, *map(self.stop_gunicorn, generations)])

    def publish(self, generation: int) -> None:
        """Link a generation's socket over nginx's stable path, atomically (docs/serving.md)."""
        stable = self.settings.upstream_socket
        staged = stable.with_suffix(".sock.new")
        staged.unlink(missing_ok=True)
        os.link(generation_socket(self.settings, generation), staged)
        staged.replace(stable)

    def reload(self) -> None:
        """SIGHUP: generation N+1 on its own socket must answer /livez before publish() swaps
        it in; a failure before the swap is abandoned (N keeps serving), and after it nothing
        may stop the stack (docs/serving.md)."""
        old, generation = self.gunicorn, self.generation + 1
        if old is None or self.nginx is None:
            return
        sock = generation_socket(self.settings, generation)
        try:
            new = self.start_gunicorn(generation)
            answered = self.wait_until(
                lambda: not new.running or _accepts(sock, health=True),
                self.settings.startup_timeout,
            )
            if self.requested is not None:
                return  # stop_all() stops both generations
            healthy = answered and new.running
            problem = "" if healthy else f"generation {generation} does not answer {HEALTH}"
            if not problem:
                self.publish(generation)
        except (ServeError, OSError, subprocess.SubprocessError) as exc:
            problem = str(exc)
        if problem:
            kept = f"reload abandoned, generation {self.generation} keeps serving"
            log("error", f"{kept}: {problem}", generation=generation)
            for child in list(self.children.values()):
                if child.name == f"gunicorn[{generation}]":
                    self.stop_gunicorn(child)
            return
        old_socket = generation_socket(self.settings, self.generation)
        self.gunicorn, self.generation = new, generation
        log("info", "new connections go to the new generation", generation=generation)
        # Past the swap only values computed here, and an OS error is said and passed over;
        # idle connections left after keepalive_time are TERM's (docs/serving.md, "Reloads").
        try:
            drained = self.wait_until(
                lambda: _connections_to(old_socket) == 0, UPSTREAM_KEEPALIVE_TIME + STOP_MARGIN
            )
            if not drained and self.requested is None:
                closing = "stopping the old generation; nginx's idle connections to it will close"
                log("info", closing, connections=_connections_to(old_socket))
            self.stop_gunicorn(old)
        except OSError as exc:
            log("error", "the old generation may not have stopped cleanly", error=str(exc),
                pid=old.pid, generation=generation)  # fmt: skip
        log("info", "reload complete", generation=generation, gunicorn_pid=new.pid)

    def supervised(self) -> list[Child]:
        """nginx and gunicorn: their death stops the stack (tend_metrics restarts the other)."""
        return [c for c in (self.nginx, self.gunicorn) if c is not None]

    def run(self) -> int:
        """Start gunicorn, then nginx; serve until a signal or a death; stop in order."""
        signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, lambda *_: None)  # the wakeup fd carries the number
        _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: adopt our children's orphans, as PID 1 would
        try:
            _check_port_free(self.settings)
            self.gunicorn = self.start_gunicorn(self.generation)
            self.publish(self.generation)
            if self.requested is None:
                self.nginx = self.start_nginx()
            if self.requested is None:
                self.metrics = self.start_metrics()
            while self.requested is None and all(c.running for c in self.supervised()):
                self.pump(1.0)
                self.tend_metrics()
                if self.reload_requested and self.requested is None:
                    self.reload_requested = False
                    self.reload()
        except (ServeError, OSError) as exc:
            log("error", str(exc))
            self.stop_all()
            return 1
        dead = [c for c in self.supervised() if not c.running]
        clean = self.stop_all()
        if dead:
            names = ", ".join(f"{c.name} (exit status {c.status})" for c in dead)
            log("error", f"stopped because {names} exited unexpectedly")
            return 1
        if not clean:
            log("error", "stopped, but not cleanly within the budget")
            return 1
        log("info", "stopped cleanly")
        return 0


def generation_socket(settings: StackSettings, generation: int) -> Path:
    """The socket a gunicorn generation binds (publish() links it to nginx's stable path)."""
    return settings.run_dir / f"gunicorn-{generation}.sock"


def _prctl(option: int, value: int) -> None:
    """Linux's prctl(2); elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _die_with_parent(parent: int) -> None:
    """In a new child, before exec: SIGTERM it when the runner dies (PR_SET_PDEATHSIG)."""
    _prctl(1, signal.SIGTERM)
    if os.getppid() != parent:  # the runner died before the signal was armed
        os._exit(1)


def _check_port_free(settings: StackSettings) -> None:
    """Refuse a busy PORT: an orphan would answer our readiness check, and nginx fail to bind."""
    family = socket.AF_INET6 if ":" in settings.listen_address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nginx: TIME_WAIT is free
        try:
            probe.bind((settings.listen_address, settings.port))
        except OSError as exc:
            raise ServeError(
                f"port {settings.port} in use on {settings.listen_address}; set PORT"
                f" ({exc.strerror})"
            ) from None


def _connections_to(bound: Path) -> int:
    """Open connections accepted on the socket bound at this path, from /proc/net/unix."""
    try:
        table = Path("/proc/net/unix").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0  # not Linux: nothing to wait for
    # After the header: Num RefCount Protocol Flags Type St Inode Path; St 03 = connected.
    rows = [line.split() for line in table.splitlines()[1:]]
    return sum(len(row) >= 8 and row[5] == "03" and row[7] == str(bound) for row in rows)


def _group_alive(pgid: int) -> bool:
    """Whether any live (not zombie) process is left in a process group (/proc/<pid>/stat)."""
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # exited while we looked
            # After the ")" that ends the command name: state, ppid, pgrp, ...
            state, _, pgrp = stat_file.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[:3]
            if int(pgrp) == pgid and state != "Z":
                return True
    return False


def _accepts(address: Path | tuple[str, int], *, health: bool = False) -> bool:
    """Whether something accepts connections at a unix socket path or a TCP address; health:
    whether the app behind a gunicorn socket answers GET /livez in 0.2 s (docs/serving.md)."""
    target: str | tuple[str, int]
    if isinstance(address, Path):
        family, target = socket.AF_UNIX, str(address)
    else:  # an IP address (settings)
        family, target = socket.AF_INET6 if ":" in address[0] else socket.AF_INET, address
    with socket.socket(family) as probe:
        probe.settimeout(0.2 if health else 1.0)
        try:
            probe.connect(target)
            if not health:
                return True
            probe.sendall(_HEALTH_REQUEST.encode("ascii"))
            return probe.recv(64).startswith(b"HTTP/1.1 200 ")
        except OSError:
            return False


def drop_privileges(settings: StackSettings) -> str:
    """As root, become SERVE_USER (and only its group) before starting anything, or refuse in
    one line unless SERVE_AS_ROOT=on: then the global directive returned keeps nginx's
    workers root too (docs/serving.md)."""
    if os.geteuid() != 0:
        return ""
    name = settings.serve_user
    try:
        user = pwd.getpwnam(name)
        problem = f"SERVE_USER {name} is root" if user.pw_uid == 0 else ""
        if not problem:  # fail now, in plain words, not with a traceback after the switch
            probe, uid, gid = [sys.executable, "-c", "import gunicorn"], user.pw_uid, user.pw_gid
            subprocess.run(
                probe, user=uid, group=gid, extra_groups=[], check=True, capture_output=True
            )
    except KeyError:
        create = f"create it: useradd --system {name}; or set SERVE_USER"
        problem = f"SERVE_USER {name} does not exist ({create})"
    except (OSError, subprocess.CalledProcessError):
        where = "a private directory such as /root?"
        problem = f"SERVE_USER {name} cannot run {sys.executable} with gunicorn ({where})"
    if problem:
        if not settings.serve_as_root:
            raise ServeError(
                f"started as root, but {problem}: refusing to serve as root; run as an"
                " ordinary user, fix SERVE_USER, or set SERVE_AS_ROOT=on"
            )
        log("warning", f"started as root, but {problem}: serving as root (SERVE_AS_ROOT=on)")
        return "user root root;"
    settings.run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    for path in [settings.run_dir, *settings.run_dir.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)
    os.environ["HOME"] = str(settings.run_dir)
    ids = {"user": user.pw_name, "uid": user.pw_uid, "gid": user.pw_gid}
    log("info", "started as root: running as an unprivileged user", **ids)
    return ""


def serve(settings: StackSettings) -> int:
    """Check nginx, drop root, ready RUN_DIR, render and test nginx.conf, then run the Stack."""
    if settings.app_module is None:
        log("error", NO_APP_MODULE)
        return 1
    nginx = settings.nginx_bin
    if nginx is None or not os.access(nginx, os.X_OK):
        log("error", f"{nginx} (NGINX_BIN) is not an executable. {APT_HINT}" if nginx else APT_HINT)
        return 1
    nginx_globals = drop_privileges(settings)
    try:
        settings.run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        # Metrics start from zero with the stack (a restarted container keeps its tmpfs).
        shutil.rmtree(settings.metrics_dir, ignore_errors=True)
        settings.metrics_dir.mkdir(mode=0o700)
        # nginx removes its unix socket on exit, but not after a kill: bind() would then fail.
        settings.status_socket.unlink(missing_ok=True)
        workers, workers_facts = nginx_workers(settings)
        conf = write_nginx_conf(settings, settings.upstream_socket, workers)
    except OSError as exc:  # unwritable RUN_DIR, unreadable NGINX_CONF...: one line, no traceback
        where = f"NGINX_CONF={settings.nginx_conf} into RUN_DIR={settings.run_dir}"
        log("error", f"cannot render {where}: {exc}")
        return 1
    # Fail early with nginx's own message (bad TRUSTED_PROXIES, port, paths...).
    test = nginx_command(settings, "-t", "-q", *(["-g", nginx_globals] if nginx_globals else []))
    checked = subprocess.run(test, capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        said = checked.stderr.strip()
        log("error", "nginx rejected the rendered config", config=str(conf), nginx=said)
        return 1
    # With the timeouts derived from the app's deadline, in seconds.
    log("info", "rendered nginx config", config=str(conf), app_deadline=settings.app_deadline,
        nginx_proxy_timeout=settings.proxy_timeout, nginx_drain=settings.nginx_drain,
        graceful_timeout=settings.graceful_timeout, stop_needs=settings.stop_budget)  # fmt: skip
    log("info", "nginx worker count decided", workers=workers, **workers_facts)
    return Stack(settings, nginx_globals).run()


def check(settings: StackSettings) -> int:
    """The container's health check: the whole chain answers GET /livez (no curl needed)."""
    url = f"{settings.local_url}{HEALTH}"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 - http, built here
            return 0 if response.status == 200 else 1
    except OSError as exc:  # urllib's URLError included
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "serve"
    try:
        settings = load(os.environ)
        if command == "serve":
            return serve(settings)
        if command == "render":
            print(write_nginx_conf(settings, settings.upstream_socket))
            return 0
        if command == "check":
            return check(settings)
    except (ServeError, SettingError) as exc:
        log("error", str(exc))
        return 1
    print(f"usage: {argv[0]} [serve|render|check]", file=sys.stderr)
    return 2
