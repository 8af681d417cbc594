"""The option bakes: one per non-default answer, and the generated tests each can change.

tests/conftest.py's "options" suite lints and tests them in the background; tests/test_bake.py
reads the outcome per option.
"""

from __future__ import annotations

import tomllib
from pathlib import Path


# One bake per non-default value of each choice, as cookiecutter-django does: not the full
# cartesian product, which would multiply the run time for no new information.
def non_default_answers(context: dict[str, object]) -> list[tuple[str, str]]:
    """Every choice but the first (the default) of each list, and the opposite of each boolean."""
    answers = []
    for key, default in context.items():
        # database=postgresql brings its own dependencies and its own full suite (a real
        # PostgreSQL server): tests/test_database.py bakes it. auth=oidc too (PyJWT, httpx, a
        # real OpenID provider): tests/test_auth.py.
        if key.startswith("_") or key in {"database", "auth"}:
            continue
        if isinstance(default, list):
            answers += [(key, str(value)) for value in default[1:]]
        elif isinstance(default, bool):
            answers.append((key, "false" if default else "true"))
    return answers


# Where a change reaches every test without being named: the code and the tests' shared
# fixtures. pyproject.toml is compared apart (pytest_config).
CODE_DIRS = ("src", "deploy", "stack")
# pyproject.toml keys that only `make lint` or packaging read, never pytest: mypy's target
# and the license expression (test_license_file_matches_the_choice checks that one).
LINT_ONLY_KEYS = (("tool", "mypy", "python_version"), ("project", "license"))


def changed_files(project: Path, default: Path) -> set[str]:
    """Paths, relative to the project, that differ between two fresh bakes or exist in one."""

    def files(root: Path) -> dict[str, bytes]:
        return {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in root.rglob("*")
            if path.is_file()
        }

    ours, theirs = files(project), files(default)
    return {name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name)}


def pytest_config(project: Path) -> dict[str, object]:
    """pyproject.toml without the keys only lint and packaging read."""
    data = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    for *parents, key in LINT_ONLY_KEYS:
        table = data
        for parent in parents:
            table = table.get(parent, {})
        table.pop(key, None)
    return data


def generated_tests_for(project: Path, default: Path) -> list[str]:
    """The generated tests whose outcome this bake can change, relative to the default bake.

    Every test module the option changes runs. All of tests/unit and stack/tests run as well
    when the code, a shared test helper or pytest's configuration differs; otherwise only the
    unit modules that name a changed file (README.md's settings table): every other unit test
    would run the very bytes that the default bake's full `make test` already ran with the same
    venv.
    """
    changed = changed_files(project, default)
    modules = {
        name
        for name in changed
        if name.startswith("tests/")
        and Path(name).name.startswith("test_")
        and (project / name).is_file()
    }
    shared = any(
        name.split("/")[0] in CODE_DIRS or (name.startswith("tests/") and name not in modules)
        for name in changed
    )
    if shared or pytest_config(project) != pytest_config(default):
        # stack/tests too: the stack's own (its tests take seconds).
        whole = ("stack/tests", "tests/unit")
        inside = tuple(f"{folder}/" for folder in whole)
        return [*whole, *sorted(m for m in modules if not m.startswith(inside))]
    names = {Path(name).name for name in changed} - {"pyproject.toml"}
    modules |= {
        module.relative_to(project).as_posix()
        for module in (project / "tests" / "unit").glob("test_*.py")
        if any(name in module.read_text(encoding="utf-8") for name in names)
    }
    return sorted(modules)
