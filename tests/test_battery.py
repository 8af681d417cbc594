"""The battery (battery/, ./scripts/battery) and the promises the generated docs list.

Every test docs/security.md and docs/reliability.md name exists, in the bake (`tests/...`,
the stack's `stack/tests/...`)
or in the template's battery (`battery/...`, or a bare `test_*.py` in reliability.md's
battery table), and every battery module is named there. The battery itself runs against
the default bake in the background (tests/full_suites.py); this file reads its result.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

import pytest

from .conftest import TEMPLATE_DIR, Bake, ProjectEnv, bake, battery_command, run_captured

if TYPE_CHECKING:
    from pathlib import Path

    from .full_suites import FullSuites

BATTERY = TEMPLATE_DIR / "battery"
DOCS = ("docs/security.md", "docs/reliability.md")
NAMED = re.compile(r"`((?:[\w./]+/)?test_\w+\.py)::(test_\w+)`")


def functions_of(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def named_tests(project: Path) -> list[tuple[Path, str]]:
    """(module, function) for each `path::name` in the docs; bare names are the battery's."""
    named = []
    for page in DOCS:
        for path, name in NAMED.findall((project / page).read_text(encoding="utf-8")):
            if path.startswith(("tests/", "stack/tests/")):
                named.append((project / path, name))
            elif path.startswith("template/"):  # the template's own tests (auth=oidc's)
                named.append((TEMPLATE_DIR / path.removeprefix("template/"), name))
            else:
                named.append((BATTERY / path.removeprefix("battery/"), name))
    return named


@pytest.fixture(scope="module")
def projects(default_bake: Bake, database_bake: Bake, shared_tmp: Path) -> list[Path]:
    """The default bake, a database=postgresql one and an auth=oidc one (their docs name the
    database's and the tokens' tests; the postgresql one has kubernetes=true: the probes')."""
    auth = bake(shared_tmp / "auth-docs", auth="oidc")
    assert auth.exit_code == 0, auth.stderr
    return [default_bake.project, database_bake.project, auth.project]


def test_every_test_the_docs_name_exists(projects: list[Path]) -> None:
    """Each `path::name` on the two pages is a test function in the bake or in the battery."""
    named = [test for project in projects for test in named_tests(project)]
    missing = [
        f"{module}::{name}"
        for module, name in named
        if not module.is_file() or name not in functions_of(module)
    ]
    assert len(named) > 40, named
    assert missing == []


def test_every_battery_module_is_named_in_the_docs(projects: list[Path]) -> None:
    """A new battery module gets its promises listed (the docs say what it proves)."""
    named = {module for project in projects for module, _ in named_tests(project)}
    text = "".join(
        (project / page).read_text(encoding="utf-8") for project in projects for page in DOCS
    )
    unlisted = [
        module.name
        for module in sorted(BATTERY.glob("test_*.py"))
        if module not in named and module.name not in text
    ]
    assert unlisted == []


def test_the_contract_suite_is_named_in_the_docs(default_bake: Bake) -> None:
    """Every test of the bake's live contract suite (tests/live/) is on docs/security.md."""
    modules = sorted((default_bake.project / "tests" / "live").glob("test_*.py"))
    security = (default_bake.project / "docs" / "security.md").read_text(encoding="utf-8")
    unlisted = [
        f"{module.name}::{name}"
        for module in modules
        for name in functions_of(module)
        if f"tests/live/{module.name}::{name}`" not in security
    ]
    assert modules
    assert unlisted == []


def test_the_battery_refuses_to_run_without_a_project() -> None:
    """./scripts/battery without a directory prints its usage and exits 2."""
    result = run_captured([str(TEMPLATE_DIR / "scripts" / "battery")])
    assert (result.returncode, result.stderr.startswith("usage:")) == (2, True), result.stderr


@pytest.mark.slow
def test_the_battery_in_two_workers_runs_every_operation_it_fuzzes(
    default_bake: Bake, project_env: ProjectEnv
) -> None:
    """`./scripts/battery BAKE -n 2 --dist loadfile` (the README's faster way) runs every test
    it collects: pytest-xdist hands tests out by node id, and schemathesis gave the five fuzzed
    operations one (two workers fuzzed one, exit 0; battery/conftest.py gives each its own)."""
    project = default_bake.project
    workers = ["-n", "2", "--dist", "loadfile", "-k", "test_fuzz", "-p", "no:cacheprovider"]
    command = battery_command(project_env, project, *workers)
    done = run_captured(command, env=project_env.environ(project))
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    (collected,) = re.findall(r"^2 workers \[(\d+) items?\]$", done.stdout, re.MULTILINE)
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(rf"^=+ {collected} passed in ", summary), (collected, summary)


@pytest.mark.slow
@pytest.mark.full_suite("battery")
def test_the_battery_passes_against_the_default_bake(full_suites: FullSuites) -> None:
    """Load, fuzzing, faults, reloads, hostile and slow clients, observability, the docs page
    in a browser: every battery test passes against the default answers (and kubernetes=true:
    the probe tests read k8s/base), none skipped but the root-only ones and the database's
    (scripts/test installs every tool the battery uses; the postgresql full suite runs
    test_database.py)."""
    battery = full_suites.step("battery", "battery")
    assert battery.returncode == 0, f"{battery.stdout[-20000:]}\n{battery.stderr[-5000:]}"
    skipped = [line for line in battery.stdout.splitlines() if line.startswith("SKIPPED")]
    unexpected = [line for line in skipped if "root" not in line and "no database" not in line]
    assert unexpected == [], skipped
