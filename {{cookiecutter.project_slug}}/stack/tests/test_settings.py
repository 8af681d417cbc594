"""The stack's settings: every variable at a non-default value, a boundary and a wrong value;
the timeout chain from the deadline, .env's included; the README's table of variables."""

import re
from pathlib import Path
from typing import Any

import pytest

from serving_stack import nginx_conf
from serving_stack.settings import (
    APP_CORS_NAME,
    APP_DEADLINE_NAME,
    OWN_CONFIGS,
    SettingError,
    StackSettings,
    load,
    variable_names,
)

# variable, a non-default value and what it reads as, a boundary, a wrong value.
CASES: list[tuple[str, str, Any, str, str]] = [
    ("PORT", "8000", 8000, "65535", "0"),
    ("METRICS_PORT", "9100", 9100, "1", "65536"),
    ("LISTEN_ADDRESS", "::1", "::1", "::", "localhost"),
    ("RUN_DIR", "/srv/run", Path("/srv/run"), "/run/app-2_x.y", "/run/a b"),
    ("TRUSTED_PROXIES", "10.0.0.0/8, ::1", ("10.0.0.0/8", "::1/128"), "0.0.0.0/1 ::/1", "::;x"),
    ("ALLOWED_HOSTS", ".a.example API.test", (".a.example", "api.test"), f"{'a' * 63}.b", "a_b.c"),
    ("NGINX_ACCESS_LOG", "off", False, "1", "maybe"),
    ("NGINX_WORKER_PROCESSES", "3", "3", "9999", "4; user root"),
    ("NGINX_BIN", "/opt/nginx", "/opt/nginx", "nginx", "nginx -g x"),
    ("NGINX_TEMP_DIR", "/tmp/nginx", Path("/tmp/nginx"), "t", "/tmp/a;b"),  # noqa: S108
    # Any file is taken as given (a fork of the stack's); a missing one is refused.
    ("NGINX_CONF", str(OWN_CONFIGS["nginx_conf"]), OWN_CONFIGS["nginx_conf"], __file__, "n.conf"),
    ("GUNICORN_CONF", __file__, Path(__file__), str(OWN_CONFIGS["gunicorn_conf"]), "/srv/g.py"),
    ("NGINX_LOCATIONS", __file__, Path(__file__), str(OWN_CONFIGS["nginx_conf"]), "/srv/l.conf"),
    ("STARTUP_TIMEOUT", "5", 5.0, "86400", "0"),
    ("SERVE_AS_ROOT", "on", True, "no", "2"),
    ("RATE_LIMIT", "5", 5, "0", "-1"),
    ("RATE_LIMIT_BURST", "0", 0, "1000000", "1.5"),
    ("RATE_LIMIT_QUEUE_SECONDS", "0", 0, "60", "61"),
    ("RATE_LIMIT_DRY_RUN", "on", True, "off", "dry"),
    ("CLIENT_IPV6_PREFIX", "48", 48, "128", "60"),  # a multiple of 8 from 32 to 128
    ("CONNECTIONS_PER_CLIENT", "0", 0, "65535", "65536"),
    ("WEBSOCKETS_PER_CLIENT", "0", 0, "65535", "-1"),
    ("WEBSOCKETS_PER_POD", "64", 64, "16384", "0"),
    ("STREAMS_PER_POD", "2000", 2000, "1", "16385"),
    ("WEBSOCKET_MAX_MESSAGE_BYTES", "16777216", 1 << 24, "1024", "1023"),
    ("WEBSOCKET_MAX_FRAGMENTS", "1", 1, "65536", "0"),
    ("WEBSOCKET_MESSAGE_RATE", "0", 0, "100000", "-1"),
    ("WEBSOCKET_COMPRESSION", "on", True, "off", "deflate"),
    ("WEBSOCKET_IDLE_TIMEOUT", "300", 300.0, "3", "2.5"),
    (
        APP_CORS_NAME,
        "https://a.example, http://[::1]:5173",
        ("https://a.example", "http://[::1]:5173"),
        "http://localhost:5173",
        "https://a.example/",
    ),
    (APP_DEADLINE_NAME, "45.5", 45.5, "3600", "3601"),
    ("GRACEFUL_TIMEOUT", "45", 45.0, "3600", "nan"),
    ("GUNICORN_TIMEOUT", "120", 120.0, "86400", "inf"),
    ("DRAIN_SECONDS", "5", 5.0, "600", "nan"),
    ("STOP_GRACE_PERIOD", "90", 90.0, "86400", "1s"),
    ("APP_MODULE", "main:app", "main:app", "a.b:create_app()", "main"),
    ("GUNICORN_SOCKET", "/srv/g.sock", Path("/srv/g.sock"), "g", "/r/'q'"),
    ("WEB_CONCURRENCY", "3", 3, "1024", "0"),
    ("KEEPALIVE", "120", 120, "2", "1"),
    ("LIMIT_CONCURRENCY", "0", 0, "1000000", "1.5"),
    ("LOG_LEVEL", "WARNING", "warning", "critical", "verbose"),
    ("PROMETHEUS_MULTIPROC_DIR", "/srv/m", Path("/srv/m"), "m", "/run/a;b"),
]


def test_every_variable_has_a_case() -> None:
    """Each field of the model is tested below: adding one without a case fails here."""
    assert sorted(name for name, *_ in CASES) == sorted(variable_names())


@pytest.mark.parametrize(("name", "raw", "expected", "boundary", "wrong"), CASES)
def test_each_variable(name: str, raw: str, expected: Any, boundary: str, wrong: str) -> None:
    """A non-default value is read, a boundary accepted, blank means the default, and a wrong
    value is refused in one line naming the variable and the value."""
    assert getattr(load({name: raw}), variable_names()[name]) == expected
    load({name: boundary})
    assert load({name: "  "}) == load({})
    refused = re.escape(f"{name}={wrong!r} is refused: ")
    with pytest.raises(SettingError, match=f"^{refused}[^\n]*$"):
        load({name: wrong})


@pytest.mark.parametrize(
    "proxies", ["0.0.0.0/0", "10.0.0.0/8 ::/0", "::0/0", "0.0.0.0/1,128.0.0.0/1", "::/1 8000::/1"]
)
def test_trusted_proxies_refuse_every_address(proxies: str) -> None:
    """A network of every address, or networks that add up to it (anyone would set their
    address, id and scheme), is refused in one line saying what to list instead."""
    with pytest.raises(SettingError, match=r"^TRUSTED_PROXIES=.* is every address: list [^\n]*$"):
        load({"TRUSTED_PROXIES": proxies})


DERIVED = "GUNICORN_CMD_ARGS sets {}, which the stack derives: set {}"


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("GRACEFUL_TIMEOUT=20", "GRACEFUL_TIMEOUT=20 is below"),
        ("GUNICORN_TIMEOUT=20", "GUNICORN_TIMEOUT=20 is below"),
        ("STOP_GRACE_PERIOD=79", "STOP_GRACE_PERIOD=79 is below the stack's graceful stop"),
        ("METRICS_PORT=8080", "METRICS_PORT=8080 is PORT too"),
        # 512 requests + 512 streams + 1024 sessions may all reach one worker.
        ("LIMIT_CONCURRENCY=1000", "LIMIT_CONCURRENCY=1000 is below the 2048 connections nginx"),
        ("BACKLOG=64", "BACKLOG was removed in serving-stack 0.4.0: use GUNICORN_CMD_ARGS="),
        (".env MIN_WORKERS=9", "MIN_WORKERS was removed in serving-stack 0.4.0"),
        # APP_MODULE is any.module:app: the app's prefix is ANY_.
        ("ANY_REQUEST_TIMEOUT_SECONDS=60", "ANY_REQUEST_TIMEOUT_SECONDS is not read: set REQUEST_"),
        (".env any_cors_origins=https://a.test", "ANY_CORS_ORIGINS is not read: set CORS_ORIGINS"),
        ("ANY_PORT=9000", "ANY_PORT is not read: set PORT,"),
        ("GUNICORN_CMD_ARGS=--workers=4", DERIVED.format("--workers", "WEB_CONCURRENCY")),
        ("GUNICORN_CMD_ARGS=-w 4", DERIVED.format("-w", "WEB_CONCURRENCY")),
        ("GUNICORN_CMD_ARGS=--time=90", DERIVED.format("--time", "GUNICORN_TIMEOUT")),
        ("GUNICORN_CMD_ARGS=-t90", DERIVED.format("-t", "GUNICORN_TIMEOUT")),
        ("GUNICORN_CMD_ARGS=--timeout 90", DERIVED.format("--timeout", "GUNICORN_TIMEOUT")),
        ("GUNICORN_CMD_ARGS=--graceful-timeout 1", DERIVED.format("--graceful-timeout", "GRACE")),
        ("GUNICORN_CMD_ARGS=--keep-alive=5", DERIVED.format("--keep-alive", "KEEPALIVE")),
        ("GUNICORN_CMD_ARGS=-b 0.0.0.0:80", DERIVED.format("-b", "GUNICORN_SOCKET")),
        ("GUNICORN_CMD_ARGS=--bind=:80", DERIVED.format("--bind", "GUNICORN_SOCKET")),
        ("GUNICORN_CMD_ARGS=--name 'x", "GUNICORN_CMD_ARGS is refused: No closing quotation"),
    ],
)
def test_values_that_break_the_chain_or_a_name_are_refused(given: str, named: str) -> None:
    """A pair out of order is refused in one line naming both sides; a removed variable (in the
    environment or .env, not ignored), naming what replaces it; a stack variable under the
    app's prefix, naming the one name; a gunicorn flag the stack derives, naming its variable.
    Other gunicorn flags pass, and <PREFIX>LOG_LEVEL (an app's own variable)."""
    app = {"APP_MODULE": "any.module:app", "ANY_LOG_LEVEL": "debug"}
    name, _, value = given.removeprefix(".env ").partition("=")
    load({**app, "GUNICORN_CMD_ARGS": "--max-requests=9 --backlog 64 --worker-class=x -k y"})
    if given.startswith(".env "):
        Path(".env").write_text(f"{name}={value}\n", encoding="utf-8")
    with pytest.raises(SettingError, match=f"^{re.escape(named)}[^\n]*$"):
        load(app if given.startswith(".env ") else {**app, name: value})


def test_the_timeout_chain_follows_a_deadline_set_in_dotenv_only(tmp_path: Path) -> None:
    """Unset, the stop budget and nginx's timeouts follow the deadline, in .env only here
    (gunicorn's: tests/test_processes.py), the metrics directory RUN_DIR; the environment wins
    over .env (PORT)."""
    assert (load({}).gunicorn_timeout, load({}).upstream_keepalive) == (60, 60)
    (tmp_path / ".env").write_text(f"{APP_DEADLINE_NAME}=90\nPORT=9000\n", encoding="utf-8")
    settings = load({"PORT": "8000", "RUN_DIR": str(tmp_path)})
    conf = nginx_conf.write_nginx_conf(settings, 1).read_text(encoding="utf-8")

    # nginx's drain (90 + 5 + 5) + 5, the metrics listener 5, gunicorn 90 + 5.
    assert settings.stop_budget == 205
    assert settings.metrics_dir == tmp_path / "metrics"
    # The server's, then the WebSocket location's own (WEBSOCKET_IDLE_TIMEOUT: no deadline's).
    assert re.findall(r"proxy_(?:read|send)_timeout (\S+);", conf) == ["95s", "95s", "60s", "60s"]
    assert re.findall(r"worker_shutdown_timeout (\S+);", conf) == ["100s"]
    assert "listen 0.0.0.0:8000 " in conf


def test_the_drain_comes_before_the_stop_and_ends_keep_alive(tmp_path: Path) -> None:
    """DRAIN_SECONDS adds to the stop budget the grace period must hold; the first config lets
    the workers the drain's reload retires serve through it, the reloaded one keeps no client
    connection alive, and both answer /readyz with 503 while the drain's flag file exists."""
    assert load({}).stop_budget == 85  # nginx's drain (30 + 5 + 5) + 5, 5, gunicorn 30 + 5
    assert load({"DRAIN_SECONDS": "5", "STOP_GRACE_PERIOD": "90"}).stop_budget == 90
    with pytest.raises(SettingError, match=r"^STOP_GRACE_PERIOD=89 is below .*DRAIN_SECONDS=5,"):
        load({"DRAIN_SECONDS": "5", "STOP_GRACE_PERIOD": "89"})
    settings = load({"DRAIN_SECONDS": "5", "RUN_DIR": str(tmp_path)})
    first = nginx_conf.write_nginx_conf(settings, 1).read_text(encoding="utf-8")
    late = nginx_conf.write_nginx_conf(settings, 1, keepalive=False).read_text(encoding="utf-8")

    timeouts = re.compile(r"(?:worker_shutdown|keepalive)_timeout (\S+);")
    assert timeouts.findall(first)[:2] == ["45s", "65s"]
    assert timeouts.findall(late)[:2] == ["40s", "0s"]
    flag = f"if (-f {tmp_path / nginx_conf.DRAIN_FLAG}) " + "{ return 503; }"
    assert flag in first
    assert flag in late


def _default(field: Any) -> str:
    if field.default_factory is not None:
        return "derived"
    value = field.default
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ", ".join(value) or "none"
    return "unset" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def test_readme_lists_every_variable_with_its_default_and_meaning() -> None:
    """The stack's README table is the model's: every variable, default and description."""
    rows = [
        f"| `{field.validation_alias or field.alias}` | {_default(field)} | {meaning} |"
        for field in StackSettings.model_fields.values()
        for meaning in [" ".join(str(field.description).split())]
    ]
    expected = "\n".join(["| variable | default | meaning |", "|---|---|---|", *rows])
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")

    assert expected in readme, f"README.md: replace the variables table with\n{expected}"


@pytest.mark.parametrize(
    ("environ", "nginx_workers", "cap"),
    [
        # 512 requests + 512 streams + 1024 sessions, 64 idle upstreams a worker, 16 probes.
        ({}, 1, 2128),
        ({}, 3, 2256),
        ({"STREAMS_PER_POD": "1", "WEBSOCKETS_PER_POD": "1"}, 1, 594),
        ({"LIMIT_CONCURRENCY": "5000"}, 4, 5000),
        ({"LIMIT_CONCURRENCY": "0"}, 1, None),  # no cap
    ],
)
def test_each_worker_holds_all_nginx_lets_through(
    environ: dict[str, str], nginx_workers: int, cap: int | None
) -> None:
    """Unset, each worker's LIMIT_CONCURRENCY is every connection nginx's caps let through and
    keep idle, all on one worker at worst: the worker's plain-text 503 never comes first."""
    assert load(environ).worker_concurrency(nginx_workers) == cap


@pytest.mark.parametrize(
    ("environ", "connections"),
    [
        # Twice 512 + 512 + 1,024 held connections, 64 idle upstreams, 4,096 uncounted.
        ({}, 8256),
        ({"STREAMS_PER_POD": "1", "WEBSOCKETS_PER_POD": "1"}, 5188),
        ({"WEBSOCKETS_PER_POD": "16384"}, 38976),
    ],
)
def test_nginx_holds_every_connection_the_caps_let_in(
    environ: dict[str, str], connections: int
) -> None:
    """worker_connections holds, on one worker, each connection the caps let in twice (client
    and upstream) and what no cap counts; the descriptors allow twice that."""
    conf = nginx_conf.render(
        OWN_CONFIGS["nginx_conf"].read_text(encoding="utf-8"),
        nginx_conf.nginx_values(load(environ), workers=1),
    )
    assert f"worker_connections {connections};" in conf
    assert f"worker_rlimit_nofile {2 * connections};" in conf
