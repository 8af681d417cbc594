"""The template's experiment grid: every choice the generated stack ships with, re-measured.

Pure data, in the shapes of lab/experiments.py (Experiment, Config, ServerSet,
Front), run by its runner. These experiments argue the template's defaults (pure ASGI over
BaseHTTPMiddleware, socket and keepalive over TCP, buffering on, the worker count, the
server); `./scripts/bench` measures a service with the lean list. The grid's middleware
experiment is that list's own, extended: its rows come from lab/experiments.py,
so the two measure the same stacks. `quick=True` marks the configurations
`scripts/experiments --quick` measures.
"""

from __future__ import annotations

from dataclasses import replace

from lab.experiments import (
    LARGE,
    LARGE_SYNC,
    SMALL,
    SMALL_SYNC,
    Config,
    Experiment,
    Front,
    ServerSet,
    experiments,
)


def _service_experiment(
    experiment_id: str, cpus: int, default_workers: int, package: str
) -> Experiment:
    """One of the lab's experiments (`./scripts/bench`), which the grid extends."""
    for experiment in experiments(cpus, default_workers, package=package):
        if experiment.id == experiment_id:
            return experiment
    raise LookupError(f"lab/experiments.py has no {experiment_id!r} experiment")


def grid(cpus: int, default_workers: int, *, package: str) -> list[Experiment]:
    """Every experiment, for a machine with `cpus` CPUs where the shipped config runs
    `default_workers` workers; `package` is the bake's app package."""
    production = Front()  # what deploy/ ships: unix socket, upstream keepalive, buffering on
    middleware = _service_experiment("middleware", cpus, default_workers, package)
    # The template's variants run on the baseline's own stack (one worker, no nginx), so
    # against it only the middleware differs.
    bare = middleware.config(middleware.baseline).stack
    worker_counts = list(range(1, 2 * cpus + 2))
    return [
        replace(
            middleware,
            title="Middleware: bare, the shipped pure-ASGI stack, the same as BaseHTTPMiddleware",
            question="What does the shipped middleware stack cost, and what would the "
            "BaseHTTPMiddleware way (`@app.middleware('http')`) cost? One worker, no nginx, "
            "so the app is the bottleneck. The rows before the BaseHTTPMiddleware ones are the "
            "lab's own middleware experiment (`./scripts/bench`), its access-log row included (the "
            "app's access log is off by default: nginx logs every request with the same id). "
            "The two pass-through rows repeat the seed's own experiment (one middleware that "
            "does nothing).",
            configs=(
                *middleware.configs,
                Config(
                    "basehttp",
                    "same middlewares as BaseHTTPMiddleware",
                    replace(bare, app="experiments.apps:basehttp()"),
                ),
                Config(
                    "asgi-1",
                    "one pure-ASGI pass-through (seed)",
                    replace(bare, app="experiments.apps:asgi_passthrough()"),
                ),
                Config(
                    "basehttp-1",
                    "one BaseHTTPMiddleware pass-through (seed)",
                    replace(bare, app="experiments.apps:basehttp_passthrough()"),
                    quick=True,
                ),
            ),
        ),
        Experiment(
            id="transport",
            title="nginx to app: TCP or unix socket, with and without upstream keepalive",
            question="How should nginx reach gunicorn? The shipped stack (socket + keepalive) "
            "against the seeds' starting point (TCP, a new connection per request), and "
            "gunicorn without nginx for reference.",
            baseline="tcp-close",
            configs=(
                Config(
                    "tcp-close",
                    "nginx -> TCP, no keepalive",
                    ServerSet(front=Front("tcp", keepalive=False)),
                    quick=True,
                ),
                Config("tcp-keepalive", "nginx -> TCP + keepalive", ServerSet(front=Front("tcp"))),
                Config(
                    "socket-close",
                    "nginx -> socket, no keepalive",
                    ServerSet(front=Front("unix", keepalive=False)),
                ),
                Config(
                    "socket-keepalive",
                    "nginx -> socket + keepalive (shipped)",
                    ServerSet(front=production),
                    quick=True,
                ),
                Config("direct", "gunicorn direct (no nginx)", ServerSet()),
            ),
        ),
        Experiment(
            id="endpoint",
            title="Small JSON or 1 MiB; `async def` or `def`",
            question="How do response size and the endpoint's kind change throughput through "
            "the shipped stack? `def` endpoints run in AnyIO's thread pool.",
            baseline="async-small",
            configs=(
                Config("async-small", "async def, small JSON", ServerSet(front=production), SMALL),
                Config("def-small", "def, small JSON", ServerSet(front=production), SMALL_SYNC),
                Config("async-1mb", "async def, 1 MiB", ServerSet(front=production), LARGE),
                Config("def-1mb", "def, 1 MiB", ServerSet(front=production), LARGE_SYNC),
            ),
        ),
        Experiment(
            id="buffering",
            title="proxy_buffering on or off for 1 MiB responses",
            question="The seeds turn proxy_buffering off; the shipped config keeps it on "
            "(it frees workers from slow clients). What does each cost here?",
            baseline="buffering-on",
            configs=(
                Config(
                    "buffering-on",
                    "proxy_buffering on (shipped)",
                    ServerSet(front=production),
                    LARGE,
                ),
                Config(
                    "buffering-off",
                    "proxy_buffering off (seeds)",
                    ServerSet(front=Front(buffering=False)),
                    LARGE,
                ),
                Config("direct-1mb", "gunicorn direct (no nginx)", ServerSet(), LARGE),
            ),
        ),
        Experiment(
            id="workers",
            title=f"Worker count from 1 to 2 x {cpus} cores + 1, and threads",
            question="Which worker count serves most through the shipped stack on this machine? "
            "gunicorn's `threads` only affects its gthread worker: one data point shows it "
            "does nothing for ASGI workers.",
            baseline="workers-1",
            configs=(
                *(
                    Config(
                        f"workers-{n}",
                        f"{n} worker{'s' if n > 1 else ''}",
                        ServerSet(workers=n, front=production),
                    )
                    for n in worker_counts
                ),
                Config(
                    "threads",
                    f"{default_workers} workers x 4 threads",
                    ServerSet(workers=default_workers, threads=4, front=production),
                ),
            ),
            line=True,
            x_values={f"workers-{n}": n for n in worker_counts},
        ),
        Experiment(
            id="servers",
            title="Server: gunicorn + UvicornWorker, gunicorn's asgi worker, uvicorn --workers",
            question=f"Which server runs the same app fastest, each with {default_workers} "
            "workers, directly on TCP (no nginx)?",
            baseline="gunicorn-uvicorn",
            configs=(
                Config(
                    "gunicorn-uvicorn",
                    "gunicorn + UvicornWorker (shipped)",
                    ServerSet(workers=default_workers),
                ),
                Config(
                    "gunicorn-asgi",
                    "gunicorn worker_class=asgi",
                    ServerSet(server="gunicorn-asgi", workers=default_workers),
                ),
                Config(
                    "uvicorn",
                    "uvicorn --workers (FastAPI docs)",
                    ServerSet(server="uvicorn", workers=default_workers),
                ),
            ),
        ),
    ]
