"""Which of a bake's generated tests an answer can change, relative to the default bake.

An option bake (tests/test_bake.py) or the auth=oidc bake (tests/test_auth.py) runs those and
`make lint`; every other generated test would run the very bytes the default bake's full
`make test` already ran with the same packages.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from .conftest import locked_packages, tree

# What each generated suite reads besides its own modules: tests/unit imports the app (src/)
# and the stack and reads deploy/ (nginx-locations.conf's body limits); the stack's own tests
# read only the stack. A changed shared test helper (a conftest.py, a module that is no
# test_*.py) reaches every unit test.
SUITE_READS = {
    "stack/tests": ("stack",),
    "tests/unit": ("src", "deploy", "stack"),
}
# What pytest and coverage read of pyproject.toml (the rest is packaging's and the linters'):
# mypy's target and file list, ruff's rules and the license change no test's outcome.
TEST_TABLES = ("pytest", "coverage")


def changed_files(project: Path, default: Path) -> set[str]:
    """Paths, relative to the project, that differ between two bakes or exist in one; what
    running code there leaves (bytecode, pytest's and ruff's caches) aside, as the default bake
    is the session's, which other tests import from."""
    ours, theirs = tree(project), tree(default)
    return {name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name)}


def set_up_alike(project: Path, default: Path) -> bool:
    """Whether the generated tests run alike in both bakes: pytest and coverage configured
    the same, and each package the default bake locks at the same version (a package only
    the project locks, PyJWT for auth=oidc, is new to every test but its own). A serving-only
    bake locks nothing."""

    def tables(root: Path) -> list[object]:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        return [data.get("tool", {}).get(name) for name in TEST_TABLES]

    def locked(root: Path) -> dict[str, str]:
        lock = root / "uv.lock"
        return locked_packages(lock) if lock.is_file() else {}

    ours = locked(project)
    same_versions = all(ours.get(name, pin) == pin for name, pin in locked(default).items())
    return tables(project) == tables(default) and same_versions


def generated_tests_for(project: Path, default: Path) -> list[str]:
    """The generated tests whose outcome this bake can change, relative to the default bake.

    Every test module the bake changes runs. A whole suite of SUITE_READS runs as well when
    what it reads differs (tests/unit also for a changed shared test helper), both when the
    tests are not set up alike (set_up_alike); with neither, the unit modules that name a
    changed file (README.md's settings table). The live tests (tests/live) run on the default
    bake only: no answer changes the serving stack they prove.
    """
    changed = changed_files(project, default)
    modules = {
        name
        for name in changed
        if name.startswith("tests/")
        and Path(name).name.startswith("test_")
        and (project / name).is_file()
    }
    helpers = any(name.startswith("tests/") and name not in modules for name in changed)
    configured = not set_up_alike(project, default)
    suites = [
        suite
        for suite, reads in SUITE_READS.items()
        if configured
        or (helpers and suite == "tests/unit")
        or any(name.split("/")[0] in reads for name in changed)
    ]
    if suites:
        inside = tuple(f"{suite}/" for suite in suites)
        return [*suites, *sorted(module for module in modules if not module.startswith(inside))]
    names = {Path(name).name for name in changed} - {"pyproject.toml"}
    modules |= {
        module.relative_to(project).as_posix()
        for module in (project / "tests" / "unit").glob("test_*.py")
        if any(name in module.read_text(encoding="utf-8") for name in names)
    }
    return sorted(modules)
