"""Instructions per request, counted by valgrind: the cost gate (`./scripts/bench DIR`).

Throughput ratios from wrk move by +-20 % between two-second runs on a shared machine, so
they cannot gate anything. The number of instructions the CPU executes for one request does
not depend on the machine's load: valgrind's cachegrind counts them, and the same command
gives the same count to within a fraction of a percent on any machine.

lab/drive.py serves the app in process under cachegrind, in forked children; for each
variant, the difference between a child that served N requests and one that served M is
the cost of M - N requests, without start-up. The variants come from the project's app factory
(``create_app``, lab/project.py): ``bare`` (its middleware list emptied), ``default`` (as shipped)
and each middleware on its own, so middleware added to main.py later is counted with no list
to keep here; ``served``, the default app inside the serving stack's ResponseGuard (what its
workers add around any app), is reported beside them, not judged. The budget is a ratio,
default / bare, in lab/budgets.toml (the template's CI blocks on it, tests/test_bench.py).

Depends on valgrind (Debian/Ubuntu: ``apt-get install valgrind``) and the project's
dependencies in the running Python (the project's own venv).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.drive import DEFAULT_PATH
from lab.project import FACTORY_VARIABLE

if TYPE_CHECKING:
    from lab.project import Project

INSTALL_HINT = (
    "valgrind is not on PATH: install it with `sudo apt-get install valgrind` (Debian/Ubuntu),"
    " then run ./scripts/bench again"
)
BUDGETS_FILE = Path(__file__).with_name("budgets.toml")
# Requests per child: the difference (500) is what is measured; the first 100 of each
# child pay for its fresh event loop, the same in every variant.
COUNTS = (100, 600)
# Port 9 (discard): an app with a database is built with it and never dials it on the path
# measured.
UNUSED_DATABASE_URL = "postgresql+asyncpg://bench:livez-never-connects@127.0.0.1:9/bench"


class CostError(RuntimeError):
    """valgrind is missing or the app did not answer under it."""


@dataclass(frozen=True)
class Cost:
    """Instructions per request of each variant, and the stack they came from."""

    factory: str
    path: str
    stack: list[str]  # the factory's middleware, outermost first
    per_request: dict[str, float]  # variant -> instructions per request

    def ratio(self, variant: str = "default") -> float:
        return self.per_request[variant] / self.per_request["bare"]

    def rows(self) -> list[tuple[str, float, float]]:
        """(what, instructions per request, ratio to bare): bare first, then each middleware,
        default, and the default app as the stack serves it."""
        bare = self.per_request["bare"]
        rows = [("bare app (no middleware)", bare, 1.0)]
        for index, name in enumerate(self.stack):
            count = self.per_request.get(f"only:{index}")
            if count is not None:
                rows.append((f"+ {name} alone", count, count / bare))
        default = self.per_request["default"]
        rows.append(("default stack", default, default / bare))
        served = self.per_request.get("served")
        if served is not None:  # not judged: the stack's guard is the same for every app
            rows.append(("default stack in the stack's ResponseGuard", served, served / bare))
        return rows

    @classmethod
    def from_json(cls, text: str) -> Cost:
        data = json.loads(text)
        return cls(data["factory"], data["path"], data["stack"], data["per_request"])

    def to_json(self) -> str:
        return json.dumps(
            {
                "factory": self.factory,
                "path": self.path,
                "stack": self.stack,
                "per_request": self.per_request,
                "ratio": self.ratio(),
            },
            indent=2,
        )


@dataclass(frozen=True)
class CostBudget:
    path: str
    max_ratio: float
    why: str


def load_budget(path: Path = BUDGETS_FILE) -> CostBudget:
    data = tomllib.loads(path.read_text(encoding="utf-8"))["instructions"]
    return CostBudget(str(data["path"]), float(data["max_ratio"]), str(data["why"]))


def _summary(path: Path) -> int:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise CostError(f"no summary line in {path}")


def measure(
    project: Project,
    *,
    factory: str | None = None,
    path: str = DEFAULT_PATH,
    each: bool = True,
    served: bool = False,
) -> Cost:
    """Count instructions per request for bare, default, (with each) every middleware and (with
    served) the default app in the serving stack's ResponseGuard."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise CostError(INSTALL_HINT)
    factory = factory or project.need_factory()
    variants = ["bare", "default", *(["each"] if each else []), *(["served"] if served else [])]
    # A clean environment, not the caller's: its size shifts the process's memory layout,
    # and with it which dict and set lookups collide (a make variable on the command line
    # moved a count by 0.4 %). Without the caller's settings variables the stack measured
    # is the shipped default. On the path: the template's root for `lab`, the project's src/
    # for its packages when they are not installed.
    paths = [
        str(Path(__file__).resolve().parent.parent),
        str(project.root / "src"),
        str(project.root / "stack"),
    ]
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        # Hash randomisation changes dict layouts, and with them the count, between runs.
        "PYTHONHASHSEED": "0",
        "LC_ALL": "C.UTF-8",
    }
    if project.factory is not None:
        # What lab/apps.py and the template's experiments build on (experiments/floors.py).
        env[FACTORY_VARIABLE] = project.factory
    if project.database:
        # The settings refuse to build the app without the database's URL, but GET /livez,
        # the path measured, never opens a connection: without the caller's URL (the
        # template's gate test has none), one that nothing answers on will do.
        env["DATABASE_URL"] = os.environ.get("DATABASE_URL", UNUSED_DATABASE_URL)
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as workdir:
        out = Path(workdir)
        manifest = out / "manifest.json"
        # Relative paths in the temporary directory, and `python -P` below (no working
        # directory on sys.path): the random name never reaches the measured process, whose
        # strings' hashes would move its dict layouts between runs.
        # The metrics middleware counted as under gunicorn: prometheus_client's multiprocess
        # mode writes each value to a memory-mapped file (about 60 % dearer than in memory).
        # Relative too, for the same reason.
        (out / "metrics").mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = "metrics"
        # Without address randomisation: objects hash by address, so a random layout can move
        # which dict and set lookups collide (docs/performance.md has the runs). setarch is
        # util-linux's, on every Debian.
        fixed_layout = ["setarch", os.uname().machine, "--addr-no-randomize"]
        command = [
            *(fixed_layout if shutil.which("setarch") else []),
            valgrind,
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=cachegrind.%p",
            sys.executable,
            "-P",
            "-m",
            "lab.drive",
            *variants,
            "--counts",
            ",".join(map(str, COUNTS)),
            "--factory",
            factory,
            "--path",
            path,
            "--manifest",
            manifest.name,
        ]
        done = subprocess.run(
            command,
            cwd=out,
            env=env,
            stdout=subprocess.DEVNULL,  # the app's own log lines
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not manifest.is_file():
            raise CostError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        document = json.loads(manifest.read_text(encoding="utf-8"))
        totals: dict[str, dict[int, int]] = {}
        for child in document["children"]:
            counted = _summary(out / f"cachegrind.{child['pid']}")
            totals.setdefault(child["variant"], {})[child["requests"]] = counted
    low, high = COUNTS
    per_request = {v: (t[high] - t[low]) / (high - low) for v, t in totals.items()}
    return Cost(factory, path, document["stack"], per_request)


def table(cost: Cost) -> str:
    """Markdown: instructions per request and the ratio to the bare app, per variant."""
    rows = [
        f"| GET {cost.path}, in process | instructions per request | vs bare |",
        "|---|---:|---:|",
    ]
    rows += [f"| {what} | {count:,.0f} | {ratio:.3f} x |" for what, count, ratio in cost.rows()]
    return "\n".join(rows)


def check(cost: Cost, budget: CostBudget) -> tuple[bool, str]:
    """Whether the default stack keeps within its budget, and one line saying so."""
    found = cost.ratio()
    extra = cost.per_request["default"] - cost.per_request["bare"]
    line = (
        f"default stack: {found:.3f} x the bare app's instructions per request "
        f"(+{extra:,.0f}), budget at most {budget.max_ratio:.2f} x"
    )
    return found <= budget.max_ratio, line
