"""The stack against what a user would pick instead: the same app under each server, raw and
under attack, side by side in one run.

    ./scripts/bench PROJECT_DIR --peers [--short] [--servers ...] [--conditions ...]

Servers (each with the worker count the stack's gunicorn config decides on this machine):

- stack: `make serve`'s production stack, the project's own supervisor (`python -m <stack>`):
  nginx -> unix socket -> gunicorn + UvicornWorker, access log on as shipped, with the edge
  limits of EDGE_LIMITS;
- uvicorn: `uvicorn --workers N` (what `fastapi run` runs);
- granian: `granian --interface asgi --workers N` (installed on first use into the lab's own
  directory, the template's build/lab-peers/, never into the project's environment);
- gunicorn-uvicorn: gunicorn with the stack's gunicorn config and UvicornWorker, on TCP;
- gunicorn-asgi: the same with gunicorn's own `-k asgi` worker (gunicorn >= 24), skipped
  with the reason when the installed gunicorn has none;
- stack variants (VARIANTS): the stack with one default changed through its environment
  (NGINX_WORKER_PROCESSES, WEB_CONCURRENCY...) or through a copy of serving_stack/nginx.conf passed
  as NGINX_CONF, to measure a proposed default against the shipped one in the same rounds.

Conditions: the raw endpoints (GET /bench/small: small JSON, GET /items/{id}: path parameter
and pydantic validation, GET /bench/1mb: 1 MiB, lab/apps.py; not GET /livez, which nginx
limits per address as a probe: 10 r/s, so a row on it measured the limit, not the server),
the attacks of lab/attacks.py (flood, slow, oversized, and slow-headers alone), and held:
long-lived connections of lab/held.py (event streams of a token every TOKEN_INTERVAL_S, and
idle WebSockets) open all through the measurement, for which each server reports the memory
per connection (proportional set size of its processes, /proc/<pid>/smaps_rollup, held minus
before), the share of tokens on time and the normal clients' p99 beside the same server's
without them (held runs first in each round, each server fresh from its start in the first
and started afresh in later ones, and warmed up, so that none measures the memory an earlier
run left). During the attacks and held, the normal clients load GET /items/{id} (under the
flood for at least FLOOD_MIN_S). The normal clients are wrk, 64 keep-alive connections, each
from its own address (lab/source_address.c). Rounds are interleaved (the servers' order
rotates each round); each figure is the median of the rounds. For each run the CPU time of
every process of the server (supervisor, nginx, app, metrics listener) and of the clients is
read from /proc, per normal request: where the time goes.

DIR/peers.json (every run) and DIR/peers.md (the tables) leave through lab/results.publish
(lab/__main__.py). Runs in the project's Python; needs wrk, nginx and a C compiler, Linux.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import importlib.metadata
import importlib.util
import json
import math
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from harness import procfs
from harness import stack as stacks
from harness.ports import free_port
from harness.processes import Processes, wait_ready
from lab import attacks
from lab.nginx import nginx_binary
from lab.project import FACTORY_VARIABLE
from lab.runner import machine_facts
from lab.wrk import WrkResult, find_wrk, parse_wrk_output, wrk_command

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.processes import Process
    from lab.project import Project

Kind = Literal["stack", "uvicorn", "granian", "gunicorn-uvicorn", "gunicorn-asgi"]
APP = "lab.apps:shipped"  # the project's app with its middleware, plus /bench/1mb
GRANIAN_VERSION = "2.8.7"
# The stack's per-client rate limit during the whole run (its settings.py's variables; the
# rest of the edge limits, CONNECTIONS_PER_CLIENT included, as shipped): each normal client
# (one address) sends at most ~250 requests/s at full speed on 2 CPUs, above the shipped
# RATE_LIMIT of 100, so the run raises it to where normal clients never reach it; the
# flooding client (one address, hundreds of connections) does at once.
EDGE_LIMITS = (("RATE_LIMIT", "400"), ("RATE_LIMIT_BURST", "400"))
NORMAL_CONNECTIONS = attacks.NORMAL_COUNT
FLOOD_CONNECTIONS = 256
# Under the flood the normal clients run at least this long, the full run's window, in the
# short run too: a flooded uvloop server (uvicorn, gunicorn + UvicornWorker) accepts new
# connections between passes over the flood's, and the normal clients' 64 waited in its
# listen queue 1-2 s on a quiet 2-CPU machine, up to 5 s on a shared one; a 1 s window
# ended before any of their requests was answered.
FLOOD_MIN_S = 5
OVERSIZED_CONNECTIONS = 16
# The example item (api/items.py): its id is the base64url of its canonical JSON.
ITEM = b'{"name":"widget","price_cents":1234,"tags":["a","b"]}'
ITEM_ID = base64.urlsafe_b64encode(ITEM).rstrip(b"=").decode()
ITEM_PATH = f"/items/{ITEM_ID}"
RAW = {"small": "/bench/small", "items": ITEM_PATH, "1mb": "/bench/1mb"}
ATTACKS = ("flood", "slow", "oversized", "slow-headers")
HELD = ("held",)
CONDITIONS = (*RAW, *ATTACKS, *HELD)
# A token on each held stream every 100 ms: a chat model's pace, the rate a user reads at.
TOKEN_INTERVAL_S = 0.1
LABELS = {
    "small": "GET /bench/small",
    "items": "GET /items/{id}",
    "1mb": "GET 1 MiB",
    "flood": "one client flooding",
    "slow": "2,000 slow clients",
    "slow-headers": "2,000 slow-header clients",
    "oversized": "2 MiB bodies",
    "held": "streams and idle WebSockets held",
}


@dataclass(frozen=True)
class Server:
    id: str
    label: str
    kind: Kind
    env: tuple[tuple[str, str], ...] = ()  # the stack's variables for a variant
    # (pattern, replacement) applied once each to serving_stack/nginx.conf, passed as NGINX_CONF.
    nginx_edits: tuple[tuple[str, str], ...] = ()

    @property
    def direct(self) -> bool:
        return self.kind != "stack"


PEERS = (
    Server("stack", "this stack: nginx -> unix socket -> gunicorn (`make serve`)", "stack"),
    Server("uvicorn", "`uvicorn --workers N` (what `fastapi run` does)", "uvicorn"),
    Server("granian", f"granian {GRANIAN_VERSION} `--interface asgi --workers N`", "granian"),
    Server("gunicorn-uvicorn", "gunicorn + UvicornWorker, direct on TCP", "gunicorn-uvicorn"),
    Server("gunicorn-asgi", "gunicorn `-k asgi`, direct on TCP", "gunicorn-asgi"),
)
# Access lines written 4 KiB at a time, at least every second: at most PIPE_BUF, so the lines
# of two nginx workers never interleave in the supervisor's pipe. Shipped since: the stack's
# nginx.conf writes its access_log so, and the variants below keep that line as it is.
SHIPPED_LOG = "access_log /dev/stdout json buffer=4k flush=1s "
LOG_BUFFER = (SHIPPED_LOG, SHIPPED_LOG)
VARIANTS = {
    server.id: server
    for server in (
        Server(
            "stack-nginx-1",
            "stack, NGINX_WORKER_PROCESSES=1",
            "stack",
            env=(("NGINX_WORKER_PROCESSES", "1"),),
        ),
        Server(
            "stack-nginx-2",
            "stack, NGINX_WORKER_PROCESSES=2",
            "stack",
            env=(("NGINX_WORKER_PROCESSES", "2"),),
        ),
        Server("stack-web-3", "stack, WEB_CONCURRENCY=3", "stack", env=(("WEB_CONCURRENCY", "3"),)),
        Server(
            "stack-nginx-1-web-3",
            "stack, NGINX_WORKER_PROCESSES=1 WEB_CONCURRENCY=3",
            "stack",
            env=(("NGINX_WORKER_PROCESSES", "1"), ("WEB_CONCURRENCY", "3")),
        ),
        Server(
            "stack-no-access-log",
            "stack, NGINX_ACCESS_LOG=off",
            "stack",
            env=(("NGINX_ACCESS_LOG", "off"),),
        ),
        Server(
            "stack-no-limits",
            "stack, edge limits off",
            "stack",
            env=(("RATE_LIMIT", "0"), ("CONNECTIONS_PER_CLIENT", "0")),
        ),
        Server(
            "stack-keepalive-16",
            "stack, upstream keepalive 16",
            "stack",
            nginx_edits=((r"keepalive @UPSTREAM_IDLE@;", "keepalive 16;"),),
        ),
        Server(
            "stack-keepalive-256",
            "stack, upstream keepalive 256",
            "stack",
            nginx_edits=((r"keepalive @UPSTREAM_IDLE@;", "keepalive 256;"),),
        ),
        Server(
            "stack-buffers-4k",
            "stack, proxy_buffers 8 4k (nginx's default)",
            "stack",
            nginx_edits=(
                (r"proxy_buffers 64 16k;", "proxy_buffers 8 4k;"),
                (r"proxy_buffer_size 16k;", "proxy_buffer_size 4k;"),
                (r"proxy_busy_buffers_size 64k;", "proxy_busy_buffers_size 8k;"),
            ),
        ),
        Server(
            "stack-refusals-unlogged",
            "stack, limit refusals not logged",
            "stack",
            nginx_edits=(
                (r"limit_req_log_level warn;", "limit_req_log_level info;"),
                (r"limit_conn_log_level warn;", "limit_conn_log_level info;"),
            ),
        ),
        Server(
            "stack-log-buffer",
            "stack, access_log buffer=4k flush=1s",
            "stack",
            nginx_edits=(LOG_BUFFER,),
        ),
        Server(
            "stack-log-buffer-unlogged",
            "stack, access_log buffer=4k flush=1s, limit refusals not logged",
            "stack",
            nginx_edits=(
                LOG_BUFFER,
                (r"limit_req_log_level warn;", "limit_req_log_level info;"),
                (r"limit_conn_log_level warn;", "limit_conn_log_level info;"),
            ),
        ),
        Server(
            "stack-proposed",
            "stack, proposed: 1 nginx worker, 3 app workers, log buffer, refusals unlogged",
            "stack",
            env=(("NGINX_WORKER_PROCESSES", "1"), ("WEB_CONCURRENCY", "3")),
            nginx_edits=(
                LOG_BUFFER,
                (r"limit_req_log_level warn;", "limit_req_log_level info;"),
                (r"limit_conn_log_level warn;", "limit_conn_log_level info;"),
            ),
        ),
        Server(
            "stack-refuse-at-once",
            "stack, RATE_LIMIT_QUEUE_SECONDS=0 (no client waits)",
            "stack",
            env=(("RATE_LIMIT_QUEUE_SECONDS", "0"),),
        ),
        Server(
            "stack-lingering-off",
            "stack, lingering_close off",
            "stack",
            nginx_edits=(
                (
                    r"reset_timedout_connection on;",
                    "reset_timedout_connection on; lingering_close off;",
                ),
            ),
        ),
        Server(
            "stack-oversized-unqueued",
            "stack, 413s not queued (as before this change)",
            "stack",
            nginx_edits=((r"413 /\.too-large;", "413 /.nginx-error;"),),
        ),
        Server(
            "stack-header-timeout-60",
            "stack, client_header_timeout 60s",
            "stack",
            nginx_edits=((r"client_header_timeout 10s;", "client_header_timeout 60s;"),),
        ),
    )
}


@dataclass(frozen=True)
class Settings:
    rounds: int
    duration_s: int  # each measured run of the normal clients
    warmup_s: int  # before each raw run; 0: none
    slow_clients: int
    # The slow clients open their first connections spread over this many seconds, so that
    # in a full run, longer than nginx's client_header_timeout (10 s), nginx's timeouts and
    # the clients' reconnections go on all through the measurement, as they would with
    # clients arriving at their own times (all at once, they would come in waves).
    slow_spread_s: float
    # held: event streams and idle WebSockets open while the normal clients run for held_s
    # (tens of seconds in a full run: tokens late now and then show only over that long).
    held_streams: int
    held_websockets: int
    held_s: int
    # The attacker runs this long before the normal clients start (after its connections
    # opened, for the slow clients and held), for the server to settle under it.
    ramp_s: float


FULL = Settings(
    rounds=3,
    duration_s=5,
    warmup_s=1,
    slow_clients=2000,
    slow_spread_s=11.0,
    held_streams=300,
    held_websockets=1000,
    held_s=20,
    ramp_s=1.0,
)
SHORT = Settings(
    rounds=1,
    duration_s=1,
    warmup_s=0,
    slow_clients=200,
    slow_spread_s=0.5,
    held_streams=20,
    held_websockets=50,
    held_s=1,
    ramp_s=0.5,
)


class PeersError(RuntimeError):
    """A server or a tool the experiment needs is missing; one line says which and why."""


def granian_dir(template: Path, python_version: str) -> Path:
    """Where scripts/bench installs granian for this Python (pip install --target)."""
    return template / "build" / "lab-peers" / f"granian-{GRANIAN_VERSION}-py{python_version}"


def ensure_granian(template: Path) -> Path:
    """granian for this Python in the lab's own directory, installed there on first use
    (pip install --target: the project's environment is never touched); its directory."""
    target = granian_dir(template, f"{sys.version_info.major}.{sys.version_info.minor}")
    if (target / "granian").is_dir():
        return target
    requirement = f"granian=={GRANIAN_VERSION}"
    print(f"installing {requirement} into {target} (the lab's own, once)", flush=True)
    uv = shutil.which("uv")
    command = (
        [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target), requirement]
        if importlib.util.find_spec("pip") is not None
        else [
            uv or "uv",
            "pip",
            "install",
            "--quiet",
            "--python",
            sys.executable,
            "--target",
            str(target),
            requirement,
        ]
    )
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise PeersError(f"could not install {requirement}: {done.stderr.strip()[-500:]}")
    return target


def gunicorn_has_asgi_worker() -> str | None:
    """None when gunicorn ships its asgi worker (gunicorn >= 24), else why it is skipped."""
    if importlib.util.find_spec("gunicorn") is None:
        return "gunicorn is not installed"
    if importlib.util.find_spec("gunicorn.workers.gasgi") is None:
        version = importlib.metadata.version("gunicorn")
        return f"gunicorn {version} has no asgi worker (it came with gunicorn 24)"
    return None


# --- CPU time and memory of a server's processes, from /proc ---


def tree_cpu(root: int, *, stack: bool) -> dict[str, float]:
    """CPU seconds of root and its descendants, by role: supervisor, nginx, metrics, app."""
    totals = {"supervisor": 0.0, "nginx": 0.0, "metrics": 0.0, "app": 0.0}
    for proc in procfs.tree(root):
        if not stack:
            role = "app"
        elif proc.pid == root:
            role = "supervisor"
        elif proc.comm == "nginx":
            role = "nginx"
        elif "metrics_listener" in procfs.cmdline(proc.pid):
            role = "metrics"
        else:
            role = "app"
        totals[role] += proc.cpu_seconds
    return totals


def tree_rss_mib(root: int) -> float:
    """Resident memory of root and its descendants, MiB (shared pages counted in each)."""
    kib = 0
    for proc in procfs.tree(root):
        # Gone since the tree was read, or a zombie (which has no VmRSS): it holds no memory.
        with contextlib.suppress(OSError, KeyError):
            kib += int(procfs.status(proc.pid)["VmRSS"].split()[0])
    return kib / 1024


def tree_pss_kib(root: int) -> int:
    """Proportional set size of root and its descendants, KiB (/proc/<pid>/smaps_rollup):
    pages shared between processes (the workers' code, forked from one master) counted once
    in all, so the sum is what the server costs the machine."""
    return procfs.pss_kib(proc.pid for proc in procfs.tree(root) if proc.alive)


# --- starting the servers ---


@dataclass
class Running:
    server: Server
    process: Process
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class PeerLauncher:
    def __init__(
        self,
        project: Project,
        workdir: Path,
        workers: int,
        granian: Path | None,
        *,
        websockets: bool = False,
    ) -> None:
        self.project = project
        self.workdir = workdir
        self.workers = workers
        self.granian = granian
        # granian serves WebSockets only when asked (the held condition); the raw figures
        # were measured without (--no-ws), every other server has them on regardless.
        self.websockets = websockets
        self.processes = Processes()
        # What every server gets over this process's environment: the template's root (the
        # servers import lab.apps) and the project's packages, its factory when it has one.
        paths = [
            str(Path(__file__).resolve().parent.parent),
            str(project.root / "src"),
            str(project.root / "stack"),
            os.environ.get("PYTHONPATH", ""),
        ]
        self.env = {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}
        if project.factory is not None:
            self.env[FACTORY_VARIABLE] = project.factory
        self.count = 0

    def start(self, server: Server) -> Running:
        self.count += 1
        run_dir = self.workdir / f"{self.count}-{server.id}"
        run_dir.mkdir()
        if server.kind == "stack":
            return self._start_stack(server, run_dir)
        port = free_port()
        python = sys.executable
        env = {**os.environ, **self.env}
        if server.kind == "uvicorn":
            argv = [
                python,
                "-m",
                "uvicorn",
                APP,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(self.workers),
                "--no-access-log",
            ]
        elif server.kind == "granian":
            if self.granian is None:
                raise PeersError("granian is not installed for the lab (scripts/bench does it)")
            env["PYTHONPATH"] = f"{self.granian}{os.pathsep}{env['PYTHONPATH']}"
            argv = [
                python,
                "-m",
                "granian",
                "--interface",
                "asgi",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(self.workers),
                "--loop",
                "uvloop",
                "--runtime-mode",
                "st",
                *([] if self.websockets else ["--no-ws"]),
                APP,
            ]
        else:
            env.update(APP_MODULE=APP, RUN_DIR=str(run_dir), WEB_CONCURRENCY=str(self.workers))
            argv = [
                python,
                "-m",
                "gunicorn",
                "--config",
                str(self.project.gunicorn_conf),
                "--bind",
                f"127.0.0.1:{port}",
            ]
            if server.kind == "gunicorn-asgi":
                argv += ["--worker-class", "asgi"]
        process = self.processes.start(server.id, argv, env, self.project.root)
        wait_ready(process, ("127.0.0.1", port), "/livez")
        return Running(server, process, port)

    def _start_stack(self, server: Server, run_dir: Path) -> Running:
        """The stack through its command line, as the harness starts it (harness/stack.py)."""
        env = {**self.env, "APP_MODULE": APP, **dict(EDGE_LIMITS)}
        if os.geteuid() == 0:
            # The lab runs as root in CI containers: serve as root rather than as a user the
            # machine may not have (the supervisor says so in a warning).
            env["SERVE_AS_ROOT"] = "on"
        env.update(server.env)
        if server.nginx_edits:
            env["NGINX_CONF"] = str(self._edited_nginx_conf(server, run_dir))
        # log=False: a stack under load for minutes would write gigabytes of access lines.
        stack = stacks.start(
            self.processes, run_dir, env, python=sys.executable, cwd=self.project.root, log=False
        )
        stack.wait_ready("/livez", 60)
        return Running(server, stack.supervisor, stack.port)

    def restart(self, running: Running) -> Running:
        """The server stopped and started afresh, on a new port."""
        self.processes.stop(running.process)
        return self.start(running.server)

    def _edited_nginx_conf(self, server: Server, run_dir: Path) -> Path:
        text = self.project.nginx_conf.read_text(encoding="utf-8")
        for pattern, replacement in server.nginx_edits:
            text, count = re.subn(pattern, replacement, text)
            if count != 1:
                raise PeersError(
                    f"{server.id}: the stack's nginx.conf has {count} matches of /{pattern}/, not 1"
                )
        edited = run_dir / "nginx.conf"
        edited.write_text(text, encoding="utf-8")
        return edited


# --- one measured run ---


@dataclass
class Run:
    server: str
    condition: str
    round: int
    normal: dict[str, float | int]  # the normal clients' wrk result
    cpu_s: dict[str, float]  # the server's processes by role, the clients, the attacker
    attacker: dict[str, Any] = field(default_factory=dict)
    rss_mib: float = 0.0  # the server's processes' resident memory at the end of the run

    @property
    def goodput(self) -> float:
        ok = int(self.normal["requests"]) - int(self.normal["non_2xx"])
        return ok / float(self.normal["duration_s"])


class Measure:
    def __init__(self, wrk: str, shim: Path, settings: Settings) -> None:
        self.wrk = wrk
        self.shim = shim
        self.settings = settings
        self.normal_env = dict(
            os.environ, **attacks.source_env(shim, attacks.NORMAL_FIRST, NORMAL_CONNECTIONS)
        )

    def _wrk(self, url: str, seconds: float, env: dict[str, str]) -> WrkResult:
        command = wrk_command(self.wrk, url, duration_s=seconds, connections=NORMAL_CONNECTIONS)
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, check=False, timeout=seconds + 30
        )
        if done.returncode != 0:
            raise PeersError(f"wrk exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return parse_wrk_output(done.stdout)

    def window(self, condition: str) -> int:
        """How long the normal clients run, measured, in a run of condition (seconds)."""
        if condition in HELD:
            return self.settings.held_s
        if condition == "flood":
            return max(self.settings.duration_s, FLOOD_MIN_S)
        return self.settings.duration_s

    def run(self, running: Running, condition: str, round_index: int) -> Run:
        settings = self.settings
        path = RAW.get(condition, ITEM_PATH)
        url = running.url + path
        if condition in (*RAW, *HELD) and settings.warmup_s:  # held: a server just started
            self._wrk(url, settings.warmup_s, self.normal_env)
        root = running.process.popen.pid
        # held: the server's memory before its long-lived connections open, and once they are.
        memory = {"pss_before_kib": tree_pss_kib(root)} if condition in HELD else {}
        attacker = self._start_attacker(running, condition)
        try:
            if condition in HELD and attacker is not None:
                memory["pss_held_kib"] = tree_pss_kib(root)
                attacker.send_signal(signal.SIGUSR1)  # its tokens count from here
            stack = not running.server.direct
            before = tree_cpu(root, stack=stack)
            attacker_before = procfs.cpu_seconds([attacker.pid]) if attacker else 0.0
            clients_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            result = self._wrk(url, self.window(condition), self.normal_env)
            clients_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            after = tree_cpu(root, stack=stack)
            attacker_s = (procfs.cpu_seconds([attacker.pid]) - attacker_before) if attacker else 0.0
            rss = tree_rss_mib(root)
        finally:
            report = self._stop_attacker(attacker)
        cpu = {role: after[role] - before[role] for role in after}
        cpu["clients"] = (clients_after.ru_utime - clients_before.ru_utime) + (
            clients_after.ru_stime - clients_before.ru_stime
        )
        cpu["attacker"] = attacker_s
        report.update(memory)
        return Run(running.server.id, condition, round_index, result.as_dict(), cpu, report, rss)

    def _start_attacker(self, running: Running, condition: str) -> subprocess.Popen[str] | None:
        if condition in RAW:
            return None
        # Every attacker is stopped once the normal clients are done (_stop_attacker): this
        # is only its bound, a second after them in whole seconds (wrk's).
        seconds = math.ceil(self.settings.ramp_s + self.window(condition)) + 1
        if condition in HELD:
            options = {
                "--port": running.port,
                "--streams": self.settings.held_streams,
                "--websockets": self.settings.held_websockets,
                "--interval": TOKEN_INTERVAL_S,
                "--seconds": seconds + 60,
            }
            command = [sys.executable, "-m", "lab.held"]
            command += [str(part) for option in options.items() for part in option]
            # Connections a server refused are its figure (open at the end), not a failed run.
            return self._start_client(command, ready=("ready", "not ready"))
        if condition in {"flood", "oversized"}:
            env = dict(os.environ, **attacks.source_env(self.shim, attacks.ATTACKER, 1))
            connections = FLOOD_CONNECTIONS if condition == "flood" else OVERSIZED_CONNECTIONS
            url = running.url + (ITEM_PATH if condition == "flood" else "/items")
            command = wrk_command(self.wrk, url, duration_s=seconds, connections=connections)
            if condition == "oversized":
                script = self.shim.with_name("oversized.lua")
                script.write_text(attacks.OVERSIZED_SCRIPT, encoding="utf-8")
                command.insert(-1, f"--script={script}")
            process = subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            time.sleep(self.settings.ramp_s)
            return process
        kind = "mix" if condition == "slow" else "headers"
        command = [
            sys.executable,
            "-m",
            "lab.attacks",
            "slow",
            "--port",
            str(running.port),
            "--clients",
            str(self.settings.slow_clients),
            "--kind",
            kind,
            "--seconds",
            str(self.settings.slow_spread_s + seconds + 60),
            "--spread",
            str(self.settings.slow_spread_s),
            "--body-path",
            "/items",
        ]
        return self._start_client(command, ready=("ready",))

    def _start_client(self, command: list[str], *, ready: tuple[str, ...]) -> subprocess.Popen[str]:
        """A lab client (lab.attacks, lab.held) started, its connections open (its first line
        starts with one of ``ready``), then the ramp for the server to settle."""
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)),
        )
        assert process.stdout is not None  # noqa: S101 - stdout=PIPE above
        line = process.stdout.readline().strip()
        if not line.startswith(ready):
            process.kill()
            rest = process.communicate()[0]
            raise PeersError(f"{command[2]} did not connect: {line} {rest[-500:]}")
        time.sleep(self.settings.ramp_s)
        return process

    @staticmethod
    def _stop_attacker(process: subprocess.Popen[str] | None) -> dict[str, Any]:
        if process is None:
            return {}
        argv = process.args if isinstance(process.args, list) else []
        if not argv or argv[0] != sys.executable:
            # wrk stops on SIGINT and reports what it did until then, its own duration too.
            process.send_signal(signal.SIGINT)
            output = process.communicate(timeout=60)[0]
            try:
                result = parse_wrk_output(output)
            except Exception:  # noqa: BLE001 - the attacker's own report is informative only
                return {"output": output[-300:]}
            return {
                "requests": result.requests,
                "non_2xx": result.non_2xx,
                "socket_errors": result.socket_errors,
                "duration_s": result.duration_s,
            }
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=60)[0]
        last = output.strip().splitlines()[-1] if output.strip() else "{}"
        try:
            counts: dict[str, Any] = json.loads(last)
        except ValueError:
            return {"output": output[-300:]}
        return counts


# --- the whole experiment ---


def run_peers(  # noqa: PLR0913 - keyword-only, one call site
    project: Project,
    *,
    servers: Sequence[Server],
    conditions: Sequence[str],
    settings: Settings,
    workers: int,
    granian: Path | None,
    command: str,
    stream: Any = sys.stderr,
) -> dict[str, Any]:
    wrk = find_wrk()
    nginx_binary()
    attacks.raise_open_files_limit()
    started = _now()
    load_start = os.getloadavg()[0]
    runs: list[Run] = []
    skipped: dict[str, str] = {}
    reason = gunicorn_has_asgi_worker()
    if reason is not None:
        skipped["gunicorn-asgi"] = reason
        servers = [s for s in servers if s.kind != "gunicorn-asgi"]
    if granian is None and any(s.kind == "granian" for s in servers):
        skipped["granian"] = "not installed for the lab"
        servers = [s for s in servers if s.kind != "granian"]
    total = settings.rounds * len(conditions) * len(servers)
    clock = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="peers-") as workdir:
        Path(workdir).chmod(0o755)
        held = any(condition in HELD for condition in conditions)
        launcher = PeerLauncher(project, Path(workdir), workers, granian, websockets=held)
        measure = Measure(wrk, attacks.build_shim(Path(workdir)), settings)
        # held first in each round: in the first, every server is still as it started, so
        # only the later rounds' held runs need it started afresh.
        order = sorted(conditions, key=lambda condition: condition not in HELD)
        try:
            running = [launcher.start(server) for server in servers]
            for round_index in range(settings.rounds):
                for condition in order:
                    shift = round_index % len(running)
                    for index in [*range(shift, len(running)), *range(shift)]:
                        if condition in HELD and round_index:
                            # A fresh server: the memory the round before left allocated
                            # (freed, kept by the allocator) would hide this run's.
                            running[index] = launcher.restart(running[index])
                        run = measure.run(running[index], condition, round_index)
                        runs.append(run)
                        _progress(stream, len(runs), total, clock, run)
        finally:
            launcher.processes.stop_all()
    return {
        "schema": 1,
        "command": command,
        "started": started,
        "finished": _now(),
        "load": {"start": load_start, "end": os.getloadavg()[0]},
        "machine": _machine(),
        "settings": {
            **asdict(settings),
            "workers": workers,
            "edge_limits": dict(EDGE_LIMITS),
            "normal_connections": NORMAL_CONNECTIONS,
            "flood_connections": FLOOD_CONNECTIONS,
            "flood_min_s": FLOOD_MIN_S,
            "oversized_connections": OVERSIZED_CONNECTIONS,
            "token_interval_s": TOKEN_INTERVAL_S,
        },
        "servers": [asdict(s) for s in servers],
        "skipped": skipped,
        "conditions": list(conditions),
        "runs": [asdict(r) for r in runs],
    }


def _progress(stream: Any, done: int, total: int, began: float, run: Run) -> None:
    elapsed = time.monotonic() - began
    left = elapsed / done * (total - done)
    errors = int(run.normal["non_2xx"]) + int(run.normal["socket_errors"])
    print(
        f"[{done:>3}/{total} {elapsed:4.0f} s, ~{left:.0f} s left] {run.condition:<12} "
        f"{run.server:<22} {run.goodput:>8,.0f} ok/s  p99 {run.normal['p99_ms']:.1f} ms"
        + (f"  {errors} errors" if errors else ""),
        file=stream,
        flush=True,
    )


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _machine() -> dict[str, Any]:
    facts = machine_facts(
        ("fastapi", "uvicorn", "gunicorn", "uvicorn-worker", "uvloop", "httptools")
    )
    versions = cast("dict[str, str]", facts["versions"])
    return {
        **facts,
        "cpu_model": _cpu_model(),
        "versions": {**versions, "granian": GRANIAN_VERSION},
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown"


# --- the report ---


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclass(frozen=True)
class Cell:
    goodput: float
    low: float
    high: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_us: dict[str, float]  # per normal request, medians over rounds
    rss_mib: float  # the server's memory at the end of the runs, median
    requests: int  # the normal clients' answers, all rounds

    @property
    def p99(self) -> str:
        """The normal clients' p99, or "-" when no request was answered at all."""
        return f"{self.p99_ms:.1f}" if self.requests else "-"


def cells(results: dict[str, Any]) -> dict[tuple[str, str], Cell]:
    grouped: dict[tuple[str, str], list[Run]] = {}
    for raw in results["runs"]:
        run = Run(**raw)
        grouped.setdefault((run.server, run.condition), []).append(run)
    table = {}
    for key, runs in grouped.items():
        rates = [r.goodput for r in runs]
        roles = runs[0].cpu_s.keys()
        per_request = {
            role: _median([r.cpu_s[role] / max(1, int(r.normal["requests"])) * 1e6 for r in runs])
            for role in roles
        }
        table[key] = Cell(
            goodput=_median(rates),
            low=min(rates),
            high=max(rates),
            p50_ms=_median([float(r.normal["p50_ms"]) for r in runs]),
            p99_ms=_median([float(r.normal["p99_ms"]) for r in runs]),
            errors=sum(int(r.normal["non_2xx"]) + int(r.normal["socket_errors"]) for r in runs),
            cpu_us=per_request,
            rss_mib=_median([r.rss_mib for r in runs]),
            requests=sum(int(r.normal["requests"]) for r in runs),
        )
    return table


def _fastest_direct(
    results: dict[str, Any], table: dict[tuple[str, str], Cell], condition: str
) -> float:
    """The yardstick of the raw table: the fastest direct server's figure; in a run of stack
    variants only, the first server's (the shipped stack, listed first)."""
    direct = [s["id"] for s in results["servers"] if s["kind"] != "stack"]
    rates = [table[(s, condition)].goodput for s in direct if (s, condition) in table]
    if rates:
        return max(rates)
    first = (results["servers"][0]["id"], condition) if results["servers"] else None
    return table[first].goodput if first in table else 0.0


def _window(settings: dict[str, Any], conditions: Sequence[str]) -> str:
    """The normal clients' seconds per run, the flood's longer window named when it was."""
    seconds = settings["duration_s"]
    flood_s = max(seconds, settings.get("flood_min_s", 0))
    if "flood" in conditions and flood_s != seconds:
        return f"{seconds} s ({flood_s} s under the flood)"
    return f"{seconds} s"


def markdown(results: dict[str, Any]) -> str:  # noqa: PLR0912 - one table after another
    table = cells(results)
    servers = [(s["id"], s["label"]) for s in results["servers"]]
    conditions = results["conditions"]
    raw = [c for c in conditions if c in RAW]
    attacked = [c for c in conditions if c in ATTACKS]
    machine = results["machine"]
    settings = results["settings"]
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    out = [
        "# The stack against the servers users pick instead",
        "",
        (
            f"`{results['command']}`, {results['started']} to {results['finished']}; "
            f"{machine['cpus']} CPUs ({machine['cpu_model']}), {machine['platform']}; {versions}."
        ),
        (
            f"{settings['workers']} workers each; {settings['rounds']} interleaved rounds of "
            f"{_window(settings, conditions)} per figure (medians); normal clients: wrk, "
            f"{settings['normal_connections']} keep-alive connections from as many addresses. "
            "x fastest: the figure as a multiple of the fastest direct server's in the same run "
            "(in a run of stack variants only, of the first one's)."
        ),
        (
            "The machine's load average (1 min) was "
            f"{results.get('load', {}).get('start', 0):.1f} at the start and "
            f"{results.get('load', {}).get('end', 0):.1f} at the end: above about 0.5 per CPU "
            "beyond this run's own processes, the machine was shared and the figures are noisy."
        ),
        "",
    ]
    for server_id, reason in results["skipped"].items():
        out += [f"Skipped {server_id}: {reason}.", ""]
    if raw:
        out += ["## Raw: requests/s, latency, errors", ""]
        header = "| server |" + "".join(
            f" {LABELS[c]} req/s | x fastest | p50 / p99 ms | errors |" for c in raw
        )
        out += [header, "|---|" + "---:|---:|---:|---:|" * len(raw)]
        for server_id, label in servers:
            row = f"| {label} |"
            for condition in raw:
                cell = table.get((server_id, condition))
                if cell is None:
                    row += " | | | |"
                    continue
                best = _fastest_direct(results, table, condition)
                share = f"{cell.goodput / best:.2f} x" if best else ""
                row += (
                    f" {cell.goodput:,.0f} | {share} | {cell.p50_ms:.1f} / {cell.p99} "
                    f"| {cell.errors} |"
                )
            out.append(row)
        out.append("")
    if attacked:
        out += [
            "## Under attack: the normal clients' goodput (2xx/s) on GET /items/{id}",
            "",
            (
                "x alone: the goodput as a multiple of the same server's without attack (GET "
                "/items/{id} above), in the same run. p99 is the normal clients' latency; "
                "errors, their non-2xx answers and socket errors (timeouts after 10 s)."
            ),
            "",
        ]
        header = "| server | alone ok/s (p99 ms) |" + "".join(
            f" {LABELS[c]}: ok/s | x alone | p99 ms | errors |" for c in attacked
        )
        out += [header, "|---|---:|" + "---:|---:|---:|---:|" * len(attacked)]
        for server_id, label in servers:
            alone = table.get((server_id, "items"))
            row = f"| {label} | " + (f"{alone.goodput:,.0f} ({alone.p99}) |" if alone else " |")
            for condition in attacked:
                cell = table.get((server_id, condition))
                if cell is None:
                    row += " | | | |"
                    continue
                share = f"{cell.goodput / alone.goodput:.2f} x" if alone and alone.goodput else ""
                row += f" {cell.goodput:,.0f} | {share} | {cell.p99} | {cell.errors:,} |"
            out.append(row)
        if {"flood", "oversized"} & set(attacked):
            out += ["", *_attacker_table(results, attacked, servers)]
        out.append("")
    out += [*_held_table(results, table, servers), ""] if set(HELD) & set(conditions) else []
    out += [
        "## CPU time per normal request (microseconds, from /proc)",
        "",
        (
            "Each process of the server by role, the normal clients (wrk) and the attacker, "
            "divided by the normal requests served in the run; and the resident memory of the "
            "server's processes at the end of the run."
        ),
        "",
        (
            "| condition | server | supervisor | nginx | app | metrics | clients | attacker "
            "| total | server memory MiB |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for condition in conditions:
        for server_id, _ in servers:
            cell = table.get((server_id, condition))
            if cell is None:
                continue
            cpu = cell.cpu_us
            roles = ("supervisor", "nginx", "app", "metrics", "clients", "attacker")
            values = " | ".join(f"{cpu.get(r, 0.0):,.0f}" if cell.requests else "-" for r in roles)
            total = f"{sum(cpu.values()):,.0f}" if cell.requests else "-"
            out.append(
                f"| {LABELS[condition]} | {server_id} | {values} | {total} | {cell.rss_mib:,.0f} |"
            )
    return "\n".join(out) + "\n"


def _attacker_table(
    results: dict[str, Any], attacked: Sequence[str], servers: Sequence[tuple[str, str]]
) -> list[str]:
    """What each attacker got: its requests/s and the share the server refused (non-2xx),
    and the server's CPU time per request of either kind, attacker or normal (medians)."""
    rows = [
        (
            "What the attackers got (wrk's): requests/s answered, the share refused (non-2xx), "
            "and the server's CPU time per request answered, the attacker's and the normal "
            "clients' together (microseconds)."
        ),
        "",
        "| server |"
        + "".join(
            f" {LABELS[c]}: req/s | refused | server us/req |"
            for c in attacked
            if c in {"flood", "oversized"}
        ),
        "|---|" + "---:|---:|---:|" * len([c for c in attacked if c in {"flood", "oversized"}]),
    ]
    for server_id, label in servers:
        row = f"| {label} |"
        for condition in attacked:
            if condition not in {"flood", "oversized"}:
                continue
            runs = [
                r
                for r in results["runs"]
                if r["server"] == server_id and r["condition"] == condition
            ]
            rates, refused, per_request = [], [], []
            for run in runs:
                attacker, normal, cpu = run["attacker"], run["normal"], run["cpu_s"]
                if not attacker.get("requests"):
                    continue
                # The attacker's wrk ran longer than the normal clients, by the ramp at least.
                seconds = float(attacker["duration_s"])
                rates.append(attacker["requests"] / seconds)
                refused.append(attacker["non_2xx"] / attacker["requests"])
                server_s = sum(cpu[role] for role in ("supervisor", "nginx", "app", "metrics"))
                answered = attacker["requests"] * float(normal["duration_s"]) / seconds
                per_request.append(server_s / (answered + int(normal["requests"])) * 1e6)
            if not rates:
                row += " | | |"
                continue
            row += (
                f" {_median(rates):,.0f} | {_median(refused):.0%} | {_median(per_request):,.0f} |"
            )
        rows.append(row)
    return rows


def held_figures(run: dict[str, Any]) -> dict[str, float]:
    """One held run's figures: the memory each open connection added to the server (KiB),
    the share of tokens on time and of those expected that came at all, the connections
    open at the end."""
    held = run["attacker"]
    if "streams_open" not in held:  # the client printed no summary
        return {}
    open_at_end = held["streams_open"] + held["websockets_open"]
    added = held.get("pss_held_kib", 0) - held.get("pss_before_kib", 0)
    counted = held["on_time"] + held["late"]
    return {
        "kib_per_connection": added / open_at_end if open_at_end else 0.0,
        "on_time": held["on_time"] / counted if counted else 0.0,
        "delivered": held["tokens"] / held["tokens_expected"] if held["tokens_expected"] else 0.0,
        "streams_open": held["streams_open"],
        "websockets_open": held["websockets_open"],
        "gap_p99_ms": held["gap_p99_ms"],
    }


@dataclass(frozen=True)
class HeldMemoryBudget:
    baseline: str  # the server whose memory per held connection the stack's is held to
    max_ratio: float
    why: str


def load_held_budget(path: Path) -> HeldMemoryBudget:
    data = tomllib.loads(path.read_text(encoding="utf-8"))["held_memory"]
    return HeldMemoryBudget(str(data["baseline"]), float(data["max_ratio"]), str(data["why"]))


def check_held_memory(results: dict[str, Any], budget: HeldMemoryBudget) -> tuple[bool, str] | None:
    """Whether the stack's memory per held connection keeps within the budget, and one line
    saying so; None unless the stack and the baseline both ran the held condition."""
    kib: dict[str, float] = {}
    for server in ("stack", budget.baseline):
        runs = [
            run for run in results["runs"] if (run["server"], run["condition"]) == (server, "held")
        ]
        figures = [each for each in map(held_figures, runs) if each]
        if not figures:
            return None
        kib[server] = _median([each["kib_per_connection"] for each in figures])
    found = kib["stack"] / kib[budget.baseline] if kib[budget.baseline] > 0 else math.inf
    line = (
        f"held connections: the stack {kib['stack']:,.0f} KiB each, {budget.baseline} "
        f"{kib[budget.baseline]:,.0f} KiB: {found:.2f} x, budget at most {budget.max_ratio:.2f} x"
    )
    return found <= budget.max_ratio, line


def _held_table(
    results: dict[str, Any], table: dict[tuple[str, str], Cell], servers: Sequence[tuple[str, str]]
) -> list[str]:
    """The held condition's table: the normal clients beside the long-lived connections, and
    what those connections cost and got (medians over rounds)."""
    settings = results["settings"]
    period_ms = settings.get("token_interval_s", TOKEN_INTERVAL_S) * 1000
    streams, websockets = settings["held_streams"], settings["held_websockets"]
    rows = [
        "## Held: event streams and idle WebSockets beside the normal clients",
        "",
        (
            f"{streams:,} event streams (a token every {period_ms:.0f} ms) and {websockets:,} "
            f"idle WebSockets (lab/held.py, {streams + websockets:,} connections from their own "
            f"addresses) open while the normal clients load GET /items/{{id}} for "
            f"{settings['held_s']} s. alone: the same server's figure without them (GET "
            "/items/{id} above). memory: the server's proportional set size (its processes' "
            "smaps_rollup) with the connections open minus before they opened, per connection "
            "open. on time: the share of tokens that came at most two periods after the one "
            "before on their stream (a stream silent longer at the end counts one late); "
            "delivered: tokens received of those expected in the window."
        ),
        "",
        (
            "| server | alone ok/s (p99 ms) | held: ok/s | x alone | p99 ms | errors "
            "| streams open | WebSockets open | memory KiB/connection | tokens on time "
            "| delivered | token gap p99 ms |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for server_id, label in servers:
        cell = table.get((server_id, "held"))
        if cell is None:
            continue
        alone = table.get((server_id, "items"))
        figures = [
            held_figures(run)
            for run in results["runs"]
            if run["server"] == server_id and run["condition"] == "held"
        ]
        figures = [each for each in figures if each]

        def median(key: str, figures: list[dict[str, float]] = figures) -> float:
            return _median([each[key] for each in figures])

        share = f"{cell.goodput / alone.goodput:.2f} x" if alone and alone.goodput else ""
        row = f"| {label} | " + (f"{alone.goodput:,.0f} ({alone.p99}) |" if alone else " |")
        row += f" {cell.goodput:,.0f} | {share} | {cell.p99} | {cell.errors:,} |"
        if figures:
            row += (
                f" {median('streams_open'):,.0f} | {median('websockets_open'):,.0f}"
                f" | {median('kib_per_connection'):,.0f} | {median('on_time'):.1%}"
                f" | {median('delivered'):.1%} | {median('gap_p99_ms'):,.0f} |"
            )
        else:
            row += " | | | | | |"
        rows.append(row)
    return rows


def choose_servers(names: Sequence[str] | None) -> list[Server]:
    known = {s.id: s for s in PEERS} | VARIANTS
    chosen = list(names or [s.id for s in PEERS])
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise PeersError(f"unknown server(s) {unknown}: {', '.join(known)}")
    return [known[n] for n in chosen]


def choose_conditions(names: Sequence[str] | None, *, short: bool) -> list[str]:
    default = ["small", "items", "1mb", "flood", "slow", "oversized", "held"]
    chosen = list(names or default)
    unknown = [n for n in chosen if n not in CONDITIONS]
    if unknown:
        raise PeersError(f"unknown condition(s) {unknown}: {', '.join(CONDITIONS)}")
    if any(c in (*ATTACKS, *HELD) for c in chosen) and "items" not in chosen:
        chosen.insert(0, "items")  # the attacks' and held's "alone" figure
    del short
    return chosen


def command_line(project: Project, argv: Sequence[str]) -> str:
    return shlex.join(["./scripts/bench", project.root.name, *argv])
