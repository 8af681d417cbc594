"""Hostile and invalid answers: each renders a valid project or is refused in one line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from .conftest import bake

LONG_NAME = "Very Long " * 15  # 150 characters: accepted, the slug is cut to 63
SERVING = {"layout": "serving-only"}


@pytest.mark.parametrize(
    "answers",
    [
        pytest.param({"project_name": 'Bob\'s "Quoted" Service'}, id="quotes-apostrophes"),
        pytest.param(
            {"description": r"C:\new\table 'single' \"double\" \u0041 \\"}, id="backslashes"
        ),
        pytest.param({"description": "'''\"\"\" triple quotes and a # hash"}, id="triple-quotes"),
        pytest.param({"author_name": "Zoë Ångström 日本語 😀"}, id="unicode-author"),
        pytest.param({"project_name": "Café Ünïcödé ☃"}, id="unicode-name"),
        pytest.param({"project_name": LONG_NAME.strip()}, id="long-name"),
        pytest.param({"description": "${HOME} $(id) `id` <b>&amp; %s {0}"}, id="shell-and-format"),
        pytest.param(
            SERVING | {"app_module": "Backend_2.api.v1.server:application"}, id="deep-app-module"
        ),
    ],
)
def test_hostile_answer_renders_valid_project(tmp_path: Path, answers: dict[str, str]) -> None:
    """Quotes, backslashes, unicode and long names land verbatim in valid TOML and Python."""
    result = bake(tmp_path, **answers)

    assert result.exit_code == 0, result.stderr
    pyproject = tomllib.loads((result.project / "pyproject.toml").read_text(encoding="utf-8"))
    assert len(pyproject["project"]["name"]) <= 63
    if "description" in answers:
        assert pyproject["project"]["description"] == answers["description"]
    if "author_name" in answers:
        assert pyproject["project"]["authors"][0]["name"] == answers["author_name"]
    if "app_module" in answers:
        # The make fragment and the image name it to the stack (which has no default).
        deploy = result.project / "deploy"
        makefile = (deploy / "serving.mk").read_text(encoding="utf-8")
        dockerfile = (deploy / "Dockerfile").read_text(encoding="utf-8")
        assert f"\nexport APP_MODULE ?= {answers['app_module']}\n" in makefile
        assert f"    APP_MODULE={answers['app_module']}\n" in dockerfile
    for source in result.project.rglob("*.py"):
        compile(source.read_text(encoding="utf-8"), str(source), "exec")


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"project_name": "Two\nLines"}, "project_name must be one line of printable text"),
        ({"description": "first\nsecond"}, "description must be one line of printable text"),
        ({"author_name": "tab\there"}, "author_name must be one line of printable text"),
        ({"project_name": "   "}, "project_name must not be empty"),
        ({"project_name": "x" * 201}, "project_name is 201 characters long; the limit is 200"),
        ({"project_name": "!!!"}, "project_name '!!!' has no letters or digits"),
        ({"project_name": "42 Service"}, "project_slug '42-service' must start with a letter"),
        ({"project_slug": "My_Service"}, "project_slug 'My_Service' must start with a letter"),
        ({"project_slug": "a" * 64}, "project_slug 'aaaa"),
        ({"package_name": "a" * 41}, "package_name 'aaaa"),
        ({"package_name": "My-Package"}, "package_name 'My-Package' must be a lowercase"),
        ({"package_name": "class"}, "package_name 'class' is a Python keyword"),
        ({"package_name": "json"}, "package_name 'json' would shadow the standard library module"),
        ({"package_name": "fastapi"}, "package_name 'fastapi' would shadow the dependency"),
        ({"author_email": "not-an-email"}, "author_email 'not-an-email' is not an email address"),
        ({"author_email": "a@b"}, "author_email 'a@b' is not an email address"),
        (SERVING | {"app_module": "main"}, "app_module 'main' must be module.path:attribute"),
        (SERVING | {"app_module": "main:"}, "app_module 'main:' must be module.path:attribute"),
        (SERVING | {"app_module": ":app"}, "app_module ':app' must be module.path:attribute"),
        (SERVING | {"app_module": "main:create_app()"}, "app_module 'main:create_app()' must be"),
        (SERVING | {"app_module": "main:app; id"}, "app_module 'main:app; id' must be"),
        (SERVING | {"app_module": "my-app.main:app"}, "app_module 'my-app.main:app' must be"),
        (SERVING | {"app_module": "app..main:app"}, "app_module 'app..main:app' must be"),
        (SERVING | {"app_module": "a:b:c"}, "app_module 'a:b:c' must be module.path:attribute"),
        (SERVING | {"app_module": "mäin:app"}, "app_module 'mäin:app' must be module.path"),
        (SERVING | {"app_module": "$(id):app"}, "app_module '$(id):app' must be"),
        (SERVING | {"app_module": "main:app\nx"}, "app_module must be one line of printable text"),
        (SERVING | {"app_module": "   "}, "app_module must not be empty"),
        (SERVING | {"app_module": "class.main:app"}, "contains the Python keyword 'class'"),
        ({"app_module": "other.main:app"}, "'other.main:app' is for layout=serving-only"),
        ({"jobs": "procrastinate"}, "jobs=procrastinate needs database=postgresql: the jobs"),
        (SERVING | {"jobs": "procrastinate"}, "jobs=procrastinate needs database=postgresql"),
        (
            {"database": "postgresql", "jobs": "procrastinate", "package_name": "psycopg"},
            "package_name 'psycopg' would shadow jobs=procrastinate's dependency",
        ),
    ],
)
def test_bad_answer_is_refused_in_one_line(
    tmp_path: Path, answers: dict[str, str], message: str
) -> None:
    """The hook names the bad answer and why, exits non-zero, and nothing is left behind."""
    result = bake(tmp_path, **answers)

    assert result.exit_code != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert message in errors[0]
    assert list(tmp_path.iterdir()) == []


def test_choice_outside_the_list_is_refused(tmp_path: Path) -> None:
    """cookiecutter itself refuses a python_version that is not one of the choices."""
    result = bake(tmp_path, python_version="3.10")

    assert result.exit_code != 0
    assert "3.10" in result.stderr
    assert list(tmp_path.iterdir()) == []
