"""nginx configurations for the benchmark, derived from the shipped deploy/nginx.conf.

Renders the template with deploy/serve.py's own functions (Settings, nginx_values, render),
so every directive is the shipped one, then changes only what an experiment varies:

- how nginx reaches the app: the shipped unix socket, or TCP on 127.0.0.1;
- upstream keepalive: the shipped `keepalive N;` kept, or removed (a new upstream
  connection per request, the seeds' starting point);
- proxy_buffering: the shipped `on`, or `off` (the seeds' choice).

The access log is off (serve.py's NGINX_ACCESS_LOG=off): a benchmark measures the proxy hop,
not the disk. Each edit must match exactly once; if deploy/nginx.conf changes shape, the
benchmark stops with an error instead of silently measuring something else.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# deploy/ is no package (its files are copied alone): its modules are imported by name.
from {{ cookiecutter.package_name }}_stack import runner as serve
from {{ cookiecutter.package_name }}_stack import settings as stack_settings

if TYPE_CHECKING:
    from bench.experiments import Front


class NginxConfigError(RuntimeError):
    """The shipped nginx.conf no longer has a line an experiment needs to change."""


def nginx_binary(project: Path) -> str:  # noqa: ARG001 - the signature callers use
    """nginx as deploy/serve.py finds it (PATH, then /usr/sbin); NginxConfigError if absent."""
    found = stack_settings.find_nginx(os.environ.get("PATH", os.defpath))
    if found is None:
        raise NginxConfigError(serve.APT_HINT)
    return found


def _replace_once(text: str, pattern: str, replacement: str, what: str) -> str:
    new, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if count != 1:
        raise NginxConfigError(
            f"deploy/nginx.conf: expected exactly one {what} (/{pattern}/), found {count}"
        )
    return new


def vary(
    rendered: str, front: Front, socket_path: Path, tcp_upstream: tuple[str, int] | None
) -> str:
    """Apply an experiment's changes to the rendered shipped config."""
    text = rendered
    if front.transport == "tcp":
        if tcp_upstream is None:
            raise ValueError("a TCP front needs the app's TCP address")
        host, port = tcp_upstream
        text = _replace_once(
            text,
            rf"^(\s*)server\s+unix:{re.escape(str(socket_path))}\s*;",
            rf"\g<1>server {host}:{port};",
            "upstream `server unix:...;` line",
        )
    if not front.keepalive:
        text = _replace_once(
            text, r"^\s*keepalive\s+\d+\s*;[^\n]*\n", "", "upstream `keepalive N;` line"
        )
    if not front.buffering:
        text = _replace_once(
            text,
            r"^(\s*)proxy_buffering\s+on\s*;",
            r"\g<1>proxy_buffering off;",
            "`proxy_buffering on;` line",
        )
    if os.geteuid() == 0:
        # serve.py drops root to one unprivileged user for nginx and gunicorn alike; the
        # benchmark starts gunicorn as itself, so nginx's workers must be the same user to
        # reach the 0660 socket (as root they would default to `nobody`).
        user = pwd.getpwuid(os.geteuid()).pw_name
        text = f"user {user};\n" + text
    return text


@dataclass(frozen=True)
class NginxSite:
    command: list[str]  # nginx in the foreground with the rendered config
    config: Path
    port: int


def prepare(
    project: Path, run_dir: Path, port: int, front: Front, upstream: Path | tuple[str, int]
) -> NginxSite:
    """Write the config for one front into run_dir, check it with `nginx -t`, return how to run it.

    upstream is gunicorn's unix socket, or its TCP address for a TCP front.
    """
    socket_path = upstream if isinstance(upstream, Path) else run_dir / "unused.sock"
    tcp_upstream = None if isinstance(upstream, Path) else upstream
    environ = {
        "PORT": str(port),
        "LISTEN_ADDRESS": "127.0.0.1",
        "RUN_DIR": str(run_dir),
        "NGINX_ACCESS_LOG": "off",
        "NGINX_CONF": str(project / "deploy" / "nginx.conf"),
        "PATH": os.environ.get("PATH", os.defpath),
    }
    settings = stack_settings.load(environ)
    if settings.nginx_bin is None:
        raise NginxConfigError(serve.APT_HINT)
    template = settings.nginx_conf.read_text(encoding="utf-8")
    # nginx's workers as the stack counts them (serve.nginx_workers: the usable CPUs).
    rendered = serve.render(template, serve.nginx_values(settings, socket_path))
    text = vary(rendered, front, socket_path, tcp_upstream)
    run_dir.mkdir(parents=True, exist_ok=True)
    settings.temp_dir.mkdir(mode=0o700, exist_ok=True)
    config: Path = settings.rendered_conf
    config.write_text(text, encoding="utf-8")
    checked = subprocess.run(
        serve.nginx_command(settings, "-t", "-q"), capture_output=True, text=True, check=False
    )
    if checked.returncode != 0:
        raise NginxConfigError(f"nginx -t rejected {config}:\n{checked.stderr}")
    command = serve.nginx_command(settings, "-g", "daemon off;")
    return NginxSite(command=command, config=config, port=port)
