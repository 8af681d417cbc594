"""Bake the defaults and each option value one at a time; lint and test what comes out."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from .conftest import DEFAULT_CONTEXT, Bake, ProjectEnv, bake


# One bake per non-default value of each choice, as cookiecutter-django does: not the full
# cartesian product, which would multiply the run time for no new information.
def non_default_answers() -> list[tuple[str, str]]:
    """Every choice but the first (the default) of each list, and the opposite of each boolean."""
    answers = []
    for key, default in DEFAULT_CONTEXT.items():
        # database=postgresql brings its own dependencies and its own full suite (a real
        # PostgreSQL server): tests/test_database.py bakes it.
        if key.startswith("_") or key == "database":
            continue
        if isinstance(default, list):
            answers += [(key, str(value)) for value in default[1:]]
        elif isinstance(default, bool):
            answers.append((key, "false" if default else "true"))
    return answers


OPTION_BAKES = [
    pytest.param({key: value}, id=f"{key}={value}") for key, value in non_default_answers()
]
LEFTOVER_TAG = re.compile(r"(?<!\$)\{\{|\{%|cookiecutter\.")


def rendered_text_files(project: Path) -> list[Path]:
    files = []
    for path in sorted(project.rglob("*")):
        if path.is_file():
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            files.append(path)
    return files


def assert_renders_cleanly(result: Bake) -> None:
    """Valid TOML and Python everywhere, and no Jinja left in any text file."""
    assert result.exit_code == 0, result.stderr
    for path in rendered_text_files(result.project):
        text = path.read_text(encoding="utf-8")
        leftovers = [m.group() for m in LEFTOVER_TAG.finditer(text)]
        assert not leftovers, f"{path.relative_to(result.project)}: leftover {leftovers}"
        if path.suffix == ".toml":
            tomllib.loads(text)
        elif path.suffix == ".py":
            compile(text, str(path), "exec")


def assert_lints_and_tests(env: ProjectEnv, project: Path, *test_args: str) -> None:
    for target in ("lint", "test"):
        args = [f"PYTEST_ARGS={' '.join(test_args)}"] if target == "test" and test_args else []
        result = env.make(project, target, *args)
        assert result.returncode == 0, f"make {target}\n{result.stdout}\n{result.stderr}"


def test_default_bake_names_follow_project_name(default_bake: Bake) -> None:
    """The slug and package name are derived from project_name."""
    assert default_bake.project.name == "my-service"
    assert default_bake.package_name == "my_service"


def test_default_bake_renders_cleanly(default_bake: Bake) -> None:
    """The default bake has valid TOML and Python and no leftover template tags."""
    assert_renders_cleanly(default_bake)


@pytest.mark.slow
def test_default_bake_passes_lint_and_its_own_tests(
    default_bake: Bake, project_env: ProjectEnv
) -> None:
    """make lint and make test are green, with zero findings, on the default bake."""
    assert_lints_and_tests(project_env, default_bake.project)


@pytest.mark.parametrize("answers", OPTION_BAKES)
@pytest.mark.slow
def test_option_bake_lints_and_tests(
    tmp_path: Path, answers: dict[str, str], project_env: ProjectEnv
) -> None:
    """Each option value on its own renders cleanly, lints and passes its unit tests.

    The live serving and reliability suites run once, on the default bake: no option here
    changes the serving stack, so repeating them would only multiply the run time.
    """
    result = bake(tmp_path, **answers)

    assert_renders_cleanly(result)
    assert_lints_and_tests(project_env, result.project, "tests/unit")


@pytest.mark.parametrize("license_name", DEFAULT_CONTEXT["license"])
def test_license_file_matches_the_choice(tmp_path: Path, license_name: str) -> None:
    """LICENSE holds the chosen license's text and pyproject names it as an SPDX expression."""
    result = bake(tmp_path, license=license_name, author_name="Ada Lovelace")

    text = (result.project / "LICENSE").read_text(encoding="utf-8")
    first_lines = {
        "MIT": "MIT License",
        "Apache-2.0": "Apache License",
        "BSD-3-Clause": "BSD 3-Clause License",
        "Proprietary": "Copyright (c)",
    }
    assert first_lines[license_name] in text[:300]
    if license_name != "Apache-2.0":  # Apache's text names no holder; NOTICE-style by design
        assert "Ada Lovelace" in text
    declared = tomllib.loads((result.project / "pyproject.toml").read_text(encoding="utf-8"))
    expected = "LicenseRef-Proprietary" if license_name == "Proprietary" else license_name
    assert declared["project"]["license"] == expected
