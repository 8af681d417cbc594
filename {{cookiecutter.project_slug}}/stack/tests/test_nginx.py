"""The stack's nginx.conf as rendered: values and lists follow the settings, `nginx -t` accepts
each; a project's locations included; `auto` from cgroups. nginx serving each value live: the
template's battery."""

import os
import subprocess
from pathlib import Path

import pytest

from serving_stack import ServeError, cpus, nginx_conf
from serving_stack.settings import LEGACY_CONFIGS, LOCATIONS, OWN_CONFIGS, SettingError, load

from .conftest import NGINX

# Variables set, then what they render: values by placeholder, each list's text by file name.
CASES = [
    ("", "WORKER_PROCESSES=1, LISTEN=0.0.0.0:8080, PROXY_TIMEOUT=35s, SHUTDOWN_TIMEOUT=40s"),
    ("", "UPSTREAM_KEEPALIVE_TIMEOUT=60s, UPSTREAM_KEEPALIVE_TIME=5s, WEBSOCKET_IDLE_TIMEOUT=60s"),
    ("", "ACCESS_LOGGED=1, RATE_LIMITED=1, CONNECTIONS_LIMITED=1, WEBSOCKETS_LIMITED=1"),  # on
    ("", "RATE_LIMIT=100, CONNECTIONS_PER_CLIENT=32, WEBSOCKETS_PER_CLIENT=32"),
    # 200 at once, then 4 s x 100 wait their turn.
    ("", "CLIENT_RATE_BURST=burst=600 delay=200, RATE_LIMIT_DRY_RUN=off"),
    ("", "set_real_ip_from.conf=, trusted_proxies.geo=, cors_origins.map="),
    ("", "allowed_hosts.map=localhost 1;\n127.0.0.1 1;\n[::1] 1;\n"),  # $host brackets IPv6
    ("LISTEN_ADDRESS=:: NGINX_WORKER_PROCESSES=3", "LISTEN=[::]:8080, WORKER_PROCESSES=3"),
    ("WEBSOCKET_IDLE_TIMEOUT=3600 NGINX_TEMP_DIR=spool", "WEBSOCKET_IDLE_TIMEOUT=3600s"),
    ("RATE_LIMIT_BURST=0", "CLIENT_RATE_BURST=burst=400"),  # all wait their turn
    # nginx refuses burst=0 and delay=0, their defaults: both left out.
    ("RATE_LIMIT_BURST=0 RATE_LIMIT_QUEUE_SECONDS=0", "CLIENT_RATE_BURST="),
    ("RATE_LIMIT=1000000", "RATE_LIMIT=1000000, CLIENT_RATE_BURST=burst=4000200 delay=200"),
    ("CONNECTIONS_PER_CLIENT=65535", "CONNECTIONS_LIMITED=1, CONNECTIONS_PER_CLIENT=65535"),
    # Off: a switch of 0 empties the limit's key, and 65535 stands in for the 0 nginx refuses.
    ("WEBSOCKETS_PER_CLIENT=0", "WEBSOCKETS_LIMITED=0, WEBSOCKETS_PER_CLIENT=65535"),
    ("WEBSOCKETS_PER_CLIENT=1", "WEBSOCKETS_LIMITED=1, WEBSOCKETS_PER_CLIENT=1"),
    ("NGINX_ACCESS_LOG=off", "ACCESS_LOGGED=0"),
    # The bytes of an IPv6 address that key a client: a /64 unset; all 16 for a /128.
    ("", "CLIENT_PREFIX_BYTES=8, UPLOADS_PER_POD=256"),
    ("CLIENT_IPV6_PREFIX=128", "CLIENT_PREFIX_BYTES=16"),
    ("CLIENT_IPV6_PREFIX=32", "CLIENT_PREFIX_BYTES=4"),
    ("TRUSTED_PROXIES=10.0.0.0/8,::1", "trusted_proxies.geo=10.0.0.0/8 1;\n::1/128 1;\n"),
    ("ALLOWED_HOSTS=.a.test,2001:db8::1", "allowed_hosts.map=.a.test 1;\n[2001:db8::1] 1;\n"),
    # Matched ignoring case, sent as listed.
    (
        "CORS_ORIGINS=https://a.test,http://b.test:8000",
        'cors_origins.map="https://a.test" "https://a.test";\n"http://b.test:8000" "http://b.test:8000";\n',
    ),
]


@pytest.mark.parametrize(("environ", "expected"), CASES)
def test_values_and_lists_follow_the_settings_and_nginx_accepts_them(
    tmp_path: Path, environ: str, expected: str
) -> None:
    """Values and lists follow the settings, each list included; nginx's spool stays private;
    `nginx -t` accepts the config (skipped, saying so, without nginx)."""
    given = dict(item.split("=", 1) for item in environ.split())
    settings = load({"RUN_DIR": str(tmp_path), "NGINX_WORKER_PROCESSES": "1", **given})
    workers = nginx_conf.nginx_workers(settings)[0]
    conf = nginx_conf.write_nginx_conf(settings, workers).read_text(encoding="utf-8")
    lists = {name: (tmp_path / name).read_text() for name in nginx_conf.nginx_lists(settings)}
    values = nginx_conf.nginx_values(settings, workers) | lists
    wanted = dict(item.split("=", 1) for item in expected.split(", "))
    spool = Path(values["TEMP_DIR"])

    assert {name: values[name] for name in wanted} == wanted
    assert [name for name in lists if f"include {tmp_path / name};" not in conf] == []
    assert f"client_body_temp_path {spool}/client_body;" in conf
    assert spool.stat().st_mode & 0o777 == 0o700, "nginx's spool is private"
    if NGINX is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    test = [NGINX, "-e", "stderr", "-p", str(tmp_path), "-c", "nginx.conf", "-t", "-q"]
    checked = subprocess.run(test, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_a_projects_locations_are_included_and_a_0_4_copy_still_serves(tmp_path: Path) -> None:
    """deploy/nginx-locations.conf is included when there (NGINX_LOCATIONS names another, one
    that is missing is refused); a 0.4.0 project's deploy/ copies serve while NGINX_CONF and
    GUNICORN_CONF are unset, the stack's own files once they are gone."""
    assert (load({}).nginx_locations, load({}).nginx_conf) == (None, OWN_CONFIGS["nginx_conf"])
    LOCATIONS.parent.mkdir()
    LOCATIONS.write_text("location = /small { client_max_body_size 8; proxy_pass http://app; }")
    for path in LEGACY_CONFIGS.values():
        path.write_text("# a 0.4.0 copy\n", encoding="utf-8")
    settings = load({"RUN_DIR": str(tmp_path)})
    nginx_conf.write_nginx_conf(settings, 1)

    included = (tmp_path / "locations.conf").read_text(encoding="utf-8")
    assert included == f"include {tmp_path / LOCATIONS};\n"
    assert settings.nginx_conf == tmp_path / LEGACY_CONFIGS["nginx_conf"]
    assert settings.gunicorn_conf == tmp_path / LEGACY_CONFIGS["gunicorn_conf"]
    with pytest.raises(SettingError, match=r"^NGINX_LOCATIONS='gone\.conf' is refused: no such"):
        load({"NGINX_LOCATIONS": "gone.conf"})


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
