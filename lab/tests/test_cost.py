"""The instruction-count gate (lab/cost.py): its verdict, and that it fails for real.

The live tests run valgrind on the project's app, as `./scripts/bench DIR --only cost` does;
they are skipped where valgrind is not installed (`apt-get install valgrind`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from lab.cost import Cost, CostBudget, check, load_budget, table
from lab.drive import REQUEST_SECONDS, SteppedClockLoop, serve

if TYPE_CHECKING:
    from pathlib import Path

    from lab.project import Project


def factory_source(project: Project, middleware: str, first_line: str) -> str:
    """A module whose ``create_app`` is the project's own plus a middleware ``middleware``
    that runs ``first_line`` on every scope, the way a developer adds one to main.py."""
    module, _, function = project.need_factory().partition(":")
    return f"""
from {module} import {function} as shipped


class {middleware}:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        {first_line}
        await self.app(scope, receive, send)


def create_app():
    app = shipped()
    app.add_middleware({middleware})
    return app
"""


# Pointless work on every request: about 60k instructions, 14 % of the bare app. The gate
# has to find it without being told.
SLOW = ("SlowMiddleware", "sum(range(3000))")
# Forgets to pass the lifespan scope through (it has no headers): the app can never start.
BROKEN = ("HeadersOnlyMiddleware", 'scope["headers"]')


def gate(project: Project, tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """`./scripts/bench PROJECT --only cost --quick` with the app built by ``source``."""
    (tmp_path / "changed_stack.py").write_text(source, encoding="utf-8")
    env = dict(
        os.environ,
        LAB_FACTORY="changed_stack:create_app",
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]),
    )
    # As in the template's CI: no database URL (the measured path never needs one).
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lab",
            str(project.root),
            "--only",
            "cost",
            "--quick",
            "--out",
            str(tmp_path / "out"),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def cost(default: float, bare: float = 400_000.0) -> Cost:
    per_request = {"bare": bare, "default": default, "only:0": bare + 1_000.0}
    return Cost("pkg.main:create_app", "/livez", ["RequestIdMiddleware"], per_request)


def test_the_budget_file_sets_the_gate() -> None:
    """lab/budgets.toml holds the gate's endpoint and a ratio above 1 and below 1.2."""
    budget = load_budget()
    assert budget.path == "/livez"
    assert 1.0 < budget.max_ratio < 1.2
    assert budget.why


@pytest.mark.parametrize(
    ("default", "passed"),
    [(400_000.0, True), (420_000.0, True), (420_001.0, False), (800_000.0, False)],
)
def test_the_verdict_is_the_ratio_against_the_budget(default: float, passed: bool) -> None:  # noqa: FBT001 - parametrised
    """At the budget passes, one instruction over it fails, and the line names both."""
    verdict, line = check(cost(default), CostBudget("/livez", 1.05, "because"))
    assert verdict is passed
    assert f"{default / 400_000:.3f} x" in line
    assert "1.05 x" in line


def test_the_table_lists_bare_each_middleware_and_default() -> None:
    """One row each, in stack order, with instructions and the ratio to bare."""
    rows = table(cost(410_000.0)).splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| bare app (no middleware)",
        "| + RequestIdMiddleware alone",
        "| default stack",
    ]
    assert rows[-1].endswith("| 410,000 | 1.025 x |")


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_slow_middleware_added_to_the_factory_fails_the_gate(
    project: Project, tmp_path: Path
) -> None:
    """The gate counts the factory's own stack, so a slow middleware added to it is measured
    and the run exits 1 naming the budget."""
    done = gate(project, tmp_path, factory_source(project, *SLOW))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL  default stack:" in done.stdout
    measured = json.loads((tmp_path / "out" / "cost.json").read_text(encoding="utf-8"))
    assert measured["stack"][0] == "SlowMiddleware"
    assert "DeadlineMiddleware" in measured["stack"]
    assert measured["ratio"] > load_budget().max_ratio


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_an_app_that_cannot_start_is_one_error_not_a_hang(project: Project, tmp_path: Path) -> None:
    """A factory whose lifespan start-up raises ends the gate with an error naming it (it
    used to wait for the start-up for ever)."""
    done = gate(project, tmp_path, factory_source(project, *BROKEN))
    assert done.returncode == 1
    assert "lifespan start-up did not complete: KeyError('headers')" in done.stderr
    assert not (tmp_path / "out" / "cost.json").exists()


def test_a_cost_file_round_trips() -> None:
    """What `check` writes as cost.json, the report reads back unchanged."""
    original = cost(410_000.0)
    assert Cost.from_json(original.to_json()) == original


def test_a_measured_loops_timers_fire_per_request_not_per_wall_second() -> None:
    """In a measured child the loop's clock moves REQUEST_SECONDS per request whatever the wall
    does, so a timer (the deadline's sweeper) fires as often on a loaded machine as on an idle
    one. Each request here takes 10 ms of wall time, ten steps."""
    clock: list[float] = []
    fired_after: list[int] = []

    async def app(_scope: Any, _receive: Any, send: Any) -> None:
        loop = asyncio.get_running_loop()
        clock.append(loop.time())
        if len(clock) == 1:
            loop.call_later(REQUEST_SECONDS * 2.5, lambda: fired_after.append(len(clock)))
        time.sleep(0.01)  # noqa: ASYNC251 - the loop held up, as valgrind's slowness does
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    with asyncio.Runner(loop_factory=SteppedClockLoop) as runner:
        assert runner.run(serve(app, 8, "/livez")) == 8
    steps = [later - earlier for earlier, later in itertools.pairwise(clock)]
    assert steps == pytest.approx([REQUEST_SECONDS] * 7)
    # Due 2.5 steps after the first request: it fires in the fourth, the first whose clock is
    # past it (by the wall clock, the first request's 10 ms would have fired it in the second).
    assert fired_after == [4]
