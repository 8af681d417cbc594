"""gunicorn's configuration and worker class, the runner's line relay and its refusal without
nginx. In process, no network: gunicorn's classes are built, not started. (The log formatter's
edge cases, nginx's lines included, are the template's tests: tests/test_log_format.py.)
"""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path
from typing import Any

import pytest
from gunicorn.config import Config

from {{ cookiecutter.package_name }}_stack import gunicorn_config, runner
from {{ cookiecutter.package_name }}_stack.settings import load

GUNICORN_CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


@pytest.fixture
def fresh_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """gunicorn_config reads the settings once per process: read them again for this test."""
    monkeypatch.setenv("RUN_DIR", str(tmp_path))
    gunicorn_config.settings.cache_clear()
    gunicorn_config.workers.cache_clear()


@pytest.mark.usefixtures("fresh_settings")
def test_gunicorn_conf_keeps_the_fixed_design() -> None:
    """The values the stack relies on: a 0660 socket, the 60 s watchdog, no control socket."""
    conf: dict[str, Any] = runpy.run_path(str(GUNICORN_CONF))

    assert conf["umask"] == 0o117, "the socket must be 0660: owner and group read/write only"
    assert conf["bind"] == [f"unix:{Path(os.environ['RUN_DIR']) / 'gunicorn.sock'}"]
    assert (conf["timeout"], conf["graceful_timeout"], conf["keepalive"]) == (60, 30, 75)
    assert conf["control_socket_disable"] is True
    assert conf["worker_class"] is gunicorn_config.Worker
    assert conf["workers"] >= 2


@pytest.mark.usefixtures("fresh_settings")
def test_worker_passes_graceful_timeout_and_concurrency_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker subclass hands uvicorn what UvicornWorker does not map."""
    monkeypatch.setenv("LIMIT_CONCURRENCY", "123")
    cfg = Config()
    cfg.set("graceful_timeout", 17)
    cfg.set("worker_tmp_dir", str(tmp_path))
    log = gunicorn_config.JsonLogger(cfg)
    worker = gunicorn_config.Worker(0, os.getpid(), [], None, 30, cfg, log)
    try:
        assert worker.config.timeout_graceful_shutdown == 17
        assert worker.config.limit_concurrency == 123
    finally:
        worker.tmp.close()


@pytest.mark.parametrize(
    ("environ", "cpus", "decided"),
    [
        ({}, 1, (2, "cpus")),  # at least MIN_WORKERS
        ({}, 64, (8, "cpus")),  # at most MAX_WORKERS
        ({"WORKERS_PER_CORE": "1.5"}, 4, (6, "cpus")),
        ({"WEB_CONCURRENCY": "3"}, 64, (3, "WEB_CONCURRENCY")),
    ],
)
def test_worker_count(environ: dict[str, str], cpus: int, decided: tuple[int, str]) -> None:
    """WEB_CONCURRENCY when set, else CPUs x WORKERS_PER_CORE within MIN..MAX_WORKERS."""
    assert gunicorn_config.worker_count(load(environ), cpus) == decided


def test_the_relay_writes_whole_lines_only() -> None:
    """Output cut anywhere by the pipe is written line by line; a line without end is
    passed on in pieces past the limit; the end flushes the rest."""
    relay = runner.LineRelay(lambda block: block.upper() + b"\n")
    assert relay.feed(b"ab") == b""
    assert relay.feed(b"c\nde") == b"ABC\n"
    assert relay.feed(b"f\ngh\n") == b"DEF\nGH\n"
    assert relay.feed(b"tail") == b""
    assert relay.feed(b"") == b"TAIL\n"
    long = b"x" * (runner.LineRelay.LIMIT + 1)
    assert relay.feed(long) == long.upper() + b"\n"


def test_runner_explains_a_missing_nginx(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without nginx the runner exits 1 with one JSON line naming the package to install."""
    settings = load({"NGINX_BIN": str(tmp_path / "nginx"), "RUN_DIR": str(tmp_path)})

    assert runner.serve(settings) == 1
    (line,) = [json.loads(raw) for raw in capsys.readouterr().out.splitlines()]
    assert line["level"] == "error"
    assert "apt-get install -y nginx-light" in line["message"]


def test_runner_explains_a_run_dir_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A RUN_DIR that cannot be made (a file stands in its way): one JSON line naming it and
    the OS error, exit 1, no traceback."""
    (tmp_path / "file").write_text("not a directory\n")
    run_dir = tmp_path / "file" / "run"
    settings = load({"RUN_DIR": str(run_dir), "SERVE_AS_ROOT": "on"})

    assert runner.serve(settings) == 1
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["level"] == "error"
    assert f"RUN_DIR={run_dir}" in line["message"]
    assert "Not a directory" in line["message"]
