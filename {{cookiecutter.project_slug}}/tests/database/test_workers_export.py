"""gunicorn.conf.py tells the workers how many they are, so their pools split the budget."""

from __future__ import annotations

import os

import pytest

from serving.conftest import DEPLOY, load_module


@pytest.mark.parametrize("count", ["2", "5"])
def test_the_decided_worker_count_is_exported(monkeypatch: pytest.MonkeyPatch, count: str) -> None:
    """With no WEB_CONCURRENCY, gunicorn decides from the CPUs; GUNICORN_WORKERS carries it."""
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    # Set, so monkeypatch removes what the module writes when the test ends.
    monkeypatch.setenv("GUNICORN_WORKERS", "not yet")
    monkeypatch.setenv("MIN_WORKERS", count)
    monkeypatch.setenv("MAX_WORKERS", count)
    conf = load_module(DEPLOY / "gunicorn.conf.py", f"gunicorn_conf_workers_{count}")
    assert conf.workers == int(count)
    assert os.environ["GUNICORN_WORKERS"] == count
