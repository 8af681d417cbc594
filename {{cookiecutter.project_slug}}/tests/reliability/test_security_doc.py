"""docs/security.md names only tests that exist, and every reliability test module is named.

The page is the list of promises a reader checks the stack against: a renamed or deleted
test must not leave a promise pointing at nothing.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_named_test_exists(project_root: Path) -> None:
    """Each `tests/...py::name` on the page is a test function in that file."""
    page = (project_root / "docs" / "security.md").read_text(encoding="utf-8")
    named = _NAMED.findall(page)
    assert len(named) > 20
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not (project_root / path).is_file()
        or (name and name not in _functions(project_root / path))
    ]
    assert missing == []


def test_every_reliability_module_is_on_the_page(project_root: Path) -> None:
    """A new module in tests/reliability/ gets its promise listed (except this one)."""
    page = (project_root / "docs" / "security.md").read_text(encoding="utf-8")
    modules = {
        f"tests/reliability/{path.name}"
        for path in (project_root / "tests" / "reliability").glob("test_*.py")
    }
    this = "tests/reliability/test_security_doc.py"
    assert {module for module in modules if module not in page} <= {this}
