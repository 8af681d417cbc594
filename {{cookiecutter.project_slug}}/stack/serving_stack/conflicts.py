"""Every conflict between an app's requirements and the stack's ranges, at once: run as a file,
`python stack/serving_stack/conflicts.py [--requirement FILE | PROJECT_DIR]` (README.md,
`serving-check`), before the stack is installed, so the standard library only.

pip's resolver names one conflict per run, so adopting an app pinned outside the stack's
ranges took one `serving-install` per conflict. Here each of the app's requirements is
resolved on its own beside the stack's (pip's `--dry-run`, in parallel): every requirement
pip cannot install with the stack is listed with pip's own reason, transitive ones included.
Two of the app's requirements that clash only with each other are the app's own matter.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

STACK = Path(__file__).resolve().parent.parent / "pyproject.toml"
USAGE = "usage: conflicts.py [--requirement FILE | PROJECT_DIR]"
# pip's explanation starts here and ends at the blank line after it.
CAUSE = "The conflict is caused by:"


def declared(pyproject: Path) -> list[str]:
    """A pyproject.toml's [project] dependencies."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    return list(project.get("dependencies", []))


def listed(requirements: Path) -> list[str]:
    """A requirements file's requirements: no comment, option, include or hash."""
    found = []
    for line in requirements.read_text(encoding="utf-8").splitlines():
        requirement = line.split(" #", 1)[0].removesuffix("\\").strip()
        if requirement and not requirement.startswith(("#", "-")):
            found.append(requirement)
    return found


def app_requirements(arguments: list[str]) -> list[str]:
    """What the arguments name, as serving.mk's APP_REQUIREMENTS names it; SystemExit if bad."""
    if len(arguments) == 2 and arguments[0] in {"--requirement", "-r"}:
        path = Path(arguments[1])
        if not path.is_file():
            sys.exit(f"conflicts.py: {path} is not a file")
        return listed(path)
    if len(arguments) == 1 and (pyproject := Path(arguments[0]) / "pyproject.toml").is_file():
        return declared(pyproject)
    sys.exit(f"conflicts.py: {' '.join(arguments) or 'nothing'} names no requirements. {USAGE}")


def conflict(stack: list[str], requirement: str) -> str | None:
    """pip's reason ``requirement`` cannot be installed beside ``stack``; None if it can."""
    dry_run = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    command = [*dry_run, "--disable-pip-version-check", *stack, requirement]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode == 0:
        return None
    lines = (result.stdout + result.stderr).splitlines()
    if CAUSE in lines:
        start = lines.index(CAUSE) + 1
        end = lines.index("", start) if "" in lines[start:] else len(lines)
        # pip calls every requirement given the user's: the app's is one, the others the stack's.
        mine = f"The user requested {requirement}"
        causes = [line.strip() for line in lines[start:end]]
        return "; ".join(
            cause if cause == mine else cause.replace("The user requested", "the stack requests")
            for cause in causes
        )
    errors = [line for line in lines if line.startswith("ERROR:")] or lines[-1:]
    return errors[0] if errors else f"pip exited {result.returncode}"


def main(arguments: list[str]) -> int:
    stack, app = declared(STACK), app_requirements(arguments)
    with ThreadPoolExecutor(max_workers=4) as pool:
        reasons = list(pool.map(lambda requirement: conflict(stack, requirement), app))
    found = [(req, reason) for req, reason in zip(app, reasons, strict=True) if reason]
    for requirement, reason in found:
        print(f"{requirement}: {reason}")
    if found:
        print(f"{len(found)} of {len(app)} requirements conflict with the stack's ranges")
        return 1
    print(f"requirements: {len(app)}, none in conflict with the stack's ranges")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
