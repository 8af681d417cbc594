"""The lab's own tests run in a generated project's environment, against that project.

    LAB_PROJECT=BAKE PYTHONPATH=TEMPLATE:BAKE/src BAKE_PYTHON -m pytest lab/tests

tests/test_bench.py runs them so against the default bake. The project is found the way
./scripts/bench finds it (lab/project.py); its factory goes in $LAB_FACTORY for lab/apps.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.project import FACTORY_VARIABLE, Project, discover


@pytest.fixture(scope="session", autouse=True)
def project() -> Project:
    found = discover(Path(os.environ["LAB_PROJECT"]))
    os.environ[FACTORY_VARIABLE] = found.need_factory()
    return found
