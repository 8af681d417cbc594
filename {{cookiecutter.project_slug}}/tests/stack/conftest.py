"""Fixtures of the stack's unit tests: each runs in its own empty working directory."""

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings read .env from the working directory: a developer's own must not count."""
    monkeypatch.chdir(tmp_path)
