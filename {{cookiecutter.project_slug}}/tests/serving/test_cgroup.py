"""The usable CPUs (deploy/cpus.py) from fake cgroup files, and gunicorn.conf.py's worker count.

serve.py's use of the same count for nginx is tested with the rendered config (test_config.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from {{ cookiecutter.package_name }}_stack import cpus
import pytest

from .conftest import container_cgroup

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("line", "limit"),
    [("max 100000\n", None), ("150000 100000\n", 1.5), ("50000 100000", 0.5), ("max", None)],
)
def test_cgroup_v2_cpu_max(line: str, limit: float | None) -> None:
    """cpu.max is "quota period" or "max" (no limit)."""
    assert cpus.cgroup_v2_cpu_limit(line) == limit


@pytest.mark.parametrize(
    ("quota", "period", "limit"), [("-1", "100000", None), ("200000", "100000", 2.0)]
)
def test_cgroup_v1_cfs_quota(quota: str, period: str, limit: float | None) -> None:
    """cpu.cfs_quota_us of -1 means no limit; otherwise quota / period CPUs."""
    assert cpus.cgroup_v1_cpu_limit(quota, period) == limit


def test_v2_takes_the_tightest_ancestor(tmp_path: Path) -> None:
    """A limit on a parent cgroup binds its children (host without a cgroup namespace)."""
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpu memory\n")
    write(root / "kubepods" / "cpu.max", "250000 100000\n")
    write(root / "kubepods" / "pod1" / "cpu.max", "max 100000\n")
    write(tmp_path / "self", "0::/kubepods/pod1\n")

    limit, source = cpus.cgroup_cpu_limit(root, tmp_path / "self")

    assert (limit, source) == (2.5, "cgroup v2 cpu.max")


def test_v2_container_reads_its_own_root(tmp_path: Path) -> None:
    """With a cgroup namespace the container's cgroup is the mount's root ("0::/")."""
    root, self_cgroup = container_cgroup(tmp_path, "100000 100000\n")

    assert cpus.cgroup_cpu_limit(root, self_cgroup) == (1.0, "cgroup v2 cpu.max")


def test_v2_without_limit(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpu\n")
    write(tmp_path / "self", "0::/\n")

    assert cpus.cgroup_cpu_limit(root, tmp_path / "self") == (None, "cgroup v2: no limit")


def test_v1_container_falls_back_to_the_mount(tmp_path: Path) -> None:
    """cgroup v1 in a container: /proc/self/cgroup names a path the mount does not show."""
    mount = tmp_path / "cgroup" / "cpu,cpuacct"
    write(mount / "cpu.cfs_quota_us", "50000\n")
    write(mount / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "self", "4:cpu,cpuacct:/docker/0123abcd\n3:memory:/docker/0123abcd\n")

    limit, source = cpus.cgroup_cpu_limit(tmp_path / "cgroup", tmp_path / "self")

    assert (limit, source) == (0.5, "cgroup v1 cfs quota")


def test_no_cgroup_at_all(tmp_path: Path) -> None:
    assert cpus.cgroup_cpu_limit(tmp_path, tmp_path / "missing") == (
        None,
        "no cgroup cpu controller",
    )


def test_usable_cpus_rounds_a_quota_up_within_affinity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1.5 CPUs of quota on an 8-CPU affinity mask is 2 usable CPUs; the inputs are reported."""
    root, self_cgroup = container_cgroup(tmp_path, "150000 100000\n")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))

    usable, facts = cpus.usable_cpus(root, self_cgroup)

    assert usable == 2
    assert facts == {"cpu_affinity": 8, "cgroup_cpu_limit": 1.5, "cgroup": "cgroup v2 cpu.max"}


@pytest.mark.parametrize(("cpu_max", "usable"), [("50000 100000\n", 1), ("max 100000\n", 8)])
def test_usable_cpus_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str, usable: int
) -> None:
    """Half a CPU still gets one; no quota leaves the whole affinity mask."""
    root, self_cgroup = container_cgroup(tmp_path, cpu_max)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))

    assert cpus.usable_cpus(root, self_cgroup)[0] == usable


@pytest.mark.parametrize(
    ("environ", "cpus", "expected"),
    [
        ({"WEB_CONCURRENCY": "3"}, 64, (3, "WEB_CONCURRENCY")),
        ({}, 1, (2, "cpus")),  # the floor: one worker may be restarting
        ({}, 4, (4, "cpus")),
        ({}, 64, (8, "cpus")),  # the default cap
        ({"MAX_WORKERS": "16"}, 64, (16, "cpus")),
        ({"WORKERS_PER_CORE": "2"}, 3, (6, "cpus")),
        ({"MIN_WORKERS": "1"}, 1, (1, "cpus")),
    ],
)
def test_worker_count(
    gunicorn_conf: ModuleType, environ: dict[str, str], cpus: int, expected: tuple[int, str]
) -> None:
    """WEB_CONCURRENCY wins; otherwise CPUs x WORKERS_PER_CORE within the floor and the cap."""
    assert gunicorn_conf.worker_count(environ, cpus) == expected
