"""Where the baked project's package is: its import name, from $EXPERIMENTS_PACKAGE.

experiments/__main__.py sets the variable from the project the lab discovered
(lab/project.py) before it starts any server, so the servers (separate processes) import the
same package.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

VARIABLE = "EXPERIMENTS_PACKAGE"


def package_module(relative: str) -> ModuleType:
    """Import `<package>.<relative>` from the baked project."""
    return importlib.import_module(f"{os.environ[VARIABLE]}.{relative}")
