"""The timeout chain, read from the real files: client -> nginx -> gunicorn -> app -> stop.

Each assertion names the two numbers it relates and what breaks when their order flips, so
whoever edits one number learns which other one to move (README: "The timeout chain").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from {{ cookiecutter.package_name }}.settings import Settings

from .conftest import DEPLOY, PROJECT

if TYPE_CHECKING:
    from types import ModuleType


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(ms|s|m)?", value)
    assert match, f"not a duration: {value}"
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"ms": 0.001, "s": 1, "m": 60}[unit]


def nginx_directive(name: str, block: str | None = None) -> float:
    """A duration directive of deploy/nginx.conf, optionally inside `block { ... }`."""
    text = re.sub(r"#[^\n]*", "", (DEPLOY / "nginx.conf").read_text(encoding="utf-8"))
    if block is not None:
        found = re.search(block + r"\s*\{(.*?)\}", text, re.DOTALL)
        assert found, f"no {block} block in deploy/nginx.conf"
        text = found.group(1)
    else:  # outside the upstream block: the client-side directive of the same name
        text = re.sub(r"upstream\s+\w+\s*\{.*?\}", "", text, flags=re.DOTALL)
    values = re.findall(rf"^\s*{name}\s+(\S+);", text, re.MULTILINE)
    assert len(values) == 1, f"expected one {name} in deploy/nginx.conf, found {values}"
    return _seconds(values[0])


def compose_stop_grace_period() -> float:
    text = (PROJECT / "compose.yaml").read_text(encoding="utf-8")
    found = re.search(r"^\s*stop_grace_period:\s*(\S+)", text, re.MULTILINE)
    assert found, "compose.yaml has no stop_grace_period"
    return _seconds(found.group(1))


def app_deadline() -> float:
    default = Settings.model_fields["request_timeout_seconds"].default
    assert isinstance(default, float)
    return default


def test_nginx_waits_longer_than_the_app_deadline() -> None:
    """The app's own 504 (with the request id) must reach the client before nginx gives up."""
    deadline = app_deadline()
    for name in ("proxy_read_timeout", "proxy_send_timeout"):
        assert nginx_directive(name, "location /") > deadline, (
            f"nginx {name} must exceed the app's request_timeout_seconds ({deadline:g} s), "
            "or nginx answers 504 first, without the app's JSON body"
        )


def test_graceful_stop_lets_nginx_finish_what_it_waits_for() -> None:
    """A graceful nginx stop must not cut a response it is still allowed to wait for."""
    assert nginx_directive("worker_shutdown_timeout") >= nginx_directive(
        "proxy_read_timeout", "location /"
    ), "nginx worker_shutdown_timeout must be at least proxy_read_timeout"


def test_app_keeps_idle_connections_longer_than_nginx(gunicorn_conf: ModuleType) -> None:
    """gunicorn must never close an idle upstream connection before nginx does (502s)."""
    nginx_idle = nginx_directive("keepalive_timeout", r"upstream\s+app")
    assert gunicorn_conf.keepalive > nginx_idle, (
        f"gunicorn keepalive ({gunicorn_conf.keepalive} s) must exceed nginx's upstream "
        f"keepalive_timeout ({nginx_idle:g} s), or nginx reuses a closed connection: 502"
    )


def test_gunicorn_drains_at_least_one_request_deadline(gunicorn_conf: ModuleType) -> None:
    """On TERM a request the app still allows must be allowed to finish."""
    assert gunicorn_conf.graceful_timeout >= app_deadline(), (
        f"gunicorn graceful_timeout ({gunicorn_conf.graceful_timeout} s) must be at least the "
        f"app's request_timeout_seconds ({app_deadline():g} s)"
    )


def test_watchdog_is_not_shorter_than_a_request(gunicorn_conf: ModuleType) -> None:
    """The heartbeat watchdog is no request deadline, but must not undercut one either."""
    assert gunicorn_conf.timeout >= app_deadline(), (
        f"gunicorn timeout ({gunicorn_conf.timeout} s) below the app deadline would kill "
        "workers whose loop is busy for less than a request may legitimately take"
    )


def test_runner_and_gunicorn_agree_on_the_drain(
    serve_module: ModuleType, gunicorn_conf: ModuleType
) -> None:
    """The runner waits for gunicorn's drain with the same GRACEFUL_TIMEOUT default."""
    settings = serve_module.Settings.from_env({})
    assert settings.graceful_timeout == gunicorn_conf.graceful_timeout, (
        "deploy/serve.py and deploy/gunicorn.conf.py disagree on GRACEFUL_TIMEOUT's default"
    )


def test_stop_grace_period_covers_the_whole_stop(
    serve_module: ModuleType, gunicorn_conf: ModuleType
) -> None:
    """compose's stop_grace_period outlasts the runner's worst case: nginx, then gunicorn."""
    margin = serve_module.STOP_MARGIN
    nginx_drain = nginx_directive("worker_shutdown_timeout")
    worst_case = nginx_drain + margin + gunicorn_conf.graceful_timeout + margin
    assert compose_stop_grace_period() > worst_case, (
        f"compose.yaml stop_grace_period must exceed nginx worker_shutdown_timeout + gunicorn "
        f"graceful_timeout + the runner's margins ({worst_case:g} s), or Docker kills the stack "
        "mid-drain"
    )
