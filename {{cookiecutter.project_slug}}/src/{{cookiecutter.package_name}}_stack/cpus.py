"""How many CPUs this process may really use, in a container or on a host.

The CPU affinity mask, lowered by any cgroup v1 or v2 CPU quota on this process's cgroup or
an ancestor, rounded up: `docker run --cpus 1.5` on a 64-core host is 2 CPUs, not 64.
Standard library only; reads /proc/self/cgroup and /sys/fs/cgroup (Linux; elsewhere the CPU
count alone). gunicorn_config.py sizes gunicorn's workers from it, and the runner renders
nginx's worker_processes from it when NGINX_WORKER_PROCESSES=auto (nginx's
own `auto` counts the machine's CPUs), so nginx and gunicorn count the same CPUs.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


def cgroup_v2_cpu_limit(cpu_max: str) -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` line ("max 100000" or "150000 100000")."""
    quota, _, period = cpu_max.strip().partition(" ")
    if quota == "max" or not period:
        return None
    return int(quota) / int(period)


def cgroup_v1_cpu_limit(cfs_quota_us: str, cfs_period_us: str) -> float | None:
    """CPUs allowed by cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1 = none)."""
    quota = int(cfs_quota_us.strip())
    period = int(cfs_period_us.strip())
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def cgroup_cpu_limit(
    root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP
) -> tuple[float | None, str]:
    """The tightest CPU limit of this process's cgroup and its ancestors, and its source.

    Looks at the process's own cgroup path first (a host or a container without a cgroup
    namespace), then at the mount's root (a container, where the root is its own cgroup).
    """
    try:
        membership = self_cgroup.read_text(encoding="utf-8")
    except OSError:
        membership = ""
    paths: dict[str, str] = {}
    for line in membership.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path.lstrip("/")
    if (root / "cgroup.controllers").is_file():  # cgroup v2 (unified hierarchy)
        limits = [
            limit
            for directory in _ancestors(root, paths.get("", ""))
            if (limit := _read_limit(directory / "cpu.max", None)) is not None
        ]
        return (min(limits), "cgroup v2 cpu.max") if limits else (None, "cgroup v2: no limit")
    for mount in ("cpu,cpuacct", "cpu", "cpuacct,cpu"):
        if not (root / mount).is_dir():
            continue
        limits = [
            limit
            for directory in _ancestors(root / mount, paths.get("cpu", ""))
            if (limit := _read_limit(directory / "cpu.cfs_quota_us", directory)) is not None
        ]
        return (min(limits), "cgroup v1 cfs quota") if limits else (None, "cgroup v1: no limit")
    return None, "no cgroup cpu controller"


def _ancestors(mount: Path, relative: str) -> list[Path]:
    """The cgroup directory and each parent up to the mount (only those that exist)."""
    directory = mount / relative if relative else mount
    found = [directory, *directory.parents]
    return [d for d in found if d.is_dir() and (d == mount or mount in d.parents)]


def _read_limit(path: Path, v1_directory: Path | None) -> float | None:
    try:
        if v1_directory is None:
            return cgroup_v2_cpu_limit(path.read_text(encoding="utf-8"))
        period = (v1_directory / "cpu.cfs_period_us").read_text(encoding="utf-8")
        return cgroup_v1_cpu_limit(path.read_text(encoding="utf-8"), period)
    except (OSError, ValueError):
        return None


def usable_cpus(
    root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP
) -> tuple[int, dict[str, Any]]:
    """CPUs this process may really use: CPU affinity, lowered by any cgroup quota (rounded up)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = os.cpu_count() or 1
    limit, source = cgroup_cpu_limit(root, self_cgroup)
    cpus = affinity if limit is None else max(1, min(affinity, math.ceil(limit)))
    return cpus, {"cpu_affinity": affinity, "cgroup_cpu_limit": limit, "cgroup": source}
