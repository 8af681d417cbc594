"""The lab's nginx variants differ from the stack's nginx.conf only where meant."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lab.experiments import Front
from lab.nginx import NginxConfigError, render, vary

if TYPE_CHECKING:
    from lab.project import Project

SOCKET = Path("/srv/bench-x/gunicorn.sock")  # never created: the config is only rendered


@pytest.fixture(scope="module")
def rendered(project: Project, tmp_path_factory: pytest.TempPathFactory) -> str:
    """serving_stack/nginx.conf rendered by the project's stack, as `make serve` renders it."""
    run_dir = tmp_path_factory.mktemp("run")
    environ = {
        "RUN_DIR": str(run_dir),
        "NGINX_CONF": str(project.nginx_conf),
        "GUNICORN_SOCKET": str(SOCKET),
        "PATH": os.environ.get("PATH", os.defpath),
    }
    return render(project, environ).read_text(encoding="utf-8")


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
    """If the line an experiment varies is gone, the lab stops instead of mismeasuring."""
    with pytest.raises(NginxConfigError, match="keepalive"):
        vary("http { upstream app { server unix:/x; } }", Front(keepalive=False), Path("/x"), None)
