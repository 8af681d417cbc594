"""The supervisor: nginx, gunicorn and the metrics listener as one foreground program (PID 1),
a dead metrics listener restarted alone; a death of the others, or SIGTERM, stops all in order
within the stop budget (README.md's design notes)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import ServeError
from .child_lines import access_lines, stderr_line
from .log_relay import OUTPUT, LimitCounter, LineRelay, log
from .nginx_conf import DRAIN_FLAG, declared_zones, nginx_command, write_nginx_conf
from .settings import STOP_MARGIN, StackSettings

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# A dead metrics listener restarts after 1 s, 2, 4... up to this; healthy this long: 1 s again.
METRICS_BACKOFF_MAX = 30.0
METRICS_HEALTHY = 60.0
# Asked through gunicorn's socket before "ready": any answer (a 404 too) means a worker has
# imported the app. With a client address, as nginx sends each request: an app that reads
# request.client.host must not fail at every start.
HEALTH = "/livez"
_HEALTH_REQUEST = (
    f"GET {HEALTH} HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 127.0.0.1\r\n"
    "Connection: close\r\n\r\n"
)


@dataclass
class Child:
    """A process the supervisor started and will reap."""

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


class Supervisor:
    """One select() loop: signals by a wakeup fd, children and orphans reaped, output relayed."""

    def __init__(
        self, settings: StackSettings, nginx_globals: str = "", nginx_workers: int = 1
    ) -> None:
        self.settings = settings
        self.nginx_globals = nginx_globals
        self.nginx_workers = nginx_workers  # the drain renders nginx.conf again with them
        self.children: dict[int, Child] = {}
        self.nginx: Child | None = None
        self.gunicorn: Child | None = None
        self.metrics: Child | None = None
        # tend_metrics: consecutive failures, the last start, when the next is due.
        self.metrics_failures = 0
        self.metrics_started = 0.0
        self.metrics_due: float | None = None
        self.requested: signal.Signals | None = None
        self.flooded = False  # this pump read a large chunk: pump again at once
        self.selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)  # as set_wakeup_fd requires
        self.selector.register(self._wake_read, selectors.EVENT_READ, self._on_wakeup)

    def pump(self, timeout: float) -> None:
        """Wait up to timeout for a signal, a child's exit or log output, and handle them."""
        # Lines stdout did not take yet are offered again at least every 50 ms.
        events = self.selector.select(min(timeout, 0.05) if OUTPUT.pending else timeout)
        self.flooded = False
        for key, _ in events:
            key.data(key.fileobj)
        self._reap()
        OUTPUT.flush()
        # Lines that trickle (every read small) wait 2 ms to be read together: a wake-up a line
        # cost 15 % of the requests a second with the app's access line on. A flood is not kept.
        if events and not self.flooded:
            time.sleep(0.002)

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
            elif signum == signal.SIGHUP:
                # Deploys replace the container (README.md's design notes): nothing reloads.
                log("info", "received SIGHUP: ignored; to deploy, replace the container")

    def relayed_pipe(self, convert: Callable[[bytes], bytes]) -> int:
        """A pipe's write end for one child; the loop writes its lines, converted, to stdout."""
        read_end, write_end = os.pipe()
        relay = LineRelay(convert)

        def on_output(fd: int) -> None:
            data = os.read(fd, 65536)
            self.flooded |= len(data) > 16384
            if out := relay.feed(data):
                OUTPUT.write(out)
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
        """A child leading its own process group, dying with the supervisor; its stderr relayed as
        err(line) each line, its stdout (given out) as out(lines)."""

        def each_line(block: bytes) -> bytes:
            converted = (err(line) for line in block.split(b"\n") if line.strip())
            return "".join(text + "\n" for text in converted if text).encode("ascii")

        stderr = self.relayed_pipe(each_line)
        stdout = self.relayed_pipe(out) if out else None
        arm = functools.partial(_die_with_parent, os.getpid())
        try:
            process = subprocess.Popen(
                command,
                env=dict(env),
                stdout=stdout,
                stderr=stderr,
                process_group=0,
                preexec_fn=arm,  # noqa: PLW1509 - one thread here
            )
        finally:  # the child holds the write ends now: the relay ends with the child
            for end in (stdout, stderr):
                if end is not None:
                    os.close(end)
        child = Child(name, process)
        self.children[process.pid] = child
        log("info", f"started {name}", pid=process.pid, command=command)
        return child

    def spawn_python(self, name: str, *args: str) -> Child:
        """gunicorn or the metrics listener (one metrics directory); stderr logged as JSON, and
        stdout (JSON lines already) relayed as it is: a stalled stdout never blocks them."""
        run_dir, metrics = self.settings.run_dir, self.settings.metrics_dir
        env = {**os.environ, "RUN_DIR": str(run_dir), "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
        err = functools.partial(stderr_line, f"{name}.stderr")
        return self.spawn(name, [sys.executable, "-m", *args], env, err, out=_as_written)

    def wait_accepting(self, child: Child, address: tuple[str, int], timeout: float) -> bool:
        """Pump until child accepts connections; False if it exited, timed out or stopped."""
        accepting = self.wait_until(lambda: not child.running or _answers(address, 1.0), timeout)
        return accepting and child.running

    def start_gunicorn(self) -> Child:
        """Start gunicorn; return once a worker has imported the app and answered (HEALTH)."""
        sock = self.settings.gunicorn_socket
        sock.unlink(missing_ok=True)
        child = self.spawn_python("gunicorn", "gunicorn", "-c", str(self.settings.gunicorn_conf))
        timeout = self.settings.startup_timeout
        health = functools.partial(_answers, str(sock), 0.2, _HEALTH_REQUEST)
        answered = self.wait_until(lambda: not child.running or health(), timeout)
        if not child.running:
            raise ServeError(
                f"gunicorn exited ({child.status}) before serving the app: see its log"
            )
        if not answered and self.requested is None:
            raise ServeError(f"the app did not answer on {sock} within {timeout:g} s")
        if answered:
            mode = f"{sock.stat().st_mode & 0o777:04o}"
            log("info", "gunicorn's workers serve the app", socket=str(sock), mode=mode)
        return child

    def start_nginx(self) -> Child:
        env = {"PATH": os.environ.get("PATH", os.defpath), "TZ": "UTC"}
        command = nginx_command(self.settings, "-g", f"daemon off; {self.nginx_globals}".strip())
        # The access log (stdout): JSON made printable ASCII; the error log (stderr): counted.
        zones = declared_zones(self.settings.rendered_conf.read_text(encoding="utf-8"))
        err = LimitCounter(self.settings.metrics_dir, zones).line
        child = self.spawn("nginx", command, env, err, out=access_lines)
        if self.wait_accepting(child, (self.settings.local_address, self.settings.port), 10.0):
            log("info", "ready", url=f"{self.settings.local_url}/")
        return child

    def start_metrics(self, *, wait: bool = True) -> Child:
        """The metrics listener; wait: until it accepts (at start only)."""
        child = self.spawn_python("metrics", f"{__package__}.metrics_listener")
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
            said = {"after_seconds": delay, "exit_code": child.status}
            log("warning", "restarting the metrics listener", **said)
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
        if child.sent != signum:  # stop_all may have sent it already
            child.signal(signum)
        if self.wait_until(lambda: not child.running, budget, stop_on_signal=False):
            return child.stopped_as_asked
        log("error", f"{child.name} did not stop within {budget:g} s: killing it", pid=child.pid)
        child.signal(signal.SIGKILL)
        self.wait_until(lambda: not child.running, 5.0, stop_on_signal=False)
        self._stop_leftovers(child, 5.0)
        return False

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

    def drain(self) -> None:
        """After SIGTERM, serve DRAIN_SECONDS more: /readyz answers 503 at once, so balancers
        stop sending; halfway, nginx reloads with keep-alive off, so clients that check no
        health move too, once balancers no longer use the idle connections this closes."""
        seconds, nginx = self.settings.drain_seconds, self.nginx
        if self.requested != signal.SIGTERM or not seconds or nginx is None or not nginx.running:
            return
        end = time.monotonic() + seconds
        (self.settings.run_dir / DRAIN_FLAG).touch()
        log("info", f"draining for {seconds:g} s: /readyz answers 503")
        if self._serve_until(end - seconds / 2):
            write_nginx_conf(self.settings, self.nginx_workers, keepalive=False)
            nginx.signal(signal.SIGHUP)  # new workers take it; the old finish what they hold
            log("info", "draining: keep-alive is off, every answer closes its connection")
            self._serve_until(end)

    def _serve_until(self, deadline: float) -> bool:
        """Pump until the monotonic deadline; False as soon as nginx or gunicorn has died."""
        return not self.wait_until(
            lambda: not all(child.running for child in self.vital()),
            deadline - time.monotonic(),
            stop_on_signal=False,
        )

    def stop_all(self) -> bool:
        nginx, gunicorn = self.nginx, self.gunicorn
        if nginx is not None and nginx.running and gunicorn is not None:
            nginx.signal(signal.SIGQUIT)
            # Once what nginx accepted has reached the app (the handover), gunicorn's TERM lets
            # the app end open WebSockets (1012) and streams while nginx still relays.
            handover = self.settings.handover
            self.wait_until(lambda: not nginx.running, handover, stop_on_signal=False)
            gunicorn.signal(signal.SIGTERM)
        nginx_ok = self.stop(nginx, signal.SIGQUIT, self.settings.nginx_drain + STOP_MARGIN)
        # Scrapes may come while nginx drains; a listener dead before (said then) spoils nothing.
        metrics = self.metrics if self.metrics is not None and self.metrics.running else None
        metrics_ok = self.stop(metrics, signal.SIGTERM, STOP_MARGIN)
        gunicorn_ok = self.stop(
            self.gunicorn, signal.SIGTERM, self.settings.graceful_timeout + STOP_MARGIN
        )
        # The children's last lines, still in their pipes, before the supervisor's own last.
        self.wait_until(lambda: len(self.selector.get_map()) == 1, 1.0, stop_on_signal=False)
        return all([nginx_ok, metrics_ok, gunicorn_ok])

    def vital(self) -> list[Child]:
        """nginx and gunicorn: their death stops the stack."""
        return [c for c in (self.nginx, self.gunicorn) if c is not None]

    def run(self) -> int:
        """Start gunicorn, then nginx; serve until a signal or a death; stop in order."""
        signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, lambda *_: None)  # the wakeup fd carries the number
        _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: adopt our children's orphans, as PID 1 would
        try:
            _check_port_free(self.settings)
            self.gunicorn = self.start_gunicorn()
            if self.requested is None:
                self.nginx = self.start_nginx()
            if self.requested is None:
                self.metrics = self.start_metrics()
            while self.requested is None and all(c.running for c in self.vital()):
                self.pump(1.0)
                self.tend_metrics()
            self.drain()
        except (ServeError, OSError) as exc:
            log("error", str(exc))
            self.stop_all()
            return 1
        dead = [c for c in self.vital() if not c.running]
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


def _as_written(lines: bytes) -> bytes:
    return lines + b"\n"


def _prctl(option: int, value: int) -> None:
    """Linux's prctl(2); elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _die_with_parent(parent: int) -> None:
    """In a new child, before exec: SIGTERM it when the supervisor dies (PR_SET_PDEATHSIG)."""
    _prctl(1, signal.SIGTERM)
    if os.getppid() != parent:  # the supervisor died before the signal was armed
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


def _group_alive(pgid: int) -> bool:
    """Whether any live (not zombie) process is left in a process group (/proc/<pid>/stat)."""
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # exited while we looked
            # After the ")" that ends the command name: state, ppid, pgrp, ...
            state, _, pgrp = stat_file.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[:3]
            if int(pgrp) == pgid and state != "Z":
                return True
    return False


def _answers(address: str | tuple[str, int], timeout: float, request: str = "") -> bool:
    """Whether something accepts a connection at address (TCP: nginx, the listener; a path:
    gunicorn's unix socket) within the timeout and, given a request, answers it in HTTP/1.1."""
    if isinstance(address, str):
        family = socket.AF_UNIX
    else:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    with socket.socket(family) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(address)
            if request:
                probe.sendall(request.encode("ascii"))
                return probe.recv(16).startswith(b"HTTP/1.1 ")
        except OSError:
            return False
        return True
