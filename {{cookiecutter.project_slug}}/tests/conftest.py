"""Fixtures every test directory may use. Each directory keeps its own in its conftest.py."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The generated project's top directory (where pyproject.toml is)."""
    return Path(__file__).resolve().parent.parent
