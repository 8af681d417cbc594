"""Every serving-stack variable, once: a pydantic-settings field with its type, bounds and
meaning, read from the environment, then ``.env``. ``load()`` refuses a wrong value with
``SettingError``, one line naming the variable. Never depends on the app."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from dotenv import dotenv_values
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from . import ServeError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# Read by the stack and the app (which imports these, Deadline too), by these names.
APP_CORS_NAME = "CORS_ORIGINS"
APP_DEADLINE_NAME = "REQUEST_TIMEOUT_SECONDS"
DEADLINE_DEFAULT = 30.0
_DEADLINE_MEANING = (
    "the app's request deadline in seconds: past it the app answers 504 with the request id;"
    " nginx's and gunicorn's timeouts follow it"
)
Deadline = Annotated[float, Field(gt=0, le=3600, description=_DEADLINE_MEANING)]
# Written for the app, not read: the worker count, to size per-worker pools to their share.
WORKERS_EXPORT_NAME = "GUNICORN_WORKERS"
# Beyond the deadline, nginx waits this long for the app's own 504 (fired within 0.1 s).
PROXY_MARGIN = 5.0
# Beyond nginx's proxy timeouts, a graceful nginx stop waits this long for responses.
DRAIN_MARGIN = 5.0
# Beyond each process's own shutdown timeout, the supervisor waits this long before killing it.
STOP_MARGIN = 5.0
# nginx closes idle upstream connections this much before gunicorn does (else: a 502).
KEEPALIVE_MARGIN = 15
# The watchdog's floor: a blocked event loop is killed after this long at the earliest.
WATCHDOG_FLOOR = 60.0
# nginx's upstream keepalive_time: an idle upstream connection is closed this long after use.
UPSTREAM_KEEPALIVE_TIME = 5.0
# Requests in flight nginx lets reach the app, pod-wide (app_requests): streams and WebSocket
# sessions have caps of their own (STREAMS_PER_POD, WEBSOCKETS_PER_POD).
REQUESTS_PER_POD = 512
# Of those, requests sending a body (pod_uploads): nginx bounds a body's reads one by one, never
# in all, so slow uploads from many addresses hold at most this many (issue 50, finding 5).
UPLOADS_PER_POD = REQUESTS_PER_POD // 2
# Idle upstream connections each nginx worker keeps (nginx.conf's upstream keepalive).
UPSTREAM_IDLE_PER_NGINX_WORKER = 64
# Probes in flight nginx lets one address have (probe_connections): under no pod-wide cap.
PROBES_PER_CLIENT = 16
# Characters that would end an nginx directive or block if they came from the environment.
_UNSAFE = re.compile(r"[\s;{}'\"#$\\]")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
# A DNS name, lower case; ".example.com" and "svc.*" as nginx's map hostnames masks.
_HOST_NAME = re.compile(rf"\.?(?:{_LABEL}\.)*{_LABEL}(?:\.\*)?")
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.:\[\]-]+")
# Serving without an app: refused in one line (render and check need none).
NO_APP_MODULE = "APP_MODULE is not set: name the ASGI app to serve, as module.path:attribute"
# Removed in 0.4.0: refused when set, not ignored (GUNICORN_CMD_ARGS: gunicorn's own variable).
REMOVED = {
    "BACKLOG": "use GUNICORN_CMD_ARGS=--backlog=N",
    "FORWARDED_ALLOW_IPS": "gunicorn trusts nginx, its only peer; nginx trusts TRUSTED_PROXIES",
    "ACCESS_LOG": "use GUNICORN_CMD_ARGS=--access-logfile=- (nginx logs every request)",
    "MAX_REQUESTS": "use GUNICORN_CMD_ARGS=--max-requests=N",
    "MAX_REQUESTS_JITTER": "use GUNICORN_CMD_ARGS=--max-requests-jitter=N",
    "WORKER_TMP_DIR": "use GUNICORN_CMD_ARGS=--worker-tmp-dir=DIR",
    **dict.fromkeys(("WORKERS_PER_CORE", "MIN_WORKERS", "MAX_WORKERS"), "use WEB_CONCURRENCY=N"),
}
# gunicorn flags whose value the stack derives and checks: in GUNICORN_CMD_ARGS, refused.
DERIVED_FLAGS = {
    **dict.fromkeys(("--workers", "-w"), "WEB_CONCURRENCY"),
    **dict.fromkeys(("--timeout", "-t"), "GUNICORN_TIMEOUT"),
    "--graceful-timeout": "GRACEFUL_TIMEOUT",
    "--keep-alive": "KEEPALIVE",
    **dict.fromkeys(("--bind", "-b"), "GUNICORN_SOCKET (the socket is the stack's)"),
}


# The stack's own config files, package data beside this module.
OWN_CONFIGS = {
    "nginx_conf": Path(__file__).with_name("nginx.conf"),
    "gunicorn_conf": Path(__file__).with_name("gunicorn_conf.py"),
}
# A 0.4.0 project's copies of them, still used while there and unset (startup warns).
LEGACY_CONFIGS = {
    "nginx_conf": Path("deploy/nginx.conf"),
    "gunicorn_conf": Path("deploy/gunicorn.conf.py"),
}
LOCATIONS = Path("deploy/nginx-locations.conf")


def _own_config(field: str) -> Path:
    legacy = LEGACY_CONFIGS[field]
    return legacy.absolute() if legacy.is_file() else OWN_CONFIGS[field]


def _a_file(value: Path) -> Path:
    if not value.is_file():
        raise ValueError("no such file")
    return value


class SettingError(ServeError, ValueError):
    """A variable's value is refused; the message is one line naming it and what is allowed."""


def _safe_path(value: Path) -> Path:
    path = value.absolute()
    if _UNSAFE.search(str(path)):
        raise ValueError("a path without spaces, quotes, braces or ;#$\\")
    return path


def _listed(check: Callable[[str], str]) -> BeforeValidator:
    """A comma- or space-separated list from the environment, each item checked, as a tuple."""

    def parse(value: Any) -> Any:
        items = re.split(r"[,\s]+", value) if isinstance(value, str) else value
        return tuple(check(item) for item in items if item)

    return BeforeValidator(parse)


def _proxy_network(value: str) -> str:
    network = ipaddress.ip_network(value, strict=False)
    # Every address trusted is every client naming its own address, id and scheme.
    if network.prefixlen == 0:
        raise ValueError(f"{value} is every address: list your load balancers' networks")
    return str(network)


def _not_every_address(networks: tuple[str, ...]) -> tuple[str, ...]:
    """Networks that together hold a whole address family trust every client, as /0 does."""
    parsed = [ipaddress.ip_network(network) for network in networks]
    v4 = ipaddress.collapse_addresses(n for n in parsed if isinstance(n, ipaddress.IPv4Network))
    v6 = ipaddress.collapse_addresses(n for n in parsed if isinstance(n, ipaddress.IPv6Network))
    if any(net.prefixlen == 0 for net in v4) or any(net.prefixlen == 0 for net in v6):
        every = f"{' '.join(networks)}, together, is every address"
        raise ValueError(f"{every}: list your load balancers' networks")
    return networks


def _origin(value: str) -> str:
    # Quoted into nginx's CORS map; the app's cors_origins is this type too: no "*", path or @.
    if not _ORIGIN.fullmatch(value):
        raise ValueError("scheme://host[:port] origins, for example https://app.example.com")
    return value


def _host(value: str) -> str:
    host = value.lower()
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        if host != "*" and not _HOST_NAME.fullmatch(host):
            raise ValueError('a host name, ".name", "name.*", an IP address or *') from None
        return host


# The kinds of values; a field's docstring says what it means.
Seconds = Annotated[float, Field(gt=0, le=86400)]
Port = Annotated[int, Field(ge=1, le=65535)]
SafePath = Annotated[Path, AfterValidator(_safe_path)]
AFile = Annotated[Path, AfterValidator(lambda path: _a_file(path.absolute()))]
Address = Annotated[str, AfterValidator(lambda value: str(ipaddress.ip_address(value)))]
LogLevel = Annotated[
    Literal["debug", "info", "warning", "error", "critical"],
    BeforeValidator(lambda value: value.lower() if isinstance(value, str) else value),
]
Networks = Annotated[
    tuple[str, ...], NoDecode, _listed(_proxy_network), AfterValidator(_not_every_address)
]
Hosts = Annotated[tuple[str, ...], NoDecode, _listed(_host)]
Origins = Annotated[tuple[str, ...], NoDecode, _listed(_origin)]
# Requests per second, or in a burst, per client address: nginx's limit_req takes integers.
Rate = Annotated[int, Field(ge=0, le=1_000_000)]
_WORD = r"^\S+$"
_WORKERS = r"^(?:auto|[1-9][0-9]{0,3})$"
_APP = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*(\(\))?$"


class StackSettings(BaseSettings):
    """The serving stack's variables: each field's alias is its environment variable."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,  # blank means the default, as unset does
        extra="ignore",  # .env holds the app's variables too
        frozen=True,
        validate_by_name=True,
        validate_default=True,
        use_attribute_docstrings=True,  # each field's docstring is its description
    )

    # Where nginx listens, and where everything writes.
    port: Port = Field(8080, alias="PORT")
    """TCP port nginx listens on"""
    metrics_port: Port = Field(9464, alias="METRICS_PORT")
    """TCP port of the metrics listener on LISTEN_ADDRESS; never PORT"""
    listen_address: Address = Field("0.0.0.0", alias="LISTEN_ADDRESS")  # noqa: S104 - all of a container's interfaces
    """IP address nginx listens on; `make serve` uses 127.0.0.1"""
    run_dir: SafePath = Field(Path("/run/app"), alias="RUN_DIR")
    """socket, pid, rendered nginx.conf, metric and nginx temp files"""
    trusted_proxies: Networks = Field((), alias="TRUSTED_PROXIES")
    """load balancers (CIDRs, commas or spaces) that may set X-Forwarded-For and -Proto"""
    allowed_hosts: Hosts = Field(("localhost", "127.0.0.1", "::1"), alias="ALLOWED_HOSTS")
    """Host names nginx lets through (others: 400; ".example.com": it and every name under
    it; "name.*"; IP addresses; * for any); /livez and /readyz answer any Host"""
    nginx_access_log: bool = Field(default=True, alias="NGINX_ACCESS_LOG")
    """nginx's JSON access line per request"""
    nginx_worker_processes: str = Field("auto", alias="NGINX_WORKER_PROCESSES", pattern=_WORKERS)
    """nginx workers, 1-9999; auto: one per 4 CPUs this container may use, at least one"""
    nginx_bin: str | None = Field(None, alias="NGINX_BIN", pattern=_WORD)
    """the nginx executable; unset: nginx on PATH, else /usr/sbin/nginx"""
    nginx_temp_dir: SafePath | None = Field(None, alias="NGINX_TEMP_DIR")
    """nginx's spool of request bodies over 16 KiB and of buffered responses, best off RUN_DIR's
    filesystem (the image: /tmp/nginx); unset: $RUN_DIR/nginx-temp"""
    nginx_conf: AFile = Field(default_factory=lambda: _own_config("nginx_conf"), alias="NGINX_CONF")
    """the nginx.conf template; unset: the stack's own (a copy given here is a fork of it)"""
    gunicorn_conf: AFile = Field(
        default_factory=lambda: _own_config("gunicorn_conf"), alias="GUNICORN_CONF"
    )
    """gunicorn's config file; unset: the stack's own (a copy given here is a fork of it)"""
    nginx_locations: Annotated[SafePath, AfterValidator(_a_file)] | None = Field(
        default_factory=lambda: LOCATIONS if LOCATIONS.is_file() else None,
        alias="NGINX_LOCATIONS",
    )
    """the project's own nginx locations, included in the stack's server block; unset:
    deploy/nginx-locations.conf when there is one"""
    startup_timeout: Seconds = Field(60.0, alias="STARTUP_TIMEOUT")
    """seconds gunicorn may take to bind its socket and answer"""
    serve_as_root: bool = Field(default=False, alias="SERVE_AS_ROOT")
    """started as root: serve as root (nginx's workers too) rather than refuse; for throwaway
    containers and CI only"""

    # Per-client limits at nginx (README.md's design notes size them).
    rate_limit: Rate = Field(100, alias="RATE_LIMIT")
    """requests per second nginx lets each client address make, per pod (limit_req; over it:
    JSON 429 with Retry-After); 0: off"""
    rate_limit_burst: Rate = Field(200, alias="RATE_LIMIT_BURST")
    """requests above the rate a client may send at once, answered without waiting"""
    rate_limit_queue_seconds: int = Field(4, ge=0, le=60, alias="RATE_LIMIT_QUEUE_SECONDS")
    """seconds a request over the rate and the burst may wait for its turn before nginx
    answers 429 (RATE_LIMIT x this many wait); 0: refuse at once"""
    rate_limit_dry_run: bool = Field(default=False, alias="RATE_LIMIT_DRY_RUN")
    """count and log the requests RATE_LIMIT would refuse, refuse none"""
    client_ipv6_prefix: int = Field(64, ge=32, le=128, multiple_of=8, alias="CLIENT_IPV6_PREFIX")
    """leading bits of an IPv6 address that are one client to the per-client limits (a /64 is
    one subscriber's: addresses rotated inside it share its limits); 32-128, a multiple of 8"""
    # A sixteenth of nginx.conf's app_requests (512): slow uploads hold theirs (README.md).
    connections_per_client: int = Field(32, ge=0, le=65535, alias="CONNECTIONS_PER_CLIENT")
    """requests in flight nginx lets each client address have, per pod (limit_conn; over it:
    JSON 503 with Retry-After, like overload); 0: off"""
    websockets_per_client: int = Field(32, ge=0, le=65535, alias="WEBSOCKETS_PER_CLIENT")
    """open WebSocket sessions nginx lets each client address have, per pod (limit_conn; over
    it: JSON 503 with Retry-After); 0: off"""
    # Pod-wide: each held connection costs the app a task and nginx two descriptors, so these
    # size nginx's worker_connections and the workers' LIMIT_CONCURRENCY (never the reverse).
    websockets_per_pod: int = Field(1024, ge=1, le=16384, alias="WEBSOCKETS_PER_POD")
    """open WebSocket sessions nginx lets the pod hold, all clients together (over it: JSON 503
    with Retry-After)"""
    streams_per_pod: int = Field(512, ge=1, le=16384, alias="STREAMS_PER_POD")
    """requests asking for an event stream (Accept: text/event-stream) nginx lets the pod hold at
    once, apart from the 512 other requests in flight (over it: JSON 503 with Retry-After)"""
    # Per session, in the app's worker (gunicorn_config.py's WebSocketProtocol).
    websocket_max_message_bytes: int = Field(
        1 << 20, ge=1024, le=1 << 28, alias="WEBSOCKET_MAX_MESSAGE_BYTES"
    )
    """largest WebSocket message a client may send, its fragments together and inflated when
    compressed (over it: the session closes with 1009)"""
    websocket_max_fragments: int = Field(128, ge=1, le=65536, alias="WEBSOCKET_MAX_FRAGMENTS")
    """frames one WebSocket message may arrive in (over it: the session closes with 1009)"""
    websocket_message_rate: int = Field(100, ge=0, le=100_000, alias="WEBSOCKET_MESSAGE_RATE")
    """messages and pings a second a WebSocket session may send, a second's worth at once (over
    it: the session closes with 1008); 0: off"""
    websocket_compression: bool = Field(default=False, alias="WEBSOCKET_COMPRESSION")
    """offer permessage-deflate: fewer bytes on the wire for a worker CPU cost that grows with
    each inflated byte (measured in issue 49: 16 MiB inflated in 78 ms)"""
    # At least 3: the app pings every third of it (gunicorn_config.py), 1 s apart at least.
    websocket_idle_timeout: float = Field(60.0, ge=3, le=86400, alias="WEBSOCKET_IDLE_TIMEOUT")
    """seconds nginx keeps a WebSocket session whose app side sends nothing; the app pings the
    client every third of it and closes a session whose pong misses the next third"""
    cors_origins: Origins = Field((), validation_alias=APP_CORS_NAME)
    """the app's CORS origins: nginx's own errors (413, 429, 503...) carry their headers too"""

    # The timeout chain (the properties below derive nginx's and the stop's).
    app_deadline: Deadline = Field(DEADLINE_DEFAULT, validation_alias=APP_DEADLINE_NAME)
    graceful_timeout: Annotated[float, Field(gt=0, le=3600)] = Field(
        default_factory=lambda data: data.get("app_deadline", DEADLINE_DEFAULT),
        alias="GRACEFUL_TIMEOUT",
    )
    """seconds gunicorn's workers get after SIGTERM to finish requests in flight; unset: the
    app deadline (never below it)"""
    gunicorn_timeout: Seconds = Field(
        default_factory=lambda data: max(WATCHDOG_FLOOR, data.get("app_deadline", 0.0)),
        alias="GUNICORN_TIMEOUT",
    )
    """watchdog, in seconds: a worker whose event loop is blocked this long is killed (no
    request deadline); unset: the larger of 60 and the app deadline (never below it)"""
    drain_seconds: float = Field(0.0, ge=0, le=600, alias="DRAIN_SECONDS")
    """seconds a SIGTERM keeps serving before nginx stops accepting: /readyz answers 503 at
    once, every answer closes its connection from halfway; at least twice a balancer's
    health-check interval times its fall count; 0: stop accepting at once (SIGINT never drains)"""
    stop_grace_period: Seconds | None = Field(None, alias="STOP_GRACE_PERIOD")
    """seconds the platform grants before SIGKILL (compose stop_grace_period, Kubernetes
    terminationGracePeriodSeconds minus preStop); one below the stack's graceful stop is refused"""

    app_module: str | None = Field(None, alias="APP_MODULE", pattern=_APP)
    """the ASGI app gunicorn serves, module.path:attribute; serving refuses to start without it"""
    gunicorn_socket: SafePath = Field(
        default_factory=lambda data: data.get("run_dir", Path()) / "gunicorn.sock",
        alias="GUNICORN_SOCKET",
    )
    """gunicorn's socket; unset: $RUN_DIR/gunicorn.sock"""
    web_concurrency: int | None = Field(None, ge=1, le=1024, alias="WEB_CONCURRENCY")
    """gunicorn workers; unset: one per usable CPU, at least 2, at most 8"""
    keepalive: int = Field(75, ge=2, le=3600, alias="KEEPALIVE")
    """seconds gunicorn keeps idle upstream connections; nginx closes them 15 s sooner"""
    limit_concurrency: int | None = Field(None, ge=0, le=1_000_000, alias="LIMIT_CONCURRENCY")
    """connections + tasks per worker before it answers a plain-text 503; unset: all nginx lets
    through (512 requests + STREAMS_PER_POD + WEBSOCKETS_PER_POD + idle upstream connections), so
    nginx's JSON 503 always comes first; 0: no cap"""
    log_level: LogLevel = Field("info", alias="LOG_LEVEL")
    """gunicorn's and uvicorn's log level"""
    prometheus_multiproc_dir: SafePath | None = Field(None, alias="PROMETHEUS_MULTIPROC_DIR")
    """every worker's metric files; unset: $RUN_DIR/metrics (the supervisor sets and cleans it
    at start; gunicorn alone cleans it when it starts)"""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load() passes the environment (os.environ, or a test's mapping) as init values.
        del settings_cls, env_settings, file_secret_settings
        return init_settings, dotenv_settings

    @model_validator(mode="after")
    def _check_pairs(self) -> Self:
        deadline = f"{APP_DEADLINE_NAME}={self.app_deadline:g}"
        if self.graceful_timeout < self.app_deadline:
            raise ValueError(
                f"GRACEFUL_TIMEOUT={self.graceful_timeout:g} is below {deadline}: a stop would"
                " cut requests the app still allows; raise it, or unset it to follow the deadline"
            )
        if self.gunicorn_timeout < self.app_deadline:
            raise ValueError(
                f"GUNICORN_TIMEOUT={self.gunicorn_timeout:g} is below {deadline}: the watchdog"
                " would kill workers busy for less than a request may take; raise it, or unset it"
            )
        grace = self.stop_grace_period
        if grace is not None and grace < self.stop_budget:
            raise ValueError(
                f"STOP_GRACE_PERIOD={grace:g} is below the stack's graceful stop"
                f" ({self.stop_budget:g} s: DRAIN_SECONDS={self.drain_seconds:g}, then nginx"
                f" drains {self.nginx_drain:g} s, the metrics listener stops, then gunicorn"
                f" GRACEFUL_TIMEOUT={self.graceful_timeout:g} s, each + {STOP_MARGIN:g} s): the"
                " platform would kill requests in flight"
            )
        held, cap = self.held_connections, self.limit_concurrency
        if cap and cap < held:
            raise ValueError(
                f"LIMIT_CONCURRENCY={cap} is below the {held} connections nginx may hand one"
                f" worker ({REQUESTS_PER_POD} requests + STREAMS_PER_POD={self.streams_per_pod}"
                f" + WEBSOCKETS_PER_POD={self.websockets_per_pod}): clients would get the"
                " worker's plain-text 503 before nginx's; raise it, or unset it"
            )
        if self.metrics_port == self.port:
            raise ValueError(
                f"METRICS_PORT={self.metrics_port} is PORT too: the metrics need a port of"
                " their own, never reachable through the public one"
            )
        return self

    # The timeout chain, derived from the deadline so their order holds (README.md).
    @property
    def proxy_timeout(self) -> float:
        """nginx proxy_read_timeout / proxy_send_timeout: the app's 504 must arrive first."""
        return self.app_deadline + PROXY_MARGIN

    @property
    def nginx_drain(self) -> float:
        """nginx worker_shutdown_timeout: a graceful stop lets a proxied response finish."""
        return self.proxy_timeout + DRAIN_MARGIN

    @property
    def handover(self) -> float:
        """From nginx's QUIT to gunicorn's TERM (stop_all): what nginx accepted (a request queued
        at the rate limit too) has reached the app by then; within nginx's drain."""
        return min(self.rate_limit_queue_seconds + STOP_MARGIN, self.nginx_drain)

    @property
    def stop_budget(self) -> float:
        """The supervisor's worst-case graceful stop: the drain, then (stop_all) nginx, the
        listener, gunicorn."""
        stop_all = self.nginx_drain + STOP_MARGIN + STOP_MARGIN + self.graceful_timeout
        return self.drain_seconds + stop_all + STOP_MARGIN

    @property
    def upstream_keepalive(self) -> int:
        """nginx's upstream keepalive_timeout: below KEEPALIVE, so nginx closes first."""
        return max(1, self.keepalive - KEEPALIVE_MARGIN)

    @property
    def held_connections(self) -> int:
        """Connections nginx's pod-wide caps let reach the app at once: all may reach one worker."""
        return REQUESTS_PER_POD + self.streams_per_pod + self.websockets_per_pod

    def worker_concurrency(self, nginx_workers: int) -> int | None:
        """uvicorn's limit_concurrency: LIMIT_CONCURRENCY, else what nginx holds and keeps idle."""
        if self.limit_concurrency is not None:
            return self.limit_concurrency or None
        idle = UPSTREAM_IDLE_PER_NGINX_WORKER * nginx_workers
        return self.held_connections + idle + PROBES_PER_CLIENT

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
        return self.nginx_temp_dir or self.run_dir / "nginx-temp"

    @property
    def rendered_conf(self) -> Path:
        return self.run_dir / "nginx.conf"

    @property
    def metrics_dir(self) -> Path:
        return self.prometheus_multiproc_dir or self.run_dir / "metrics"

    @property
    def status_socket(self) -> Path:
        """nginx's stub_status, for the metrics listener: 0666 (nginx), in a 0700 directory."""
        return self.run_dir / "nginx-status" / "nginx-status.sock"


def variable_names() -> dict[str, str]:
    """Each environment variable's field name."""
    fields = StackSettings.model_fields.items()
    return {str(field.validation_alias or field.alias): name for name, field in fields}


def misnamed(
    prefix: str, environ: Mapping[str, str], names: Mapping[str, str] | None = None
) -> str | None:
    """A stack variable under the app's prefix (MY_SERVICE_REQUEST_TIMEOUT_SECONDS, the deadline's
    name before 0.2) in environ or .env, which the app would read by field name: one line naming
    the one name, else None. The app also passes its own (names: under the prefix -> one name)."""
    given = {name.upper() for name in {**dotenv_values(".env"), **environ}}
    own = variable_names()
    # <PREFIX>LOG_LEVEL is an app's own level (the bake's); METRICS_PORT is a variable.
    for suffix, name in (names or {n: n for n in own if n != "LOG_LEVEL"}).items():
        if (wrong := f"{prefix}{suffix}".upper()) in given and wrong not in own:
            return f"{wrong} is not read: set {name}, its one name"
    return None


def _refusal(environ: Mapping[str, str]) -> str | None:
    """A removed variable (environment or .env), a misnamed one, a flag the stack derives."""
    given = {**dotenv_values(".env"), **environ}
    for name, instead in REMOVED.items():
        if (given.get(name) or "").strip():
            return f"{name} was removed in serving-stack 0.4.0: {instead}"
    package = re.split(r"[.:]", given.get("APP_MODULE") or "")[0].strip().upper()
    if package and (wrong := misnamed(f"{package}_", environ)):
        return wrong
    try:
        args = shlex.split(environ.get("GUNICORN_CMD_ARGS", ""))
    except ValueError as exc:  # gunicorn's own error would be a traceback
        return f"GUNICORN_CMD_ARGS is refused: {exc}"
    for arg in args:
        name = arg.partition("=")[0] if arg.startswith("--") else arg[:2]
        # Applied after gunicorn's config, unchecked; argparse takes --time=90 for --timeout.
        long = name.startswith("--") and len(name) > 3
        if found := [f for f in DERIVED_FLAGS if name == f or (long and f.startswith(name))]:
            instead = DERIVED_FLAGS[found[0]]
            return f"GUNICORN_CMD_ARGS sets {name}, which the stack derives: set {instead}"
    return None


def load(environ: Mapping[str, str]) -> StackSettings:
    """Every variable from environ, else from .env; ``SettingError`` (one line) when refused."""
    if refused := _refusal(environ):
        raise SettingError(refused)
    given = {name: value for name in variable_names() if (value := environ.get(name, "").strip())}
    # pydantic validates the environment's strings; mypy would want each field's own type.
    build: Callable[..., StackSettings] = StackSettings
    try:
        settings = build(**given)
    except ValidationError as exc:  # the first refusal: the variable, its value, what is allowed
        error = exc.errors(include_url=False)[0]
        if not error["loc"]:  # a check across variables: its message names them
            raise SettingError(str(error.get("ctx", {}).get("error", error["msg"]))) from None
        reason = error["msg"].removeprefix("Value error, ")
        raise SettingError(f"{error['loc'][0]}={error['input']!r} is refused: {reason}") from None
    if settings.nginx_bin is None:  # on PATH, else Debian's /usr/sbin (often not on a user's PATH)
        path = environ.get("PATH", os.defpath)
        found = shutil.which("nginx", path=path) or shutil.which("nginx", path="/usr/sbin")
        return settings.model_copy(update={"nginx_bin": found})
    return settings
