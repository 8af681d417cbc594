"""How many CPUs this process may really use: the affinity mask, lowered by any cgroup v1 or
v2 quota of its cgroup or an ancestor, rounded up (`docker run --cpus 1.5` on 64 cores: 2).
gunicorn's and nginx's workers are sized from it. Standard library only."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


def cgroup_cpu_limit(
    root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP
) -> tuple[float | None, str]:
    """The tightest CPU limit of this process's cgroup and its ancestors, and its source."""
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
        mount, controller, version, quota = root, "", "cgroup v2", "cpu.max"
    else:
        v1 = [root / m for m in ("cpu,cpuacct", "cpu", "cpuacct,cpu") if (root / m).is_dir()]
        if not v1:
            return None, "no cgroup cpu controller"
        mount, controller, version, quota = v1[0], "cpu", "cgroup v1", "cfs quota"
    directory = mount / paths.get(controller, "")
    limits = [
        limit
        for d in [directory, *directory.parents]
        if (d == mount or mount in d.parents) and (limit := _quota(d)) is not None
    ]
    return (min(limits), f"{version} {quota}") if limits else (None, f"{version}: no limit")


def _quota(directory: Path) -> float | None:
    """CPUs a cgroup's quota allows: v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us`` / period."""
    try:
        if (directory / "cpu.max").is_file():
            quota, period = (directory / "cpu.max").read_text(encoding="utf-8").split()
        else:
            quota, period = (
                (directory / f"cpu.cfs_{name}_us").read_text(encoding="utf-8")
                for name in ("quota", "period")
            )
        cpus = int(quota) / int(period)  # "max": ValueError, no limit
    except (OSError, ValueError, ZeroDivisionError):
        return None
    return cpus if cpus > 0 else None


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
