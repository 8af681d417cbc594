"""The Markdown report: tables like the seeds', findings and the recommendation."""

from __future__ import annotations

from bench.budgets import load_budgets
from bench.report import markdown, recommendation
from bench.results import ConfigResult, ExperimentResult, Results
from bench.wrk import WrkResult

MACHINE = {"cpus": 2, "platform": "Linux", "versions": {"nginx": "1.22.1"}}
SETTINGS = {
    "runs": 3,
    "warmup_s": 1,
    "duration_s": 2,
    "connections": 64,
    "wrk_threads": 1,
    "default_workers": 2,
}


def config(config_id: str, *rates: float) -> ConfigResult:
    return ConfigResult(
        config_id, config_id, [WrkResult(r, 1.0, 9.0, 100, 1.0, 0, 0) for r in rates]
    )


def workers_results() -> Results:
    workers = ExperimentResult(
        "workers",
        "Workers",
        "q",
        "workers-1",
        [
            config("workers-1", 5000, 5100, 4900),
            config("workers-2", 9000, 9100, 8900),
            config("workers-3", 9100, 9200, 9000),
            config("threads", 9000, 9050, 8950),
        ],
        line=True,
        x_values={"workers-1": 1, "workers-2": 2, "workers-3": 3},
    )
    middleware = ExperimentResult(
        "middleware",
        "Middleware",
        "q",
        "bare",
        [
            config("bare", 1000, 1010, 990),
            config("default", 980, 985, 975),
            config("basehttp-1", 500, 510, 490),
        ],
    )
    return Results(
        "full", "python -m bench run", "s", "f", MACHINE, SETTINGS, [middleware, workers]
    )


def test_recommends_fewest_workers_near_the_best() -> None:
    """3 workers beat 2 by about 1 %: within the tolerance, so 2 is recommended."""
    (line,) = recommendation(workers_results())
    assert "`WEB_CONCURRENCY=2`" in line


def test_report_has_tables_findings_and_budgets() -> None:
    """Each experiment gets a table with the baseline marked and the change to it."""
    text = markdown(workers_results(), load_budgets(), chart="benchmark.png")
    assert "| bare | 1,000 | 990 - 1,010 |" in text
    assert "| basehttp-1 | 500 | 490 - 510 | 1.00 | 9.00 | 0 | -50.0 % (0.50 x, slower) |" in text
    assert "BaseHTTPMiddleware costs about half the throughput" in text
    assert "| default middleware stack | 0.980 x | 0.95 x | pass |" in text
    # The transport budget's configurations were not measured: said so, not hidden.
    assert "| unix socket + upstream keepalive | - | 1.30 x | not measured in this run |" in text
    assert "![benchmark chart](benchmark.png)" in text
