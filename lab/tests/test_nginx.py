"""The benchmark's nginx variants differ from the shipped deploy/nginx.conf only where meant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from {{ cookiecutter.package_name }}_stack import runner as serve
from {{ cookiecutter.package_name }}_stack import settings as stack_settings
from lab.experiments import Front
from lab.nginx import NginxConfigError, vary

PROJECT = Path(__file__).resolve().parents[2]
RUN_DIR = "/srv/bench-x"  # never created: the config is only rendered
SOCKET = Path(RUN_DIR) / "gunicorn.sock"


@pytest.fixture(scope="module")
def rendered() -> str:
    """deploy/nginx.conf rendered by deploy/serve.py's own functions."""
    settings = stack_settings.load({"RUN_DIR": RUN_DIR, "NGINX_ACCESS_LOG": "off"})
    values = serve.nginx_values(settings, SOCKET)
    return serve.render(settings.nginx_conf.read_text(encoding="utf-8"), values)


def changed_lines(before: str, after: str) -> set[str]:
    return set(after.splitlines()) ^ set(before.splitlines())


def without_user(text: str) -> str:
    # As root, vary() adds a `user` line so nginx's workers can reach gunicorn's socket.
    return re.sub(r"^user \S+;\n", "", text)


def test_shipped_front_changes_nothing(rendered: str) -> None:
    """The shipped front (socket, keepalive, buffering) is the shipped config itself."""
    assert without_user(vary(rendered, Front(), SOCKET, None)) == rendered


def test_tcp_front_replaces_only_the_upstream_server(rendered: str) -> None:
    """A TCP front points the upstream at 127.0.0.1:port and changes nothing else."""
    varied = without_user(vary(rendered, Front("tcp"), SOCKET, ("127.0.0.1", 8123)))
    assert {line.strip() for line in changed_lines(rendered, varied)} == {
        f"server unix:{SOCKET};",
        "server 127.0.0.1:8123;",
    }


def test_no_keepalive_front_drops_only_the_upstream_pool(rendered: str) -> None:
    """Without keepalive only the upstream's `keepalive N;` goes; client keepalive stays."""
    varied = without_user(vary(rendered, Front(keepalive=False), SOCKET, None))
    (removed,) = changed_lines(rendered, varied)
    assert re.fullmatch(r"\s*keepalive \d+;.*", removed)
    assert "keepalive_timeout" in varied


def test_buffering_off_front(rendered: str) -> None:
    """The seeds' proxy_buffering off replaces the shipped on."""
    varied = without_user(vary(rendered, Front(buffering=False), SOCKET, None))
    assert {line.strip() for line in changed_lines(rendered, varied)} == {
        "proxy_buffering on;",
        "proxy_buffering off;",
    }


def test_a_config_that_changed_shape_is_refused() -> None:
    """If the line an experiment varies is gone, the benchmark stops instead of mismeasuring."""
    with pytest.raises(NginxConfigError, match="keepalive"):
        vary("http { upstream app { server unix:/x; } }", Front(keepalive=False), Path("/x"), None)
