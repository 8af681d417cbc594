"""deploy/stack_settings.py: every serving-stack variable at a non-default value, at its
bounds and at wrong values, which are refused in one line naming the variable and the value."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from {{ cookiecutter.package_name }}_stack import settings as stack_settings
from {{ cookiecutter.package_name }}_stack.settings import VARIABLES, SettingError, Variable
{%- if cookiecutter.layout == "service" %}

from .conftest import PROJECT
{%- endif %}

BY_NAME = {variable.name: variable for variable in VARIABLES}


def accepted(variable: Variable[Any]) -> list[str]:  # noqa: PLR0911 - one per kind
    """Values at the variable's bounds, and in between (fractions where allowed)."""
    if isinstance(variable, stack_settings.Int):
        return [str(variable.low), str(variable.high), str((variable.low + variable.high) // 2)]
    if isinstance(variable, stack_settings.Number):
        return [f"{variable.low + 0.001:g}", f"{variable.high:g}", "1.5"]
    if isinstance(variable, stack_settings.Choice):
        return [*variable.choices, variable.choices[0].upper()]
    if isinstance(variable, stack_settings.Flag):
        return ["on", "off", "1", "0", "TRUE", "no"]
    if isinstance(variable, stack_settings.Address):
        return ["127.0.0.1", "::", "::1", "10.1.2.3"]
    if isinstance(variable, stack_settings.Networks):
        return ["10.0.0.0/8", "10.0.0.0/8, 192.168.0.0/16 2001:db8::/32", "203.0.113.7"]
    if isinstance(variable, stack_settings.SafePath):
        return ["/srv/app", "relative/dir", "/run/app-2_x.y"]
    if isinstance(variable, stack_settings.Hosts):
        return ["*", ".example.com, API.test", "[::1] 10.0.0.1", "svc.*", f"{'a' * 63}.b"]
    samples = {
        "NGINX_WORKER_PROCESSES": ["auto", "1", "9999"],
        "SERVE_USER": ["app", "www-data", "_x.y"],
        "APP_MODULE": ["main:app", "a.b.c:create_app()", "pkg.mod:obj.attr"],
        "NGINX_BIN": ["/usr/sbin/nginx", "nginx"],
        "FORWARDED_ALLOW_IPS": ["*", "127.0.0.1,10.0.0.1"],
        "WORKER_TMP_DIR": ["/dev/shm", "/tmp/x"],  # noqa: S108 - values, nothing is opened
    }
    return samples[variable.name]


def refused(variable: Variable[Any]) -> list[str]:  # noqa: PLR0911 - one per kind
    """Values outside the bounds, of the wrong type, or that would alter nginx.conf."""
    if isinstance(variable, stack_settings.Int):
        return [str(variable.low - 1), str(variable.high + 1), "1.5", "ten", "0x10"]
    if isinstance(variable, stack_settings.Number):
        return [f"{variable.low:g}", f"{variable.high * 2:g}", "-1", "nan", "inf", "1e999", "1s"]
    if isinstance(variable, stack_settings.Choice):
        return ["verbose", "info; x"]
    if isinstance(variable, stack_settings.Flag):
        return ["maybe", "2", "/var/log/x"]
    if isinstance(variable, stack_settings.Address):
        return ["localhost", "0.0.0.0; evil", "999.1.1.1"]
    if isinstance(variable, stack_settings.Networks):
        return ["10.0.0.0/8; include /etc/passwd", "10.0.0.0/33", "evil"]
    if isinstance(variable, stack_settings.SafePath):
        return ["/run/a b", "/run/a;b", "/run/{x}", "/run/$x", "/run/'q'"]
    if isinstance(variable, stack_settings.Hosts):
        return ["a;b", "exa_mple.com", "-bad.com", "a..b", "*.*", f"{'a' * 64}.b", "x}"]
    samples = {
        "NGINX_WORKER_PROCESSES": ["0", "4; user root", "10000", "-1"],
        "SERVE_USER": ["a b", "x;y", "a" * 33],
        "APP_MODULE": ["main", "main:app; import os", "1x:app"],
        "NGINX_BIN": ["/usr/sbin/nginx -g x"],
        "FORWARDED_ALLOW_IPS": ["* 1"],
        "WORKER_TMP_DIR": ["/tmp/a b"],  # noqa: S108 - a value, nothing is opened
    }
    return samples[variable.name]


@pytest.mark.parametrize("name", BY_NAME)
def test_every_variable_takes_values_at_its_bounds(name: str) -> None:
    """Boundary and in-between values are accepted, as their type."""
    variable = BY_NAME[name]
    for raw in accepted(variable):
        value = variable.read({name: f" {raw} "})
        assert value is not None, raw
        if isinstance(value, float):
            assert math.isfinite(value)


@pytest.mark.parametrize("name", BY_NAME)
def test_every_variable_refuses_wrong_values_in_one_line(name: str) -> None:
    """A wrong value: one line naming the variable, the value and what is allowed."""
    variable = BY_NAME[name]
    for raw in refused(variable):
        with pytest.raises(SettingError) as error:
            variable.read({name: raw})
        message = str(error.value)
        assert message == f"{name}={raw!r} is refused: {variable.allowed}"
        assert "\n" not in message


@pytest.mark.parametrize("name", BY_NAME)
def test_unset_or_blank_means_the_default(name: str) -> None:
    """An unset or blank variable takes its documented default."""
    variable = BY_NAME[name]
    assert variable.read({}) == variable.default
    assert variable.read({name: "  "}) == variable.default


NON_DEFAULT = [
    ("PORT", "8081", "port", 8081),
    ("METRICS_PORT", "9465", "metrics_port", 9465),
    ("LISTEN_ADDRESS", "::1", "listen_address", "::1"),
    ("RUN_DIR", "/srv/run", "run_dir", Path("/srv/run")),
    ("TRUSTED_PROXIES", "10.1.0.0/16 10.2.0.1", "trusted_proxies", ("10.1.0.0/16", "10.2.0.1/32")),
    ("ALLOWED_HOSTS", ".Example.com ::1", "allowed_hosts", (".example.com", "::1")),
    ("SERVE_AS_ROOT", "on", "serve_as_root", True),
    ("NGINX_ACCESS_LOG", "off", "nginx_access_log", False),
    ("NGINX_WORKER_PROCESSES", "3", "nginx_worker_processes", "3"),
    ("NGINX_BIN", "/opt/nginx", "nginx_bin", "/opt/nginx"),
    ("NGINX_CONF", "/etc/x.conf", "nginx_conf", Path("/etc/x.conf")),
    ("GUNICORN_CONF", "/etc/g.py", "gunicorn_conf", Path("/etc/g.py")),
    ("STARTUP_TIMEOUT", "7.5", "startup_timeout", 7.5),
    ("SERVE_USER", "www-data", "serve_user", "www-data"),
    ("STOP_GRACE_PERIOD", "120", "stop_grace_period", 120.0),
    ("APP_MODULE", "other.mod:application", "app_module", "other.mod:application"),
    ("GUNICORN_SOCKET", "/srv/g.sock", "gunicorn_socket", Path("/srv/g.sock")),
    ("WEB_CONCURRENCY", "5", "web_concurrency", 5),
    ("WORKERS_PER_CORE", "2.5", "workers_per_core", 2.5),
    ("MIN_WORKERS", "1", "min_workers", 1),
    ("MAX_WORKERS", "16", "max_workers", 16),
    ("KEEPALIVE", "90", "keepalive", 90),
    ("LIMIT_CONCURRENCY", "0", "limit_concurrency", 0),
    ("MAX_REQUESTS", "1000", "max_requests", 1000),
    ("MAX_REQUESTS_JITTER", "7", "max_requests_jitter", 7),
    ("BACKLOG", "128", "backlog", 128),
    ("FORWARDED_ALLOW_IPS", "127.0.0.1", "forwarded_allow_ips", "127.0.0.1"),
    ("LOG_LEVEL", "WARNING", "log_level", "warning"),
    ("ACCESS_LOG", "yes", "gunicorn_access_log", True),
    ("PROMETHEUS_MULTIPROC_DIR", "/srv/m", "prometheus_multiproc_dir", Path("/srv/m")),
    ("WORKER_TMP_DIR", "/srv/tmp", "worker_tmp_dir", "/srv/tmp"),
]
CHAIN = {
    stack_settings.APP_DEADLINE_NAME: ("app_deadline", "12.5"),
    "GRACEFUL_TIMEOUT": ("graceful", "31.5"),
    "GUNICORN_TIMEOUT": ("watchdog", "75.5"),
}


@pytest.mark.parametrize(("name", "raw", "attribute", "expected"), NON_DEFAULT)
def test_load_reads_a_non_default_value(
    name: str, raw: str, attribute: str, expected: object
) -> None:
    """Each variable reaches its field of StackSettings."""
    settings = stack_settings.load({name: raw})
    assert getattr(settings, attribute) == expected


@pytest.mark.parametrize("name", CHAIN)
def test_load_reads_a_non_default_timeout(name: str) -> None:
    """The timeouts reach the chain, fractions kept."""
    attribute, raw = CHAIN[name]
    assert getattr(stack_settings.load({name: raw}).chain, attribute) == float(raw)


def test_every_variable_is_tested_and_loaded() -> None:
    """The tables above cover every variable, so a new one gets its tests."""
    assert {row[0] for row in NON_DEFAULT} | set(CHAIN) == set(BY_NAME)


def test_derived_defaults() -> None:
    """Jitter follows MAX_REQUESTS; the socket follows RUN_DIR; nginx is found on PATH."""
    settings = stack_settings.load({"MAX_REQUESTS": "1000", "RUN_DIR": "/srv/r", "PATH": "/none"})
    assert settings.max_requests_jitter == 100
    assert settings.gunicorn_socket == Path("/srv/r/gunicorn.sock")
    assert settings.metrics_dir == Path("/srv/r/metrics")
    assert stack_settings.load({"PROMETHEUS_MULTIPROC_DIR": "/m"}).metrics_dir == Path("/m")
    assert settings.nginx_bin in {None, "/usr/sbin/nginx"}  # /usr/sbin is searched too


def test_metrics_port_equal_to_port_is_refused() -> None:
    """The metrics listener never shares the public port: the pair is refused in one line."""
    with pytest.raises(SettingError, match=r"^METRICS_PORT=9000 is PORT too: .*public one$"):
        stack_settings.load({"PORT": "9000", "METRICS_PORT": "9000"})
    assert stack_settings.load({"PORT": "9464", "METRICS_PORT": "9465"}).metrics_port == 9465


def test_min_workers_above_max_is_refused() -> None:
    """A pair that contradicts itself is refused naming both."""
    with pytest.raises(SettingError, match=r"^MIN_WORKERS=9 is above MAX_WORKERS=8$"):
        stack_settings.load({"MIN_WORKERS": "9"})

{%- if cookiecutter.layout == "service" %}


def test_docs_list_every_variable_with_its_default() -> None:
    """docs/settings.md names each variable, its default and what is allowed."""
    text = (PROJECT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")
    }
    for variable in VARIABLES:
        row = rows.get(f"`{variable.name}`")
        assert row is not None, f"docs/settings.md has no row for {variable.name}"
        assert variable.default_text in row, f"{variable.name}: default {variable.default_text}"
        assert variable.allowed in row, f"{variable.name}: allowed {variable.allowed}"
{%- endif %}
