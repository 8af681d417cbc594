"""The seeds' findings checked against a run of the grid, and a recommendation.

Pure functions of the bake's `Results` (lab/results.py). The seeds are the articles this
template's defaults were first argued from; each finding names its seed's figure. The
findings table is what the template README's "Re-measured" section shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.stats import Outcome, Summary, best_within, compare, percent_change, ratio

if TYPE_CHECKING:
    from collections.abc import Callable

    from lab.results import Results

# More workers must beat fewer by more than this to be worth their memory and CPU.
WORKER_TOLERANCE = 0.03


def _rps(value: float) -> str:
    return f"{value:,.0f}"


@dataclass(frozen=True)
class Finding:
    seed: str  # the claim as the seed made it
    seed_figure: str
    experiment: str
    candidate: str
    baseline: str
    held: Callable[[float, Outcome], bool | None]  # None: cannot tell (within noise)


def _expect(outcome: Outcome) -> Callable[[float, Outcome], bool | None]:
    def judge(_: float, found: Outcome) -> bool | None:
        if found is Outcome.SAME:
            return None
        return found is outcome

    return judge


def _at_least(minimum: float) -> Callable[[float, Outcome], bool | None]:
    def judge(found: float, outcome: Outcome) -> bool | None:
        if found >= minimum:
            return True
        return None if outcome is Outcome.SAME else False

    return judge


def _not_slower(_: float, found: Outcome) -> bool:
    return found is not Outcome.SLOWER


FINDINGS = (
    Finding(
        "nginx -> app over a unix socket beats TCP",
        "+0.4 % to +47 % (sync/async, small/1 MB)",
        "transport",
        "socket-close",
        "tcp-close",
        _expect(Outcome.FASTER),
    ),
    Finding(
        "upstream keepalive helps",
        "+9.8 % (def), +15 % (async def)",
        "transport",
        "tcp-keepalive",
        "tcp-close",
        _expect(Outcome.FASTER),
    ),
    Finding(
        "`async def` serves more than `def` for small JSON",
        "1,863 vs 1,344 req/s (nginx -> TCP)",
        "endpoint",
        "async-small",
        "def-small",
        _expect(Outcome.FASTER),
    ),
    Finding(
        "BaseHTTPMiddleware costs about half the throughput",
        "-54 % (10,849 -> 5,018 req/s, one pass-through)",
        "middleware",
        "basehttp-1",
        "bare",
        _expect(Outcome.SLOWER),
    ),
    Finding(
        "pure-ASGI middleware costs little",
        "-6 % (one pass-through)",
        "middleware",
        "asgi-1",
        "bare",
        _at_least(0.94),
    ),
    Finding(
        "gunicorn serves a bit more than `uvicorn --workers`",
        "+4.5 % (1 worker), +4.9 % (2 workers)",
        "servers",
        "gunicorn-uvicorn",
        "uvicorn",
        _expect(Outcome.FASTER),
    ),
    Finding(
        "`proxy_buffering off` (the seeds' config) costs nothing",
        "implied by the seeds' config",
        "buffering",
        "buffering-off",
        "buffering-on",
        _not_slower,
    ),
)


def _verdict(*, held: bool | None) -> str:
    return {True: "held", False: "did not hold", None: "within noise"}[held]


def findings_table(results: Results) -> str:
    rows = [
        "| seed finding | seed figure | here | verdict |",
        "|---|---|---|---|",
    ]
    for finding in FINDINGS:
        experiment = results.experiment(finding.experiment)
        candidate = experiment.config(finding.candidate) if experiment else None
        baseline = experiment.config(finding.baseline) if experiment else None
        if candidate is None or baseline is None:
            continue
        c, b = candidate.summary, baseline.summary
        found = ratio(c, b)
        here = f"{candidate.label} vs {baseline.label}: {percent_change(c, b):+.1f} %"
        rows.append(
            f"| {finding.seed} | {finding.seed_figure} | {here} "
            f"| {_verdict(held=finding.held(found, compare(c, b)))} |"
        )
    workers = _workers(results)
    if workers:
        best = max(workers, key=lambda item: item[1].median)
        top_n, top = workers[-1]
        slower = compare(top, best[1]) is Outcome.SLOWER
        rows.append(
            f"| too many workers lower throughput | 2 x cores + 1 was not the best "
            f"| best: {best[0]} worker(s), {_rps(best[1].median)} req/s; {top_n} workers "
            f"{percent_change(top, best[1]):+.1f} % | {_verdict(held=slower or None)} |"
        )
    threads = _threads(results)
    if threads:
        label, with_threads, without = threads
        outcome = compare(with_threads, without)
        rows.append(
            f"| threads matter for ASGI workers | the seeds tuned a workers x threads grid "
            f"| {label}: {percent_change(with_threads, without):+.1f} % "
            f"| {_verdict(held=None if outcome is Outcome.SAME else True)} |"
        )
    return "\n".join(rows) if len(rows) > 2 else ""


def _workers(results: Results) -> list[tuple[int, Summary]]:
    experiment = results.experiment("workers")
    if experiment is None:
        return []
    return [
        (experiment.x_values[c.id], c.summary)
        for c in experiment.configs
        if c.id in experiment.x_values and c.runs
    ]


def _threads(results: Results) -> tuple[str, Summary, Summary] | None:
    """The threads data point and the same worker count without threads."""
    experiment = results.experiment("workers")
    threads = experiment.config("threads") if experiment else None
    workers = results.settings.get("default_workers")
    same = experiment.config(f"workers-{workers}") if experiment else None
    if threads is None or same is None:
        return None
    return threads.label, threads.summary, same.summary


def recommendation(results: Results) -> list[str]:
    """What to set on this machine, as Markdown bullet lines."""
    lines = []
    workers = _workers(results)
    if workers:
        chosen = best_within(workers, WORKER_TOLERANCE)
        lines.append(
            f"- `WEB_CONCURRENCY={chosen}`: the fewest workers within "
            f"{WORKER_TOLERANCE:.0%} of the best throughput through the shipped stack here "
            f"(the stack's gunicorn config decides {results.settings.get('default_workers')} "
            "on its own)."
        )
    servers = results.experiment("servers")
    shipped = servers.config("gunicorn-uvicorn") if servers else None
    if servers and shipped:
        for other in servers.configs:
            if other is shipped or not other.runs:
                continue
            if compare(other.summary, shipped.summary) is Outcome.FASTER:
                lines.append(
                    f"- {other.label} beat the shipped gunicorn + UvicornWorker by "
                    f"{percent_change(other.summary, shipped.summary):+.1f} % here: worth a "
                    "look, weighed against what gunicorn's master adds (worker restarts, "
                    "signals, the heartbeat watchdog)."
                )
    buffering = results.experiment("buffering")
    on = buffering.config("buffering-on") if buffering else None
    off = buffering.config("buffering-off") if buffering else None
    if on and off:
        change = percent_change(off.summary, on.summary)
        lines.append(
            f"- Keep `proxy_buffering on`: turning it off changed 1 MiB throughput by "
            f"{change:+.1f} % here, and buffering is what frees a worker from a slow client."
        )
    return lines
