"""deploy/nginx.conf as the runner renders it, checked by the real `nginx -t`; nginx's worker
count from the CPUs cpus.py counts, with fake cgroup files.

Needs nginx on PATH or in /usr/sbin for the `nginx -t` tests (skipped, saying so, without it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}_stack import cpus, runner
from {{ cookiecutter.package_name }}_stack.settings import APP_CORS_NAME, APP_DEADLINE_NAME, load

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BEHIND_A_LOAD_BALANCER = {
    "TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::/32",
    "NGINX_ACCESS_LOG": "off",
    "LISTEN_ADDRESS": "::",
    "ALLOWED_HOSTS": ".example.com *",
    APP_DEADLINE_NAME: "30.5",
    "RATE_LIMIT": "0",
    "CONNECTIONS_PER_CLIENT": "0",
}
EDGE = {
    "RATE_LIMIT": "5",
    "RATE_LIMIT_BURST": "0",
    "RATE_LIMIT_DRY_RUN": "on",
    "CONNECTIONS_PER_CLIENT": "2",
    APP_CORS_NAME: "https://app.example.com,http://[::1]:5173",
}


def render(run_dir: Path, **environ: str) -> str:
    """The nginx.conf the runner writes for this environment."""
    settings = load({"RUN_DIR": str(run_dir), "NGINX_CONF": str(DEPLOY / "nginx.conf"), **environ})
    conf = runner.write_nginx_conf(settings, settings.upstream_socket)
    return conf.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ["proxy_read_timeout 35s;", "keepalive_timeout 60s;", "keepalive_time 5s;",
              "access_log /dev/stdout json buffer=4k flush=1s;",
              "listen 0.0.0.0:8080 backlog=4096;",
              "zone=client_rate:10m rate=100r/s;",
              "limit_req zone=client_rate burst=600 delay=200;",
              "limit_conn client_requests 128;"]),
        (BEHIND_A_LOAD_BALANCER, ["proxy_read_timeout 35500ms;", "access_log off;",
              "worker_shutdown_timeout 40500ms;", "set_real_ip_from 2001:db8::/32;",
              "listen [::]:8080 backlog=4096;", '"~." 1;', "# RATE_LIMIT=0:",
              "# CONNECTIONS_PER_CLIENT=0:"]),
        (EDGE, ["rate=5r/s;", "limit_req zone=client_rate burst=20;", "limit_req_dry_run on;",
              "limit_conn client_requests 2;", '":https://app.example.com" "https://app.example.com";',
              '":http://[::1]:5173" "http://[::1]:5173";']),
    ],
    ids=["defaults", "behind", "edge"],
)  # fmt: skip
def test_the_rendered_config_follows_the_settings_and_nginx_accepts_it(
    tmp_path: Path, environ: dict[str, str], expected: list[str]
) -> None:
    """Proxies, access log, address, hosts (* lets any Host through) and the timeout chain (a
    fractional deadline in milliseconds) come from the settings; `nginx -t` accepts the result."""
    text = render(tmp_path, **environ)

    assert [line for line in expected if line not in text] == []
    assert f"server unix:{tmp_path / 'gunicorn.sock'};" in text
    behind = environ is BEHIND_A_LOAD_BALANCER
    assert bool(re.search(r"^\s*set_real_ip_from", text, re.MULTILINE)) == behind
    assert bool(re.search(r"^\s*limit_req ", text, re.MULTILINE)) != behind
    assert not re.search(r"@[A-Z_]+@", text)
    nginx = shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
    if nginx is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    test = [nginx, "-t", "-q", "-e", "stderr", "-p", str(tmp_path), "-c", "nginx.conf"]
    checked = subprocess.run(test, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_the_spool_and_the_status_socket_have_private_directories(tmp_path: Path) -> None:
    """NGINX_TEMP_DIR moves nginx's spool off RUN_DIR; the status socket (which nginx makes
    0666) is in a 0700 directory of RUN_DIR, and so is the spool."""
    spool = tmp_path / "tmp" / "nginx"
    text = render(tmp_path / "run", NGINX_TEMP_DIR=str(spool))

    assert f"client_body_temp_path {spool}/client_body;" in text
    status = tmp_path / "run" / "nginx-status"
    assert f"listen unix:{status}/nginx-status.sock;" in text
    assert [oct(path.stat().st_mode & 0o777) for path in (spool, status)] == ["0o700"] * 2


def test_render_refuses_an_unknown_placeholder() -> None:
    """A placeholder without a value is an error, never left in the config."""
    with pytest.raises(runner.ServeError, match="MISSING"):
        runner.render("listen @LISTEN@; @MISSING@", {"LISTEN": "8080"})


def cgroup(directory: Path, files: dict[str, str], membership: str) -> tuple[Path, Path]:
    """A cgroup mount holding these files, and the process's /proc/self/cgroup."""
    for name, text in files.items():
        (directory / "cgroup" / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / "cgroup" / name).write_text(text, encoding="utf-8")
    (directory / "self").write_text(membership, encoding="utf-8")
    return directory / "cgroup", directory / "self"


V2, V1 = {"cgroup.controllers": "cpu\n"}, "cpu,cpuacct/cpu.cfs_"
ROOT, CHILD = "0::/\n", "0::/child\n"  # /proc/self/cgroup: the root's cgroup, or its child's


@pytest.mark.parametrize(
    ("files", "membership", "limit"),
    [
        ({**V2, "cpu.max": "max 100000\n"}, ROOT, None),
        ({**V2, "cpu.max": "150000 100000\n"}, ROOT, 1.5),
        # The tightest of the process's cgroup and its ancestors, whichever it is.
        ({**V2, "cpu.max": "300000 100000\n", "child/cpu.max": "50000 100000\n"}, CHILD, 0.5),
        ({**V2, "cpu.max": "50000 100000\n", "child/cpu.max": "max 100000\n"}, CHILD, 0.5),
        ({f"{V1}quota_us": "250000\n", f"{V1}period_us": "100000\n"}, "4:cpu,cpuacct:/\n", 2.5),
        ({}, "4:cpu,cpuacct:/\n", None),
    ],
    ids=["v2 none", "v2", "v2 nested", "v2 parent", "v1", "no controller"],
)  # fmt: skip
def test_cgroup_cpu_limit(
    tmp_path: Path, files: dict[str, str], membership: str, limit: float | None
) -> None:
    """A v2 cpu.max or v1 cfs quota: the tightest wins; no controller means no limit."""
    assert cpus.cgroup_cpu_limit(*cgroup(tmp_path, files, membership))[0] == limit


@pytest.mark.parametrize(
    ("setting", "limit", "workers"),
    [("auto", "150000", 1), ("auto", "max", 2), ("auto", "900000", 2), ("3", "150000", 3)],
)
def test_nginx_workers_follow_the_cpus_gunicorn_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, limit: str, workers: int
) -> None:
    """auto: one worker per 4 usable CPUs, rounded up: 1.5 CPUs of quota is 1 worker, all 8
    CPUs of affinity 2 (nginx's own auto: 8); a number is kept whatever the CPUs."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    environ = {"RUN_DIR": str(tmp_path), "NGINX_CONF": str(DEPLOY / "nginx.conf")}
    settings = load({**environ, "NGINX_WORKER_PROCESSES": setting})
    quota = cgroup(tmp_path, {**V2, "cpu.max": f"{limit} 100000\n"}, ROOT)

    count, facts = runner.nginx_workers(settings, *quota)
    conf = runner.write_nginx_conf(settings, settings.upstream_socket, count)

    assert count == workers
    assert facts["source"] == ("cpus" if setting == "auto" else "NGINX_WORKER_PROCESSES")
    text = conf.read_text(encoding="utf-8")
    assert re.findall(r"^worker_processes (\S+);$", text, re.MULTILINE) == [str(workers)]
