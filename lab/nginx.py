"""nginx configurations for the lab, derived from the stack's nginx.conf.

Renders it through the stack's public command line (``python -m serving_stack render``, as
``make serve`` renders it), so every directive is the one the service ships, then changes
only what an experiment varies:

- how nginx reaches the app: the shipped unix socket, or TCP on 127.0.0.1;
- upstream keepalive: the shipped `keepalive N;` kept, or removed (a new upstream
  connection per request, the seeds' starting point);
- proxy_buffering: the shipped `on`, or `off` (the seeds' choice).

The access log is off (the stack's NGINX_ACCESS_LOG=off): a benchmark measures the proxy hop,
not the disk. Each edit must match exactly once; if serving_stack/nginx.conf changes shape, the
benchmark stops with an error instead of silently measuring something else.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lab.experiments import Front
    from lab.project import Project

APT_HINT = "nginx is not installed; install it with: sudo apt-get install -y nginx-light"


class NginxConfigError(RuntimeError):
    """The shipped nginx.conf no longer has a line an experiment needs to change."""


def nginx_binary() -> str:
    """nginx on PATH, else in /usr/sbin (Debian's place, often not on a user's PATH)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if found is None:
        raise NginxConfigError(APT_HINT)
    return found


def _replace_once(text: str, pattern: str, replacement: str, what: str) -> str:
    new, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if count != 1:
        raise NginxConfigError(
            f"the rendered serving_stack/nginx.conf: expected exactly one {what} (/{pattern}/), "
            f"found {count}"
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
        # The benchmark starts gunicorn as itself, so nginx's workers must be the same user to
        # reach the 0660 socket (as root they would default to `nobody`).
        user = pwd.getpwuid(os.geteuid()).pw_name
        text = f"user {user};\n" + text
    return text


def render(project: Project, environ: dict[str, str]) -> Path:
    """The project's nginx.conf as its stack renders it for ``environ`` (the stack's CLI)."""
    command = [sys.executable, "-m", project.stack, "render"]
    # The caller's PYTHONPATH finds the stack where the project is not installed.
    env = {**environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NginxConfigError(f"{project.stack} render failed: {done.stdout}{done.stderr}")
    return Path(done.stdout.strip())


@dataclass(frozen=True)
class NginxSite:
    command: list[str]  # nginx in the foreground with the rendered config
    config: Path
    port: int


def prepare(
    project: Project, run_dir: Path, port: int, front: Front, upstream: Path | tuple[str, int]
) -> NginxSite:
    """Write the config for one front into run_dir, check it with `nginx -t`, return how to run it.

    upstream is gunicorn's unix socket, or its TCP address for a TCP front.
    """
    socket_path = upstream if isinstance(upstream, Path) else run_dir / "unused.sock"
    tcp_upstream = None if isinstance(upstream, Path) else upstream
    binary = nginx_binary()
    environ = {
        "PORT": str(port),
        "LISTEN_ADDRESS": "127.0.0.1",
        "RUN_DIR": str(run_dir),
        "NGINX_ACCESS_LOG": "off",
        # The per-client limits stay in the config (their cost is measured) at values the
        # benchmark's one client address never reaches: it is every client at once.
        "RATE_LIMIT": "1000000",
        "RATE_LIMIT_BURST": "1000000",
        "CONNECTIONS_PER_CLIENT": "65535",
        "NGINX_BIN": binary,
        "NGINX_CONF": str(project.nginx_conf),
        "PATH": os.environ.get("PATH", os.defpath),
    }
    # nginx's workers as the stack counts them (the usable CPUs), rendered as `make serve` does.
    config = render(project, {**environ, "GUNICORN_SOCKET": str(socket_path)})
    config.write_text(
        vary(config.read_text(encoding="utf-8"), front, socket_path, tcp_upstream),
        encoding="utf-8",
    )
    # -e stderr before the config is read: as non-root, nginx's default error log is not ours.
    command = [binary, "-e", "stderr", "-p", str(run_dir), "-c", str(config)]
    checked = subprocess.run([*command, "-t", "-q"], capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        raise NginxConfigError(f"nginx -t rejected {config}:\n{checked.stderr}")
    return NginxSite(command=[*command, "-g", "daemon off;"], config=config, port=port)
