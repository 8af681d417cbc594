"""Which service a project directory holds: its app package, its stack package, what it serves.

The lab measures any project generated from this template, a user's own service included, so
it assumes none of the template's default names. It reads them from the directory:

- the stack package: ``serving_stack`` in stack/ (the same in every bake);
- what gunicorn serves: ``APP_MODULE`` from the caller's environment, else the one package in
  src/ with ``main:app`` (the Makefile's default);
- the app factory the cost gate and the bare variant need: ``create_app`` beside the app in
  APP_MODULE's module, or ``LAB_FACTORY`` (``module:function``) when the app is built
  otherwise;
- whether the app has the example's database: ``<package>.db`` exists (database=postgresql).

Runs in the project's Python (it finds the app's module). Depends on nothing else.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

# The factory override, for an app not built by a create_app() beside it.
FACTORY_VARIABLE = "LAB_FACTORY"


class ProjectError(RuntimeError):
    """The directory is no service the lab can measure; the message says why, in one line."""


@dataclass(frozen=True)
class Project:
    root: Path
    package: str  # the app's top-level package (APP_MODULE's first part)
    stack: str  # the serving stack's package (supervisor, settings)
    app_module: str  # module:attribute, what gunicorn serves
    factory: str | None  # module:function building a fresh app; None when there is none
    database: bool  # the app keeps its data in a database (the items example)

    @property
    def import_paths(self) -> list[str]:
        """Where the app's and the stack's packages are, for a project not installed."""
        return [str(self.root / "src"), str(self.root / "stack")]

    @property
    def nginx_conf(self) -> Path:
        """The stack's own nginx.conf template, which the lab's variants edit."""
        return self.root / "stack" / "serving_stack" / "nginx.conf"

    @property
    def gunicorn_conf(self) -> Path:
        return self.root / "stack" / "serving_stack" / "gunicorn_conf.py"

    def need_factory(self) -> str:
        if self.factory is None:
            raise ProjectError(
                f"{self.app_module} has no create_app() beside it: the lab builds the app "
                f"several times (bare, default); name a factory with {FACTORY_VARIABLE}="
                "module:function"
            )
        return self.factory


def _app_package(src: Path) -> str:
    found = sorted(path.parent.name for path in src.glob("*/__init__.py"))
    if len(found) != 1:
        raise ProjectError(
            f"expected one app package under {src}, found {found or 'none'}: set APP_MODULE"
        )
    return found[0]


def _factory(app_module: str) -> str | None:
    override = os.environ.get(FACTORY_VARIABLE)
    if override:
        return override
    module_name = app_module.partition(":")[0]
    # Read, not imported: importing builds the app, and an app that needs its database
    # refuses to without DATABASE_URL, which the cost gate does not need.
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise ProjectError(f"cannot find the app's module {module_name} (APP_MODULE)")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return f"{module_name}:create_app" if "create_app" in defined else None


def discover(root: Path) -> Project:
    """The service in ``root`` (a project directory with src/ and stack/)."""
    root = root.resolve()
    src, stack = root / "src", "serving_stack"
    for needed in (
        src,
        root / "stack" / stack / "settings.py",
        root / "stack" / stack / "nginx.conf",
    ):
        if not needed.exists():
            raise ProjectError(f"{root} is no generated project: {needed.name} is missing")
    # APP_MODULE as production reads it: the caller's environment, else the Makefile's default.
    app_module = os.environ.get("APP_MODULE") or f"{_app_package(src)}.main:app"
    package = app_module.partition(":")[0].split(".")[0]
    database = importlib.util.find_spec(f"{package}.db") is not None
    return Project(root, package, stack, app_module, _factory(app_module), database)
