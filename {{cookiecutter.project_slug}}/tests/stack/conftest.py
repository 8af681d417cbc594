"""Fixtures of the stack's unit tests: each runs in its own empty working directory."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def _no_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no .env is: the settings read .env from the working directory, and a
    developer's own .env must not change these results."""
    monkeypatch.chdir(tmp_path)
