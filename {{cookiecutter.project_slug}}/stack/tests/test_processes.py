"""gunicorn's config, worker class and count, the supervisor's line relay and its one-line
refusals, in process: gunicorn's classes are built, not started."""

import json
import os
import sys
from pathlib import Path

import pytest
from gunicorn.app.wsgiapp import WSGIApplication
from gunicorn.config import Chdir

from serving_stack import gunicorn_config, log_relay, startup
from serving_stack.settings import APP_DEADLINE_NAME, OWN_CONFIGS, load
from serving_stack.websocket_protocol import BoundedWebSocketProtocol, SessionBounds


def test_gunicorn_conf_and_worker_follow_the_settings_then_gunicorn_cmd_args(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stack's gunicorn config, loaded as the supervisor does with the deadline in .env only: a
    0660 socket, the watchdog at least the deadline, no control socket; gunicorn's own
    GUNICORN_CMD_ARGS sets what the stack does not derive. The worker subclass hands uvicorn what
    UvicornWorker does not map."""
    (tmp_path / ".env").write_text(f"{APP_DEADLINE_NAME}=90.5\n", encoding="utf-8")
    monkeypatch.setenv("LIMIT_CONCURRENCY", "4321")
    monkeypatch.setenv("WEBSOCKET_MAX_FRAGMENTS", "7")
    monkeypatch.setenv("GUNICORN_CMD_ARGS", f"--max-requests=17 --worker-tmp-dir={tmp_path}")
    monkeypatch.setattr(sys, "argv", ["gunicorn", "-c", str(OWN_CONFIGS["gunicorn_conf"])])
    monkeypatch.setattr(sys, "path", sys.path[:])  # gunicorn adds its working directory
    monkeypatch.setattr(Chdir, "default", str(tmp_path))  # its cwd, else the one at its import
    monkeypatch.setenv("GUNICORN_WORKERS", "")  # restored after the workers() below sets it
    gunicorn_config.settings.cache_clear()  # read once per process: again for this test
    gunicorn_config.workers.cache_clear()
    cfg = WSGIApplication().cfg
    log = gunicorn_config.JsonLogger(cfg)
    worker = gunicorn_config.Worker(0, os.getpid(), [], None, 30, cfg, log)
    worker.tmp.close()  # its heartbeat file: only its config is looked at
    assert (worker.config.timeout_graceful_shutdown, cfg.max_requests) == (90.5, 17)
    assert worker.config.limit_concurrency == 4321
    ws = worker.config.ws  # the bounded protocol, with the session's bounds
    assert (ws.func, ws.keywords) == (BoundedWebSocketProtocol, {"bounds": SessionBounds(7, 100)})
    assert (worker.config.ws_max_size, worker.config.ws_per_message_deflate) == (1 << 20, False)
    conf = [cfg.bind, cfg.umask, cfg.timeout, cfg.keepalive, cfg.control_socket_disable]
    assert conf == [["unix:/run/app/gunicorn.sock"], 0o117, 91, 75, True]
    assert os.environ["GUNICORN_WORKERS"] == str(cfg.workers), "the app's share, exported"


@pytest.mark.parametrize(
    ("environ", "cpus", "decided"),
    [
        ({}, 1, (2, "cpus")),  # at least 2
        ({}, 64, (8, "cpus")),  # at most 8
        ({}, 4, (4, "cpus")),
        ({"WEB_CONCURRENCY": "3"}, 64, (3, "WEB_CONCURRENCY")),
    ],
)
def test_worker_count(environ: dict[str, str], cpus: int, decided: tuple[int, str]) -> None:
    """WEB_CONCURRENCY when set, else one worker per usable CPU within 2..8."""
    assert gunicorn_config.worker_count(load(environ), cpus) == decided


def test_the_relay_writes_whole_lines_only() -> None:
    """Output cut anywhere is written in whole lines; a line without end is passed on in pieces
    past the limit; the end flushes the rest."""
    relay = log_relay.LineRelay(lambda block: block.upper() + b"\n")
    assert relay.feed(b"ab") == b""
    assert relay.feed(b"c\nde") == b"ABC\n"
    assert relay.feed(b"f\ngh\n") == b"DEF\nGH\n"
    assert relay.feed(b"tail") == b""
    assert relay.feed(b"") == b"TAIL\n"
    long = b"x" * (log_relay.LineRelay.LIMIT + 1)
    assert relay.feed(long) == long.upper() + b"\n"


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"APP_MODULE": ""}, ["APP_MODULE is not set"]),
        ({"NGINX_BIN": "{tmp}/nginx"}, ["apt-get install -y nginx-light"]),
        # A RUN_DIR that cannot be made: a file stands in its way.
        ({"RUN_DIR": "{tmp}/file/x", "SERVE_AS_ROOT": "on"}, ["RUN_DIR={tmp}/file/x", "Not a dir"]),
    ],
    ids=["no app", "no nginx", "bad RUN_DIR"],
)
def test_the_supervisor_explains_what_stops_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], environ: dict[str, str], said: list[str]
) -> None:
    """Without an app, without nginx, or with a RUN_DIR it cannot use: exit 1 and one JSON
    error line naming the cause (the variable; the package to install; the directory and the
    OS error), no traceback."""
    (tmp_path / "file").write_text("not a directory\n")
    given = {name: value.format(tmp=tmp_path) for name, value in environ.items()}
    settings = load({"RUN_DIR": str(tmp_path), "APP_MODULE": "any.module:app", **given})

    assert startup.serve(settings) == 1
    *_, line = [json.loads(raw) for raw in capfd.readouterr().out.splitlines()]
    assert line["level"] == "error"
    assert all(text.format(tmp=tmp_path) in line["message"] for text in said), line
