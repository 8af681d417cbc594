"""Remove the directories of options the answers turned off, after the project is rendered.

cookiecutter renders this file with Jinja first and runs it inside the new project. The
answers arrive as one JSON document and are read as data (see pre_gen_project.py for why).
Whole directories are removed here because cookiecutter cannot skip a directory by name
without leaving an empty one behind.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CONTEXT: dict[str, object] = json.loads(r"""{{ cookiecutter | tojson }}""")


def disabled_paths(context: dict[str, object]) -> list[Path]:
    """The rendered paths that belong to options switched off in ``context``."""
    paths = []
    if context["ci"] != "github":
        paths.append(Path(".github"))
    if context["kubernetes"] is not True:
        paths.append(Path("k8s"))
    return paths


def main() -> None:
    for path in disabled_paths(CONTEXT):
        shutil.rmtree(path)


if __name__ == "__main__":
    main()
