"""What the lab measures: each experiment is a few configurations against a baseline.

Pure data, no I/O. A configuration names the app variant (lab/apps.py), the server that runs
it, the worker count, and whether nginx (the stack's nginx.conf, varied by
lab/nginx.py) sits in front. `quick=True` marks the configurations `./scripts/bench --quick`
measures: those the budgets (lab/budgets.toml) need, in short runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

# The app's endpoints (lab/apps.py): small JSON and 1 MiB, each as `async def` and `def`
# (the `def` ones serve the template's experiments, scripts/experiments).
SMALL = "/bench/small"
SMALL_SYNC = "/bench/small-sync"
LARGE = "/bench/1mb"
LARGE_SYNC = "/bench/1mb-sync"
# The example resource of a database=postgresql bake (api/items_db.py); POSTs are shaped by
# a wrk script.
ITEMS = "/items"
ITEMS_CREATE_SCRIPT = Path(__file__).with_name("items_create.lua")


def access_log_variable(package: str) -> str:
    """The app's access-log switch (its settings.py, prefix the package's name): off by
    default, nginx logs every request."""
    return f"{package.upper()}_ACCESS_LOG"


Server = Literal["gunicorn-uvicorn", "gunicorn-asgi", "uvicorn"]


@dataclass(frozen=True)
class Front:
    """nginx in front of the app, as the stack's nginx.conf ships except for the varied settings."""

    transport: Literal["unix", "tcp"] = "unix"  # how nginx reaches the app
    keepalive: bool = True  # upstream keepalive (nginx reuses its connections to the app)
    buffering: bool = True  # proxy_buffering


@dataclass(frozen=True)
class ServerSet:
    """A set of processes serving one app variant; configurations may share one."""

    # A variant of lab/apps.py ("bare", "shipped"), or any "module:attribute" app.
    app: str = "shipped"
    server: Server = "gunicorn-uvicorn"
    workers: int | None = None  # None: what serving_stack/gunicorn_conf.py decides for this machine
    threads: int | None = None  # gunicorn --threads; None leaves the shipped setting
    front: Front | None = None  # None: wrk talks to the app server directly over TCP
    env: tuple[tuple[str, str], ...] = ()  # extra environment for the app server


@dataclass(frozen=True)
class Config:
    id: str
    label: str
    stack: ServerSet
    path: str = SMALL
    quick: bool = False
    # A wrk Lua script that shapes the request (a POST with its body); None: a plain GET.
    script: Path | None = None


@dataclass(frozen=True)
class Experiment:
    id: str
    title: str
    question: str
    baseline: str  # the id of the configuration the others are compared with
    configs: tuple[Config, ...]
    line: bool = False  # chart as a line over the configurations' numeric x values
    x_values: dict[str, int] = field(default_factory=dict)

    def config(self, config_id: str) -> Config:
        for config in self.configs:
            if config.id == config_id:
                return config
        raise KeyError(f"{self.id} has no configuration {config_id!r}")


def experiments(
    cpus: int, default_workers: int, *, package: str, item_id: int | None = None
) -> list[Experiment]:
    """The service's experiments, on a machine with `cpus` CPUs where the shipped config
    runs `default_workers` workers; `package` is the app's package (its settings' prefix).
    With `item_id` (an item lab/database.py created in the database), the items experiment.

    The template's experiment grid (BaseHTTPMiddleware twins, transports, worker counts,
    servers, buffering: scripts/experiments) extends these; they measure the service as it
    ships.
    """
    del cpus  # the lean list does not vary with the machine; the signature is shared
    production = Front()  # what the stack ships: unix socket, upstream keepalive, buffering on
    direct = ServerSet()  # gunicorn as shipped, wrk straight to it over TCP
    chosen = [
        Experiment(
            id="middleware",
            title="Middleware: the bare app and the default pure-ASGI stack",
            question="What does the shipped middleware stack cost in requests/s? One worker, "
            "no nginx, so the app is the bottleneck. The cost gate (instructions) answers the same "
            "question by instruction counts, which noise cannot move. The app's access log "
            "is off by default (nginx logs every request with the same id); the last row "
            "shows what turning it on costs.",
            baseline="bare",
            configs=(
                Config(
                    "bare", "bare app (no middleware)", ServerSet(app="bare", workers=1), quick=True
                ),
                Config(
                    "default",
                    "default pure-ASGI stack",
                    ServerSet(app="shipped", workers=1),
                    quick=True,
                ),
                Config(
                    "default-access-log",
                    "default stack + the app's access log",
                    ServerSet(
                        app="shipped", workers=1, env=((access_log_variable(package), "true"),)
                    ),
                ),
            ),
        ),
        Experiment(
            id="hop",
            title="The nginx hop: the whole stack against gunicorn directly",
            question=f"How much of gunicorn's direct throughput ({default_workers} workers, "
            "TCP) reaches a client through nginx and the unix socket, for small JSON and for "
            "1 MiB responses? Both stacks run side by side in the same rounds. The last column "
            "compares with small JSON direct; the budgets below give each size's own ratio.",
            baseline="direct-small",
            configs=(
                Config("direct-small", "gunicorn direct, small JSON", direct, SMALL, quick=True),
                Config(
                    "nginx-small",
                    "nginx -> socket -> gunicorn, small JSON",
                    ServerSet(front=production),
                    SMALL,
                    quick=True,
                ),
                Config("direct-1mb", "gunicorn direct, 1 MiB", direct, LARGE, quick=True),
                Config(
                    "nginx-1mb",
                    "nginx -> socket -> gunicorn, 1 MiB",
                    ServerSet(front=production),
                    LARGE,
                    quick=True,
                ),
            ),
        ),
    ]
    if item_id is None:
        return chosen
    return [
        *chosen,
        Experiment(
            id="items",
            title="Items in PostgreSQL: the whole stack against gunicorn directly",
            question="What do the example resource's endpoints serve, each request a query on "
            f"the database at DATABASE_URL through the worker's pool ({default_workers} "
            "workers, the shipped connection budget per stack), through nginx and the unix "
            "socket and from gunicorn directly, side by side in the same rounds? Reading one "
            "item by its id (a primary-key lookup) and creating one (an INSERT and a commit "
            "per request: every run adds rows). Both stacks talk to the same database, so "
            "its machine's speed counts in each row alike.",
            baseline="direct-read",
            configs=(
                Config(
                    "direct-read",
                    "gunicorn direct, GET /items/{id}",
                    direct,
                    f"{ITEMS}/{item_id}",
                    quick=True,
                ),
                Config(
                    "nginx-read",
                    "nginx -> socket -> gunicorn, GET /items/{id}",
                    ServerSet(front=production),
                    f"{ITEMS}/{item_id}",
                    quick=True,
                ),
                Config(
                    "direct-create",
                    "gunicorn direct, POST /items",
                    direct,
                    ITEMS,
                    quick=True,
                    script=ITEMS_CREATE_SCRIPT,
                ),
                Config(
                    "nginx-create",
                    "nginx -> socket -> gunicorn, POST /items",
                    ServerSet(front=production),
                    ITEMS,
                    quick=True,
                    script=ITEMS_CREATE_SCRIPT,
                ),
            ),
        ),
    ]


def select(
    chosen: Sequence[Experiment], only: Collection[str] | None, *, quick: bool
) -> list[Experiment]:
    """The experiments ``only`` names (all when None); with ``quick``, each keeps its quick
    configurations and those left with none are dropped. ValueError names unknown ids.
    Shared by `./scripts/bench` and `./scripts/experiments`."""
    if only:
        unknown = set(only) - {experiment.id for experiment in chosen}
        if unknown:
            raise ValueError(f"unknown experiment(s) {sorted(unknown)}")
        chosen = [experiment for experiment in chosen if experiment.id in only]
    if quick:
        chosen = [
            replace(experiment, configs=tuple(c for c in experiment.configs if c.quick))
            for experiment in chosen
        ]
    return [experiment for experiment in chosen if experiment.configs]
