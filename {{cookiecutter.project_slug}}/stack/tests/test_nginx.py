"""deploy/nginx.conf as the runner renders it, checked by the real `nginx -t` (skipped, saying
so, without nginx); the CPU count and nginx's `auto` from fake cgroups. The status socket's
private directory is proven live: the template's battery/test_nginx_answers.py."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from serving_stack import cpus, nginx_conf
from serving_stack.errors import ServeError
from serving_stack.settings import APP_CORS_NAME, APP_DEADLINE_NAME, load

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BEHIND_A_LOAD_BALANCER = {
    "TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::/32",
    "NGINX_ACCESS_LOG": "off",
    "LISTEN_ADDRESS": "::",
    "NGINX_TEMP_DIR": "spool",  # relative: in the working directory
    "ALLOWED_HOSTS": ".example.com *",
    APP_DEADLINE_NAME: "30.5",
    "RATE_LIMIT": "0",
    "CONNECTIONS_PER_CLIENT": "0",
    "WEBSOCKETS_PER_CLIENT": "0",
    "WEBSOCKET_IDLE_TIMEOUT": "3600",
    "NGINX_WORKER_PROCESSES": "3",
}
EDGE = {
    "RATE_LIMIT": "5",
    "RATE_LIMIT_BURST": "0",
    "RATE_LIMIT_DRY_RUN": "on",
    "CONNECTIONS_PER_CLIENT": "2",
    APP_CORS_NAME: "https://app.example.com,http://[::1]:5173",
}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (
            {},
            [
                "proxy_read_timeout 35s;",
                "keepalive_timeout 60s;",
                "keepalive_time 5s;",
                "access_log /dev/stdout json buffer=4k flush=1s;",
                "listen 0.0.0.0:8080 backlog=4096;",
                "zone=client_rate:10m rate=100r/s;",
                "limit_req zone=client_rate burst=600 delay=200;",
                "limit_conn client_requests 32;",
                "limit_req zone=probes burst=50 delay=10;",
                "limit_conn probe_connections 16;",
                "limit_conn websockets 32;",
                "limit_req zone=websocket_handshakes burst=20 nodelay;",
                "proxy_read_timeout 60s;",
            ],
        ),
        (
            BEHIND_A_LOAD_BALANCER,
            [
                "proxy_read_timeout 35500ms;",
                "access_log off;",
                "worker_shutdown_timeout 40500ms;",
                "set_real_ip_from 2001:db8::/32;",
                "listen [::]:8080 backlog=4096;",
                '"~." 1;',
                "# RATE_LIMIT=0:",
                "# CONNECTIONS_PER_CLIENT=0:",
                "\nworker_processes 3;",
                "limit_conn websockets 65535;   # WEBSOCKETS_PER_CLIENT=0:",
                "proxy_read_timeout 3600s;",
            ],
        ),
        (
            EDGE,
            [
                "rate=5r/s;",
                "limit_req zone=client_rate burst=20;",
                "limit_req_dry_run on;",
                "limit_conn client_requests 2;",
                '":https://app.example.com" "https://app.example.com";',
                '":http://[::1]:5173" "http://[::1]:5173";',
            ],
        ),
    ],
    ids=["defaults", "behind", "edge"],
)
def test_the_rendered_config_follows_the_settings_and_nginx_accepts_it(
    tmp_path: Path, environ: dict[str, str], expected: list[str]
) -> None:
    """Proxies, access log, address, hosts (* lets any Host through), workers, the spool
    (NGINX_TEMP_DIR) and the timeout chain (a fractional deadline in milliseconds) follow the
    settings; `nginx -t` accepts it."""
    settings = load({"RUN_DIR": str(tmp_path), "NGINX_CONF": str(DEPLOY / "nginx.conf"), **environ})
    text = nginx_conf.write_nginx_conf(settings, settings.upstream_socket).read_text(
        encoding="utf-8"
    )

    assert [line for line in expected if line not in text] == []
    assert f"server unix:{tmp_path / 'gunicorn.sock'};" in text
    behind = environ is BEHIND_A_LOAD_BALANCER
    spool = tmp_path / ("spool" if behind else "nginx-temp")
    assert f"client_body_temp_path {spool}/client_body;" in text
    assert spool.stat().st_mode & 0o777 == 0o700, "nginx's spool is private"
    assert bool(re.search(r"^\s*set_real_ip_from", text, re.MULTILINE)) == behind
    assert bool(re.search(r"^\s*limit_req ", text, re.MULTILINE)) != behind
    nginx = shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
    if nginx is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    test = [nginx, "-t", "-q", "-e", "stderr", "-p", str(tmp_path), "-c", "nginx.conf"]
    checked = subprocess.run(test, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_render_refuses_an_unknown_placeholder() -> None:
    """A placeholder without a value is an error, never left in the config."""
    with pytest.raises(ServeError, match="MISSING"):
        nginx_conf.render("listen @LISTEN@; @MISSING@", {"LISTEN": "8080"})


V2, V1 = {"cgroup.controllers": "cpu\n"}, "cpu,cpuacct/cpu.cfs_"
ROOT, CHILD = "0::/\n", "0::/child\n"  # /proc/self/cgroup: the root's cgroup, or its child's


@pytest.mark.parametrize(
    ("files", "membership", "limit", "workers"),
    [
        ({**V2, "cpu.max": "max 100000\n"}, ROOT, None, 2),
        ({**V2, "cpu.max": "150000 100000\n"}, ROOT, 1.5, 1),
        # The tightest of the process's cgroup and its ancestors, whichever it is.
        ({**V2, "cpu.max": "300000 100000\n", "child/cpu.max": "50000 100000\n"}, CHILD, 0.5, 1),
        ({**V2, "cpu.max": "50000 100000\n", "child/cpu.max": "max 100000\n"}, CHILD, 0.5, 1),
        ({**V2, "cpu.max": "900000 100000\n"}, ROOT, 9, 2),
        ({f"{V1}quota_us": "250000\n", f"{V1}period_us": "100000\n"}, "4:cpu,cpuacct:/\n", 2.5, 1),
        ({}, "4:cpu,cpuacct:/\n", None, 2),
    ],
    ids=["v2 none", "v2", "v2 nested", "v2 parent", "v2 over affinity", "v1", "no controller"],
)
def test_cgroup_cpu_limit_sizes_nginx_auto(
    tmp_path: Path, files: dict[str, str], membership: str, limit: float | None, workers: int
) -> None:
    """A v2 cpu.max or v1 cfs quota: the tightest wins, no controller means no limit. nginx's
    auto: a worker per 4 usable CPUs (of 8 here), rounded up; nginx's own auto would say 8."""
    mount = tmp_path / "cgroup", tmp_path / "self"  # the mount, and /proc/self/cgroup
    for name, text in files.items():
        (mount[0] / name).parent.mkdir(parents=True, exist_ok=True)
        (mount[0] / name).write_text(text, encoding="utf-8")
    mount[1].write_text(membership, encoding="utf-8")

    assert cpus.cgroup_cpu_limit(*mount)[0] == limit
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
        assert nginx_conf.nginx_workers(load({}), *mount)[0] == workers
