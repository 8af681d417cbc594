"""Every test of the stack runs in an empty directory, without the shell's stack variables,
and leaves the loggers as it found them; the helpers of the tests that start nginx."""

import http.client
import logging
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving_stack.settings import REMOVED, variable_names

SYSTEM_PATH = f"{os.environ.get('PATH', os.defpath)}{os.pathsep}/usr/sbin"
NGINX = shutil.which("nginx", path=SYSTEM_PATH)
# What gunicorn's logger class configures when a test builds a worker: the project's own
# tests, run after these in the same process, configure the same loggers their way.
LOGGERS = ("", "gunicorn.error", "gunicorn.access", "uvicorn", "uvicorn.error", "uvicorn.access")


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A developer's own .env and variables must not count; an app is named, as deploys do."""
    monkeypatch.chdir(tmp_path)
    for name in [*variable_names(), *REMOVED]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("APP_MODULE", "any.module:app")
    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [(lg.handlers[:], lg.filters[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for logger, (handlers, filters, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:], logger.filters[:] = handlers, filters
        logger.setLevel(level)
        logger.propagate = propagate


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ask(port: int, path: str, host: str = "localhost") -> tuple[int, str, bytes]:
    """Status, request id and body of a GET with this Host."""
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        client.request("GET", path, headers={"Host": host})
        answer = client.getresponse()
        return answer.status, answer.getheader("X-Request-ID", ""), answer.read()
    finally:
        client.close()
