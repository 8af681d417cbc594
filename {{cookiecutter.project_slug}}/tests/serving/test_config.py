"""Static checks of the serving stack's files: nginx -t, gixy, gunicorn --check-config, hadolint.

nginx and gixy read the config deploy/serve.py renders (the same one the stack runs).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from {{ cookiecutter.package_name }}_stack import runner as serve
from {{ cookiecutter.package_name }}_stack import settings as stack_settings
from {{ cookiecutter.package_name }}_stack.settings import SettingError

from .conftest import DEPLOY, PROJECT, container_cgroup, run_runner, tool

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

VARIANTS = {
    "defaults": {},
    "behind a load balancer, no access log": {
        "TRUSTED_PROXIES": "10.0.0.0/8, 192.168.0.0/16 2001:db8::/32",
        "NGINX_ACCESS_LOG": "off",
        "NGINX_WORKER_PROCESSES": "2",
    },
}


def render(run_dir: Path, **env: str) -> Path:
    """The nginx config serve.py writes for env (nginx's workers from this machine's CPUs)."""
    settings = stack_settings.load({"RUN_DIR": str(run_dir), "PATH": os.defpath, **env})
    return serve.write_nginx_conf(settings, settings.socket_path(0))


def nginx_test(nginx_bin: str, conf: Path) -> subprocess.CompletedProcess[str]:
    """`nginx -t` on a rendered config, with the runner's own flags."""
    return subprocess.run(
        [nginx_bin, "-t", "-q", "-e", "stderr", "-p", str(conf.parent), "-c", str(conf)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_nginx_accepts_the_rendered_config(nginx_bin: str, tmp_path: Path, variant: str) -> None:
    """nginx -t accepts the config as rendered, with no placeholder left."""
    conf = render(tmp_path, **VARIANTS[variant])
    text = conf.read_text(encoding="utf-8")

    result = nginx_test(nginx_bin, conf)

    assert result.returncode == 0, result.stderr
    assert not re.search(r"@[A-Z_]+@", text), "a placeholder was left unrendered"


AUTO_FACTS = {
    "source": "cpus",
    "cpus": 2,
    "cpu_affinity": 8,
    "cgroup_cpu_limit": 1.5,
    "cgroup": "cgroup v2 cpu.max",
}


@pytest.mark.parametrize(
    ("setting", "decision"),
    [
        # 1.5 CPUs of quota on 8 CPUs of affinity: 2, as gunicorn counts them (not nginx's 8).
        ("auto", (2, AUTO_FACTS)),
        ("3", (3, {"source": "NGINX_WORKER_PROCESSES"})),  # a number is kept, whatever the CPUs
        ("1", (1, {"source": "NGINX_WORKER_PROCESSES"})),  # the lowest
    ],
)
def test_nginx_workers_follow_the_cpus_gunicorn_counts(
    nginx_bin: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    decision: tuple[int, dict[str, object]],
) -> None:
    """NGINX_WORKER_PROCESSES=auto renders the container's usable CPUs (deploy/cpus.py);
    nginx -t accepts the result, and the runner's log line gets the count's inputs."""
    cgroup = container_cgroup(tmp_path / "fake", "150000 100000\n")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    environ = {"RUN_DIR": str(tmp_path / "run"), "NGINX_WORKER_PROCESSES": setting}
    settings = stack_settings.load(environ)

    # As the runner does at start: decide (and log), then render.
    workers, facts = serve.nginx_workers(settings, *cgroup)
    conf = serve.write_nginx_conf(settings, settings.socket_path(0), workers)

    assert (workers, facts) == decision
    text = conf.read_text(encoding="utf-8")
    assert re.findall(r"^worker_processes (\S+);$", text, re.MULTILINE) == [str(decision[0])]
    result = nginx_test(nginx_bin, conf)
    assert result.returncode == 0, result.stderr


def test_rendering_follows_the_environment(tmp_path: Path) -> None:
    """Trusted proxies become set_real_ip_from lines; the access log can be switched off."""
    default = render(tmp_path / "a").read_text(encoding="utf-8")
    behind = VARIANTS["behind a load balancer, no access log"]
    behind_lb = render(tmp_path / "b", **behind).read_text(encoding="utf-8")

    assert not re.search(r"^\s*set_real_ip_from", default, re.MULTILINE)
    assert "access_log /dev/stdout json;" in default
    assert "set_real_ip_from 10.0.0.0/8;" in behind_lb
    assert "set_real_ip_from 2001:db8::/32;" in behind_lb
    assert "access_log off;" in behind_lb
    assert f"server unix:{tmp_path / 'a' / 'gunicorn.sock'};" in default


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TRUSTED_PROXIES", "10.0.0.0/8; include /etc/passwd"),
        ("PORT", "80 ssl"),
        ("LISTEN_ADDRESS", "0.0.0.0; evil"),
        ("NGINX_ACCESS_LOG", "/var/log/x"),
        ("NGINX_WORKER_PROCESSES", "4; user root"),
        ("RUN_DIR", "/run/a b"),
    ],
)
def test_environment_cannot_inject_nginx_directives(name: str, value: str) -> None:
    """Values that would alter nginx's config are refused, naming the variable."""
    with pytest.raises(SettingError, match=name):
        stack_settings.load({name: value})


def test_render_refuses_an_unknown_placeholder() -> None:
    """A placeholder without a value is an error, never left in the config."""
    with pytest.raises(serve.ServeError, match="MISSING"):
        serve.render("listen @LISTEN@; @MISSING@", {"LISTEN": "8080"})


@pytest.mark.parametrize("variant", VARIANTS)
def test_gixy_finds_nothing(tmp_path: Path, variant: str) -> None:
    """gixy (the maintained fork) reports no issue in the rendered config."""
    conf = render(tmp_path, **VARIANTS[variant])

    result = subprocess.run([tool("gixy"), str(conf)], capture_output=True, text=True, check=False)

    assert result.returncode == 0, result.stdout + result.stderr


{% if cookiecutter.layout == "serving-only" -%}
def test_gunicorn_accepts_its_config(tmp_path: Path) -> None:
    """gunicorn --check-config loads deploy/gunicorn.conf.py and an app named by APP_MODULE.

    The real app lives in the repository this stack is copied into; a two-line ASGI app
    stands in for it here.
    """
    (tmp_path / "stand_in.py").write_text(
        "async def app(scope, receive, send):\n    raise NotImplementedError\n", encoding="utf-8"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "APP_MODULE": "stand_in:app",
        "RUN_DIR": str(tmp_path),
    }
{%- else -%}
def test_gunicorn_accepts_its_config() -> None:
    """gunicorn --check-config loads deploy/gunicorn.conf.py and the app."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT / "src"), "RUN_DIR": "/tmp/unused"}  # noqa: S108
{%- endif %}
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", DEPLOY / "gunicorn.conf.py", "--check-config"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=60,
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_gunicorn_settings(gunicorn_conf: ModuleType) -> None:
    """The values the stack relies on: socket mode, watchdog, no control socket, tmpfs."""
    conf: dict[str, Any] = vars(gunicorn_conf)
    assert conf["umask"] == 0o117, "the socket must be 0660: owner and group read/write only"
    assert conf["bind"][0].startswith("unix:")
    assert conf["control_socket_disable"] is True
    assert conf["timeout"] == 60
    assert conf["backlog"] == 2048
    assert conf["forwarded_allow_ips"] == "*"
    assert issubclass(conf["worker_class"], conf["UvicornWorker"]), "uvicorn-worker's class"
    assert conf["worker_tmp_dir"] in {"/dev/shm", None}  # noqa: S108


def test_worker_passes_graceful_timeout_and_concurrency_cap(
    gunicorn_conf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker subclass hands uvicorn what UvicornWorker does not map."""
    monkeypatch.setenv("LIMIT_CONCURRENCY", "123")
    cfg = importlib.import_module("gunicorn.config").Config()
    cfg.set("graceful_timeout", 17)
    cfg.set("worker_tmp_dir", str(tmp_path))
    log = gunicorn_conf.JsonLogger(cfg)
    worker = gunicorn_conf.Worker(0, os.getpid(), [], None, 30, cfg, log)
    try:
        assert worker.config.timeout_graceful_shutdown == 17
        assert worker.config.limit_concurrency == 123
    finally:
        worker.tmp.close()


def test_hadolint_finds_nothing() -> None:
    """hadolint reports nothing in the Dockerfile."""
    result = subprocess.run(
        [tool("hadolint"), str(PROJECT / "Dockerfile")], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_image_runs_the_runner_as_a_fixed_non_root_user() -> None:
    """The image's user is numeric and not root, and the runner is the exec-form entrypoint."""
    dockerfile = (PROJECT / "Dockerfile").read_text(encoding="utf-8")

    assert "\nUSER 10001:10001\n" in dockerfile
    assert '\nENTRYPOINT ["python", "/app/deploy/serve.py"]\n' in dockerfile
    assert 'CMD ["python", "/app/deploy/serve.py", "check"]' in dockerfile, "HEALTHCHECK"
    assert not re.search(r"apt-get install[^\n]*\bcurl\b", dockerfile), "no curl in the image"


@pytest.mark.parametrize("name", ["serve.py", "gunicorn.conf.py", "metrics.py", "cpus.py"])
def test_only_stack_settings_reads_the_environment(name: str) -> None:
    """The deploy files read no variable themselves: deploy/stack_settings.py is the one place."""
    source = (DEPLOY / name).read_text(encoding="utf-8")
    read = set(re.findall(r"environ(?:\.get\(|\[)\s*\"([A-Z][A-Z0-9_]*)\"", source))
    # PATH finds nginx; HOME is written (for gunicorn), not read; PROMETHEUS_MULTIPROC_DIR is
    # written by gunicorn.conf.py for the workers' prometheus_client, from stack_settings.
    read -= {"PATH", "HOME", "PROMETHEUS_MULTIPROC_DIR"}

    assert not read, f"deploy/{name} reads {sorted(read)}: define them in stack_settings.py"


def test_runner_explains_a_missing_nginx(tmp_path: Path) -> None:
    """Without nginx the runner exits 1 with one log line naming the package to install."""
    env = {"PATH": os.defpath, "NGINX_BIN": str(tmp_path / "nginx"), "RUN_DIR": str(tmp_path)}
    result = run_runner(env)

    assert result.returncode == 1
    (line,) = [json.loads(raw) for raw in result.stdout.splitlines()]
    assert line["level"] == "error"
    assert "apt-get install -y nginx-light" in line["message"]


def test_the_relay_writes_whole_lines_only() -> None:
    """Output cut anywhere by the pipe is written line by line; the end flushes the rest."""
    relay = serve.LineRelay(lambda block: block.upper() + b"\n")
    assert relay.feed(b"ab") == b""
    assert relay.feed(b"c\nde") == b"ABC\n"
    assert relay.feed(b"f\ngh\n") == b"DEF\nGH\n"
    assert relay.feed(b"tail") == b""
    assert relay.feed(b"") == b"TAIL\n"


def test_the_relay_bounds_a_line_without_end() -> None:
    """A line longer than the limit is passed on in pieces, never held without bound."""
    relay = serve.LineRelay(lambda block: block + b"\n")
    chunk = b"x" * (serve.LineRelay.LIMIT + 1)
    assert relay.feed(chunk) == chunk + b"\n"
    assert relay.pending == b""
