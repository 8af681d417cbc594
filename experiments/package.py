"""Where the baked project's package is: its import name, from $EXPERIMENTS_PACKAGE.

experiments/__main__.py sets the variable from the bake's src/ directory before it starts any
server, so the servers (separate processes) import the same package.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

VARIABLE = "EXPERIMENTS_PACKAGE"


def discover(project: Path) -> str:
    """The one package under the bake's src/ (cookiecutter renders exactly one)."""
    (name,) = [p.name for p in (project / "src").iterdir() if (p / "__init__.py").is_file()]
    return name


def package_module(relative: str) -> ModuleType:
    """Import `<package>.<relative>` from the baked project."""
    return importlib.import_module(f"{os.environ[VARIABLE]}.{relative}")
