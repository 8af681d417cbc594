"""The stack's dependency ranges against what is installed: a broken environment is refused
at start in one line, not met later as an ImportError in a worker. Standard library only."""

from __future__ import annotations

import re
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

_REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*([^;]*)")
_BOUND = re.compile(r"(>=|<=|==|!=|>|<)\s*([0-9][0-9.]*)")
_COMPARE: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version, padded so 1.0 and 1 compare equal."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    numbers = tuple(int(n) for n in found.group().split(".")) if found else ()
    return numbers + (0,) * (4 - len(numbers))


def problems(requirements: Iterable[str], installed: Callable[[str], str | None]) -> list[str]:
    """Each requirement the installed versions break, as `name version (needs bounds)`."""
    found = []
    for requirement in requirements:
        parsed = _REQUIREMENT.match(requirement)
        if parsed is None:
            continue
        name, bounds = parsed.group(1), parsed.group(2).strip()
        version = installed(name)
        if version is None:
            found.append(f"{name} missing (needs {bounds or 'any version'})")
        elif not all(
            _COMPARE[op](release(version), release(bound)) for op, bound in _BOUND.findall(bounds)
        ):
            found.append(f"{name} {version} (needs {bounds})")
    return found


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def refusal() -> str | None:
    """One line when the environment breaks the stack's requirements; None if it fits or the
    stack is not installed (run from its source)."""
    try:
        requirements = metadata.requires("serving-stack") or []
    except metadata.PackageNotFoundError:
        return None
    if broken := problems(requirements, _installed):
        return (
            f"this environment breaks serving-stack's requirements: {'; '.join(broken)}:"
            " install the stack with the app in one resolver pass (stack/README.md)"
        )
    return None
