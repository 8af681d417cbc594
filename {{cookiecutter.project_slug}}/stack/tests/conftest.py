"""Every test of the stack runs in an empty directory, without the shell's stack variables."""

from pathlib import Path

import pytest

from serving_stack.settings import variable_names


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings read .env from the working directory and the environment: a developer's
    own must not count. An app to serve is named, as every deploy names one."""
    monkeypatch.chdir(tmp_path)
    for name in variable_names():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("APP_MODULE", "any.module:app")
