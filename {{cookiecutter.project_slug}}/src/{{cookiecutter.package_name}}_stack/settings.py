"""Every serving-stack variable, typed, bounded and documented once; read and checked at start.

The one place that defines the environment of deploy/: its name, type, unit, default, bounds
and meaning (``VARIABLES``, which docs/settings.md lists), how it is parsed (``load()``),
and the values derived from them (``TimeoutChain``: nginx's proxy and shutdown timeouts,
gunicorn's drain and watchdog, the stop grace period a platform must allow). deploy/serve.py,
deploy/gunicorn.conf.py, the benchmark and the tests import it; it travels with deploy/
(standard library only, no package needed: each of them puts deploy/ on ``sys.path``).

A wrong value raises ``SettingError`` with one line naming the variable, the value and what
is allowed; the runner prints that line and exits 1 before starting anything.

To add a variable: define it below (a ``Variable`` subclass instance), add it to ``VARIABLES``
and to ``StackSettings``, and describe it in docs/settings.md (a test checks the list).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Mapping

T = TypeVar("T")
# deploy/ of the project the stack is started from (make serve, the image's WORKDIR /app).
DEPLOY_DIR = Path("deploy")

# The app's request deadline: read by the app (settings.py) and by the stack, which derives
# nginx's and gunicorn's timeouts from it.
APP_DEADLINE_NAME = "{{ cookiecutter.package_name | upper }}_REQUEST_TIMEOUT_SECONDS"
{%- if cookiecutter.database == "postgresql" %}
# Written, not read, by the stack: gunicorn.conf.py exports the worker count it decided under
# this name, and each worker sizes its database pool to its share of the connection budget
# (the app's settings.py reads it; src/{{ cookiecutter.package_name }}/db/pool.py).
WORKERS_EXPORT_NAME = "GUNICORN_WORKERS"
{%- endif %}
# Beyond the app's deadline, nginx waits this long for the app's own 504 (the deadline
# middleware fires within one tick, at most 0.1 s, after the deadline).
PROXY_MARGIN = 5.0
# Beyond nginx's proxy timeouts, a graceful nginx stop waits this long for responses in flight.
DRAIN_MARGIN = 5.0
# Extra seconds the runner grants each process beyond its own shutdown timeout before killing it.
STOP_MARGIN = 5.0
# nginx closes idle upstream connections this much sooner than gunicorn's KEEPALIVE, so it never
# sends a request on a connection gunicorn just closed (a 502 for a POST).
KEEPALIVE_MARGIN = 15
# The watchdog's floor: a blocked event loop is killed after this long at the earliest.
WATCHDOG_FLOOR = 60.0
# Characters that would end an nginx directive or block if they came from the environment.
_UNSAFE = re.compile(r"[\s;{}'\"#$\\]")


class SettingError(ValueError):
    """A variable's value is refused; the message is one line naming it and what is allowed."""


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable: name, meaning, unit and default, and how to parse it.

    A kind of variable is a ``Variable[T]`` plus a mixin that says how to parse one value
    (``parse``) and which values are allowed (``rule``); a default of None means "unset".
    """

    name: str
    meaning: str
    default: T
    unit: str = ""
    # How the default is computed when it is not a constant ("" for a constant default).
    derived: str = ""

    def parse(self, raw: str) -> T:
        """The typed value of a non-empty raw string; ValueError when it is not allowed."""
        raise NotImplementedError

    @property
    def rule(self) -> str:
        raise NotImplementedError

    @property
    def allowed(self) -> str:
        """What values are allowed, as docs/settings.md and the refusals say it."""
        return self.rule + (", or unset" if self.default is None and not self.derived else "")

    @property
    def default_text(self) -> str:
        return self.derived or _show(self.default)

    def read(self, environ: Mapping[str, str]) -> T:
        """This variable's value in environ (the default when unset or blank)."""
        raw = environ.get(self.name, "").strip()
        if not raw:
            return self.default
        try:
            return self.parse(raw)
        except ValueError:
            # One line: the variable, its value and what is allowed (never a traceback).
            raise SettingError(f"{self.name}={raw!r} is refused: {self.allowed}") from None


def _show(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) or "none"
    return str(value)


# --- kinds of values: each parses one value and states its rule ------------------------------
# Each kind serves a required and an optional variable (default None, "unset"): its type
# variable is constrained to the value's type, with or without None.

IntT = TypeVar("IntT", int, int | None)
FloatT = TypeVar("FloatT", float, float | None)
StrT = TypeVar("StrT", str, str | None)
PathT = TypeVar("PathT", Path, Path | None)


@dataclass(frozen=True)
class Int(Variable[IntT]):
    low: int = 0
    high: int = 2**31 - 1

    def parse(self, raw: str) -> IntT:
        value = int(raw)
        if not self.low <= value <= self.high:
            raise ValueError(raw)
        return value

    @property
    def rule(self) -> str:
        return f"a whole number from {self.low} to {self.high}"


@dataclass(frozen=True)
class Number(Variable[FloatT]):
    """A finite number above ``low`` (excluded: a timeout is never 0) and at most ``high``."""

    low: float = 0.0
    high: float = 86400.0
    noun: str = "a number"

    def parse(self, raw: str) -> FloatT:
        value = float(raw)
        if not (math.isfinite(value) and self.low < value <= self.high):
            raise ValueError(raw)
        return value

    @property
    def rule(self) -> str:
        return f"{self.noun}, more than {self.low:g} and at most {self.high:g}"


@dataclass(frozen=True)
class Seconds(Number[FloatT]):
    """A duration in seconds, fractions allowed."""

    unit: str = "s"
    noun: str = "seconds"


@dataclass(frozen=True)
class Text(Variable[StrT]):
    """Text matching ``pattern``; ``describe`` says what that pattern allows."""

    pattern: str = r"\S+"
    describe: str = "no spaces"

    def parse(self, raw: str) -> StrT:
        if not re.fullmatch(self.pattern, raw):
            raise ValueError(raw)
        return raw

    @property
    def rule(self) -> str:
        return self.describe


@dataclass(frozen=True)
class SafePath(Variable[PathT]):
    """A path nginx.conf may contain: no spaces, quotes, braces or ``;#$\\``."""

    def parse(self, raw: str) -> PathT:
        path = Path(raw).absolute()
        if _UNSAFE.search(str(path)):
            raise ValueError(raw)
        return path

    @property
    def rule(self) -> str:
        return "a path without spaces, quotes, braces or ;#$\\"


@dataclass(frozen=True)
class Choice(Variable[str]):
    choices: tuple[str, ...] = ()

    def parse(self, raw: str) -> str:
        value = raw.lower()
        if value not in self.choices:
            raise ValueError(raw)
        return value

    @property
    def rule(self) -> str:
        return "one of " + ", ".join(self.choices)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Flag(Variable[bool]):
    def parse(self, raw: str) -> bool:
        value = raw.lower()
        if value not in _TRUE + _FALSE:
            raise ValueError(raw)
        return value in _TRUE

    @property
    def rule(self) -> str:
        return "on or off (also 1/0, true/false, yes/no)"


@dataclass(frozen=True)
class Address(Variable[str]):
    def parse(self, raw: str) -> str:
        return str(ipaddress.ip_address(raw))

    @property
    def rule(self) -> str:
        return "an IPv4 or IPv6 address"


@dataclass(frozen=True)
class Networks(Variable[tuple[str, ...]]):
    def parse(self, raw: str) -> tuple[str, ...]:
        items = [item for item in re.split(r"[,\s]+", raw) if item]
        return tuple(str(ipaddress.ip_network(item, strict=False)) for item in items)

    @property
    def rule(self) -> str:
        return "CIDRs such as 10.0.0.0/8, separated by commas or spaces"


_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
# A DNS name, lower case; ".example.com" is it and every name under it, "svc.*" every name
# it begins (nginx's map hostnames masks).
_HOST_NAME = re.compile(rf"\.?(?:{_LABEL}\.)*{_LABEL}(?:\.\*)?")


@dataclass(frozen=True)
class Hosts(Variable[tuple[str, ...]]):
    """Host names (".example.com": it and every name under it), IP addresses, or "*"."""

    def parse(self, raw: str) -> tuple[str, ...]:
        hosts = []
        for item in (item.lower() for item in re.split(r"[,\s]+", raw) if item):
            if item == "*":
                hosts.append(item)
                continue
            try:
                hosts.append(str(ipaddress.ip_address(item.strip("[]"))))
            except ValueError:
                if not _HOST_NAME.fullmatch(item):
                    raise
                hosts.append(item)
        return tuple(hosts)

    @property
    def rule(self) -> str:
        return (
            'host names (".example.com": it and every name under it; "name.*": every name'
            ' beginning "name."), IP addresses, or * for any, separated by commas or spaces'
        )


# --- the variables ----------------------------------------------------------------------------

# Where nginx listens, and where everything writes.
PORT = Int("PORT", "TCP port nginx listens on", 8080, low=1, high=65535)
LISTEN_ADDRESS = Address(
    "LISTEN_ADDRESS",
    "address nginx listens on; `make serve` uses 127.0.0.1",
    "0.0.0.0",  # noqa: S104 - a container listens on all interfaces
)
METRICS_PORT = Int(
    "METRICS_PORT",
    "TCP port of the metrics listener (deploy/metrics.py) on LISTEN_ADDRESS; never on PORT",
    9464,
    low=1,
    high=65535,
)
RUN_DIR = SafePath(
    "RUN_DIR", "socket, pid, rendered nginx.conf and nginx temp files", Path("/run/app")
)
TRUSTED_PROXIES = Networks(
    "TRUSTED_PROXIES",
    "load balancers allowed to set X-Forwarded-For and X-Forwarded-Proto",
    (),
)
ALLOWED_HOSTS = Hosts(
    "ALLOWED_HOSTS",
    "the Host names nginx lets through to the app (others: 400); /livez and /readyz answer"
    " any Host, for probes",
    ("localhost", "127.0.0.1", "::1"),
)
NGINX_ACCESS_LOG = Flag("NGINX_ACCESS_LOG", "nginx's JSON access line per request", default=True)
NGINX_WORKER_PROCESSES = Text(
    "NGINX_WORKER_PROCESSES",
    "nginx worker processes; auto: the CPUs this container may use (CPU affinity lowered by any"
    " cgroup quota, deploy/cpus.py), as gunicorn counts them; nginx's own auto would count the"
    " machine's",
    "auto",
    pattern=r"auto|[1-9][0-9]{0,3}",
    describe="auto or a whole number from 1 to 9999",
)
NGINX_BIN = Text(
    "NGINX_BIN",
    "the nginx executable",
    None,
    derived="nginx on PATH, else /usr/sbin/nginx",
)
NGINX_CONF = SafePath(
    "NGINX_CONF", "nginx.conf template", DEPLOY_DIR / "nginx.conf", derived="deploy/ of the working directory"
)
GUNICORN_CONF = SafePath(
    "GUNICORN_CONF", "gunicorn config file", DEPLOY_DIR / "gunicorn.conf.py", derived="deploy/ of the working directory"
)
STARTUP_TIMEOUT = Seconds(
    "STARTUP_TIMEOUT", "how long gunicorn may take to bind its socket and answer", 60.0
)
SERVE_USER = Text(
    "SERVE_USER",
    "when started as root: the user that runs nginx and gunicorn; a dedicated one (the"
    " image's `app`), never the shared `nobody`, whose other processes could reach the socket",
    "app",
    pattern=r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}",
    describe="a user name (letters, digits, _.-)",
)

SERVE_AS_ROOT = Flag(
    "SERVE_AS_ROOT",
    "when started as root and SERVE_USER cannot run the stack: serve as root anyway"
    " (otherwise the runner refuses to start)",
    default=False,
)

# The timeout chain (TimeoutChain below derives the rest).
APP_DEADLINE = Seconds(
    APP_DEADLINE_NAME,
    "the app's request deadline; past it the app answers 504 with the request id",
    30.0,
    high=3600.0,
)
GRACEFUL_TIMEOUT = Seconds(
    "GRACEFUL_TIMEOUT",
    "after SIGTERM, gunicorn's workers finish requests in flight for this long",
    None,
    high=3600.0,
    derived=f"the app deadline ({APP_DEADLINE_NAME})",
)
GUNICORN_TIMEOUT = Seconds(
    "GUNICORN_TIMEOUT",
    "watchdog: a worker whose event loop is blocked this long is killed (no request deadline)",
    None,
    high=86400.0,
    derived=f"the larger of {WATCHDOG_FLOOR:g} and the app deadline",
)
STOP_GRACE_PERIOD = Seconds(
    "STOP_GRACE_PERIOD",
    "the platform's grace before SIGKILL (compose stop_grace_period, Kubernetes"
    " terminationGracePeriodSeconds minus preStop); when set, a shorter one than the"
    " stack's graceful stop needs is refused",
    None,
)

# gunicorn.
APP_MODULE = Text(
    "APP_MODULE",
    "the ASGI app gunicorn serves, module:attribute",
    "{{ cookiecutter.app_module }}",
    pattern=r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*(\(\))?",
    describe="module.path:attribute",
)
GUNICORN_SOCKET = SafePath(
    "GUNICORN_SOCKET", "gunicorn's socket path", None, derived="$RUN_DIR/gunicorn.sock"
)
WEB_CONCURRENCY = Int(
    "WEB_CONCURRENCY",
    "gunicorn worker count",
    None,
    low=1,
    high=1024,
    derived="usable CPUs x WORKERS_PER_CORE, within MIN_WORKERS..MAX_WORKERS",
)
WORKERS_PER_CORE = Number("WORKERS_PER_CORE", "workers per usable CPU", 1.0)
MIN_WORKERS = Int("MIN_WORKERS", "fewest workers when computed", 2, low=1, high=1024)
MAX_WORKERS = Int("MAX_WORKERS", "most workers when computed", 8, low=1, high=1024)
KEEPALIVE = Int(
    "KEEPALIVE",
    "gunicorn keeps idle upstream connections this long; nginx closes them"
    f" {KEEPALIVE_MARGIN} s sooner",
    75,
    unit="s",
    low=2,
    high=3600,
)
LIMIT_CONCURRENCY = Int(
    "LIMIT_CONCURRENCY",
    "connections + tasks per worker before it answers 503; 0 = no cap",
    1000,
    high=1_000_000,
)
MAX_REQUESTS = Int("MAX_REQUESTS", "recycle a worker after this many requests; 0 = never", 0)
MAX_REQUESTS_JITTER = Int(
    "MAX_REQUESTS_JITTER",
    "random extra requests, so workers do not recycle together",
    None,
    low=0,
    derived="MAX_REQUESTS / 10",
)
BACKLOG = Int("BACKLOG", "listen backlog of gunicorn's socket", 2048, low=1, high=65535)
FORWARDED_ALLOW_IPS = Text(
    "FORWARDED_ALLOW_IPS", "peers whose X-Forwarded-* headers gunicorn trusts", "*"
)
LOG_LEVEL = Choice(
    "LOG_LEVEL",
    "gunicorn's and uvicorn's log level",
    "info",
    choices=("debug", "info", "warning", "error", "critical"),
)
ACCESS_LOG = Flag(
    "ACCESS_LOG", "gunicorn's own access line (nginx already logs each request)", default=False
)
PROMETHEUS_MULTIPROC_DIR = SafePath(
    "PROMETHEUS_MULTIPROC_DIR",
    "every worker's metric files; serve.py sets it and cleans it at start (gunicorn alone:"
    " cleaned when gunicorn starts)",
    None,
    derived="$RUN_DIR/metrics",
)
WORKER_TMP_DIR = Text(
    "WORKER_TMP_DIR",
    "directory of the workers' heartbeat files",
    None,
    derived="/dev/shm when present",  # noqa: S108 - text for the docs, nothing is opened
)

VARIABLES: tuple[Variable[Any], ...] = (
    PORT,
    METRICS_PORT,
    LISTEN_ADDRESS,
    RUN_DIR,
    TRUSTED_PROXIES,
    ALLOWED_HOSTS,
    NGINX_ACCESS_LOG,
    NGINX_WORKER_PROCESSES,
    NGINX_BIN,
    NGINX_CONF,
    GUNICORN_CONF,
    STARTUP_TIMEOUT,
    SERVE_USER,
    SERVE_AS_ROOT,
    APP_DEADLINE,
    GRACEFUL_TIMEOUT,
    GUNICORN_TIMEOUT,
    STOP_GRACE_PERIOD,
    APP_MODULE,
    GUNICORN_SOCKET,
    WEB_CONCURRENCY,
    WORKERS_PER_CORE,
    MIN_WORKERS,
    MAX_WORKERS,
    KEEPALIVE,
    LIMIT_CONCURRENCY,
    MAX_REQUESTS,
    MAX_REQUESTS_JITTER,
    BACKLOG,
    FORWARDED_ALLOW_IPS,
    LOG_LEVEL,
    ACCESS_LOG,
    PROMETHEUS_MULTIPROC_DIR,
    WORKER_TMP_DIR,
)


# --- derived values ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeoutChain:
    """The stack's timeouts, each derived from the app's deadline so their order always holds.

    client -> nginx (proxy timeouts) -> gunicorn (watchdog) -> app (deadline); and on stop:
    nginx drains (worker_shutdown_timeout), then gunicorn (graceful_timeout), within the
    platform's grace period. docs/settings.md has the table.
    """

    app_deadline: float
    graceful: float
    watchdog: float

    @property
    def proxy(self) -> float:
        """nginx proxy_read_timeout / proxy_send_timeout: the app's 504 must arrive first."""
        return self.app_deadline + PROXY_MARGIN

    @property
    def nginx_drain(self) -> float:
        """nginx worker_shutdown_timeout: a graceful stop lets a proxied response finish."""
        return self.proxy + DRAIN_MARGIN

    @property
    def stop_budget(self) -> float:
        """The runner's worst-case graceful stop: nginx's drain, then gunicorn's, each + margin."""
        return self.nginx_drain + STOP_MARGIN + self.graceful + STOP_MARGIN


def find_nginx(path: str) -> str | None:
    """nginx on PATH, else Debian's /usr/sbin (often missing from an ordinary user's PATH)."""
    return shutil.which("nginx", path=path) or shutil.which("nginx", path="/usr/sbin")


def nginx_time(seconds: float) -> str:
    """A duration as nginx reads it: seconds, or milliseconds for a fraction (30.5 -> 30500ms)."""
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


@dataclass(frozen=True)
class StackSettings:
    """Every serving-stack variable, parsed and checked; see ``VARIABLES`` for each meaning."""

    port: int
    metrics_port: int
    listen_address: str
    run_dir: Path
    trusted_proxies: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    nginx_access_log: bool
    nginx_worker_processes: str
    nginx_bin: str | None
    nginx_conf: Path
    gunicorn_conf: Path
    startup_timeout: float
    serve_user: str
    serve_as_root: bool
    chain: TimeoutChain
    stop_grace_period: float | None
    app_module: str
    gunicorn_socket: Path
    web_concurrency: int | None
    workers_per_core: float
    min_workers: int
    max_workers: int
    keepalive: int
    limit_concurrency: int
    max_requests: int
    max_requests_jitter: int
    backlog: int
    forwarded_allow_ips: str
    log_level: str
    gunicorn_access_log: bool
    # As set: None means serve.py did not set it (gunicorn then owns and cleans the directory).
    prometheus_multiproc_dir: Path | None
    worker_tmp_dir: str | None

    @property
    def graceful_timeout(self) -> float:
        return self.chain.graceful

    @property
    def upstream_keepalive(self) -> int:
        """nginx's upstream keepalive_timeout: below KEEPALIVE, so nginx closes first."""
        return max(1, self.keepalive - KEEPALIVE_MARGIN)

    # -- where things are (the runner's view) --

    @property
    def local_address(self) -> str:
        """Where a local client reaches nginx (a wildcard address is not connectable)."""
        wildcards = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 - compared, not bound
        return wildcards.get(self.listen_address, self.listen_address)

    @property
    def local_url(self) -> str:
        host = self.local_address
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def temp_dir(self) -> Path:
        return self.run_dir / "nginx-temp"

    @property
    def rendered_conf(self) -> Path:
        return self.run_dir / "nginx.conf"

    @property
    def metrics_dir(self) -> Path:
        """Every worker's Prometheus files (gunicorn.conf.py), read by deploy/metrics.py."""
        given = self.prometheus_multiproc_dir
        return self.run_dir / "metrics" if given is None else given

    @property
    def status_socket(self) -> Path:
        """nginx's stub_status, for the metrics listener only (nginx.conf)."""
        return self.run_dir / "nginx-status.sock"

    def socket_path(self, generation: int = 0) -> Path:
        """gunicorn's socket; each reload starts generation N+1 on a new path."""
        return self.run_dir / (
            "gunicorn.sock" if generation == 0 else f"gunicorn-{generation}.sock"
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StackSettings:
        """Alias of ``load()``, the runner's historical name."""
        return load(environ)


def _chain(environ: Mapping[str, str]) -> TimeoutChain:
    deadline = APP_DEADLINE.read(environ)
    graceful = GRACEFUL_TIMEOUT.read(environ)
    watchdog = GUNICORN_TIMEOUT.read(environ)
    shown = f"{APP_DEADLINE_NAME}={deadline:g}"
    if graceful is not None and graceful < deadline:
        raise SettingError(
            f"GRACEFUL_TIMEOUT={graceful:g} is below {shown}: a stop would cut requests the app"
            " still allows; raise it, or unset it to follow the deadline"
        )
    if watchdog is not None and watchdog < deadline:
        raise SettingError(
            f"GUNICORN_TIMEOUT={watchdog:g} is below {shown}: the watchdog would kill workers"
            " busy for less than a request may take; raise it, or unset it"
        )
    return TimeoutChain(
        app_deadline=deadline,
        graceful=deadline if graceful is None else graceful,
        watchdog=max(WATCHDOG_FLOOR, deadline) if watchdog is None else watchdog,
    )


def _check_pairs(settings: StackSettings) -> None:
    grace = settings.stop_grace_period
    budget = settings.chain.stop_budget
    if grace is not None and grace < budget:
        raise SettingError(
            f"STOP_GRACE_PERIOD={grace:g} is below the stack's graceful stop ({budget:g} s:"
            f" nginx drains {settings.chain.nginx_drain:g} s, then gunicorn"
            f" GRACEFUL_TIMEOUT={settings.chain.graceful:g} s, each + {STOP_MARGIN:g} s):"
            " the platform would kill requests in flight"
        )
    if settings.metrics_port == settings.port:
        raise SettingError(
            f"METRICS_PORT={settings.metrics_port} is PORT too: the metrics need a port of"
            " their own, never reachable through the public one"
        )
    if settings.min_workers > settings.max_workers:
        raise SettingError(
            f"MIN_WORKERS={settings.min_workers} is above MAX_WORKERS={settings.max_workers}"
        )


def load(environ: Mapping[str, str]) -> StackSettings:
    """Parse and check every variable; ``SettingError`` (one line) on the first wrong one."""
    run_dir = RUN_DIR.read(environ)
    max_requests = MAX_REQUESTS.read(environ)
    jitter = MAX_REQUESTS_JITTER.read(environ)
    socket = GUNICORN_SOCKET.read(environ)
    settings = StackSettings(
        port=PORT.read(environ),
        metrics_port=METRICS_PORT.read(environ),
        listen_address=LISTEN_ADDRESS.read(environ),
        run_dir=run_dir,
        trusted_proxies=TRUSTED_PROXIES.read(environ),
        allowed_hosts=ALLOWED_HOSTS.read(environ),
        nginx_access_log=NGINX_ACCESS_LOG.read(environ),
        nginx_worker_processes=NGINX_WORKER_PROCESSES.read(environ),
        nginx_bin=NGINX_BIN.read(environ) or find_nginx(environ.get("PATH", os.defpath)),
        nginx_conf=NGINX_CONF.read(environ),
        gunicorn_conf=GUNICORN_CONF.read(environ),
        startup_timeout=STARTUP_TIMEOUT.read(environ),
        serve_user=SERVE_USER.read(environ),
        serve_as_root=SERVE_AS_ROOT.read(environ),
        chain=_chain(environ),
        stop_grace_period=STOP_GRACE_PERIOD.read(environ),
        app_module=APP_MODULE.read(environ),
        gunicorn_socket=run_dir / "gunicorn.sock" if socket is None else socket,
        web_concurrency=WEB_CONCURRENCY.read(environ),
        workers_per_core=WORKERS_PER_CORE.read(environ),
        min_workers=MIN_WORKERS.read(environ),
        max_workers=MAX_WORKERS.read(environ),
        keepalive=KEEPALIVE.read(environ),
        limit_concurrency=LIMIT_CONCURRENCY.read(environ),
        max_requests=max_requests,
        max_requests_jitter=max_requests // 10 if jitter is None else jitter,
        backlog=BACKLOG.read(environ),
        forwarded_allow_ips=FORWARDED_ALLOW_IPS.read(environ),
        log_level=LOG_LEVEL.read(environ),
        gunicorn_access_log=ACCESS_LOG.read(environ),
        prometheus_multiproc_dir=PROMETHEUS_MULTIPROC_DIR.read(environ),
        worker_tmp_dir=WORKER_TMP_DIR.read(environ),
    )
    _check_pairs(settings)
    return settings
