"""The command line, ``python -m serving_stack [serve|render|check]`` (README.md), and the
checks before serving: an app named, the installed versions, nginx, not root unless
SERVE_AS_ROOT, RUN_DIR usable, nginx.conf accepted by `nginx -t`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request

from . import ServeError, environment
from .log_relay import OUTPUT, log
from .nginx_conf import APT_HINT, DRAIN_FLAG, nginx_command, nginx_workers, write_nginx_conf
from .settings import LEGACY_CONFIGS, LOCATIONS, NO_APP_MODULE, OWN_CONFIGS, StackSettings, load
from .supervisor import HEALTH, Supervisor

# As root, nginx's workers would run as nobody (no access to the 0660 socket), the app as root.
ROOT_REFUSED = (
    "started as root: run as an unprivileged user (the image runs as 10001; as root, `setpriv"
    " --reuid=USER --regid=GROUP --clear-groups`), or set SERVE_AS_ROOT=on for a throwaway"
    " container"
)


def root_globals(settings: StackSettings) -> str:
    """nginx's global directive for a root start (SERVE_AS_ROOT=on); ServeError without it."""
    if os.geteuid() != 0:
        return ""
    if not settings.serve_as_root:
        raise ServeError(ROOT_REFUSED)
    log("warning", "started as root: serving as root (SERVE_AS_ROOT=on)")
    return "user root root;"


def warn_of_legacy_configs(settings: StackSettings) -> None:
    """A 0.4.0 project's deploy/ copy of a stack config still serves, unset: say how to move."""
    moves = {"nginx_conf": f"move your own locations to {LOCATIONS}, then ", "gunicorn_conf": ""}
    for field, move in moves.items():
        legacy = getattr(settings, field) != OWN_CONFIGS[field]
        if legacy and field not in settings.model_fields_set:
            log(
                "warning",
                f"{LEGACY_CONFIGS[field]}, serving-stack 0.4.0's copy of its config, still"
                f" serves: {move}delete it to take the stack's own (stack/CHANGELOG.md, 0.4.1)",
            )


def serve(settings: StackSettings) -> int:
    """The checks, RUN_DIR readied, nginx.conf rendered and tested, then the supervisor run."""
    if settings.app_module is None:
        log("error", NO_APP_MODULE)
        return 1
    if refused := environment.refusal():
        log("error", refused)
        return 1
    nginx = settings.nginx_bin
    if nginx is None or not os.access(nginx, os.X_OK):
        log("error", f"{nginx} (NGINX_BIN) is not an executable. {APT_HINT}" if nginx else APT_HINT)
        return 1
    nginx_globals = root_globals(settings)
    warn_of_legacy_configs(settings)
    try:
        settings.run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        # Metrics start from zero with the stack (a restarted container keeps its tmpfs).
        shutil.rmtree(settings.metrics_dir, ignore_errors=True)
        settings.metrics_dir.mkdir(mode=0o700)
        # nginx removes its unix socket on exit, but not after a kill: bind() would then fail.
        settings.status_socket.unlink(missing_ok=True)
        (settings.run_dir / DRAIN_FLAG).unlink(missing_ok=True)  # a drain's, cut short by a kill
        workers, workers_facts = nginx_workers(settings)
        conf = write_nginx_conf(settings, workers)
    except OSError as exc:  # unwritable RUN_DIR, unreadable NGINX_CONF...
        where = f"NGINX_CONF={settings.nginx_conf} into RUN_DIR={settings.run_dir}"
        log("error", f"cannot render {where}: {exc}")
        return 1
    # Fail early with nginx's own message (bad TRUSTED_PROXIES, port, paths...).
    test = nginx_command(settings, "-t", "-q", *(["-g", nginx_globals] if nginx_globals else []))
    checked = subprocess.run(test, capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        said = checked.stderr.strip()
        log("error", "nginx rejected the rendered config", config=str(conf), nginx=said)
        return 1
    log(
        "info",
        "rendered nginx config",
        config=str(conf),
        app_deadline=settings.app_deadline,
        nginx_proxy_timeout=settings.proxy_timeout,
        nginx_drain=settings.nginx_drain,
        graceful_timeout=settings.graceful_timeout,
        stop_needs=settings.stop_budget,
    )
    log("info", "nginx worker count decided", workers=workers, **workers_facts)
    return Supervisor(settings, nginx_globals, workers).run()


def check(settings: StackSettings) -> int:
    """The container's health check: the whole chain answers GET /livez (no curl needed)."""
    url = f"{settings.local_url}{HEALTH}"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 - http, built here
            return 0 if response.status == 200 else 1
    except OSError as exc:  # urllib's URLError included
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


def console() -> int:
    """``python -m serving_stack`` and the distribution's `serving-stack` script."""
    command = sys.argv[1] if len(sys.argv) > 1 else "serve"
    try:
        settings = load(os.environ)
        if command == "serve":
            OUTPUT.start()  # a stdout that can neither block nor stop the stack, until it ends
            try:
                return serve(settings)
            finally:
                OUTPUT.stop()
        if command == "render":
            print(write_nginx_conf(settings, nginx_workers(settings)[0]))
            return 0
        if command == "check":
            return check(settings)
    except ServeError as exc:  # SettingError too
        log("error", str(exc))
        return 1
    print(f"usage: {sys.argv[0]} [serve|render|check]", file=sys.stderr)
    return 2
