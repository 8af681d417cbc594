"""A cgroup shaped like the pod the Kubernetes base gives the service (512 MiB, 1 CPU).

A stack started with `Pod.prefix()` before its interpreter runs, with every process it
starts, inside the pod's limits: memory past the limit is an OOM kill, CPU past the quota is a
wait, as in the cluster. cgroup v2 (memory.max, cpu.max) and v1 (the memory and cpu
hierarchies) are both handled; which one is read from /sys/fs/cgroup. The pod is made below
this process's own cgroup, so it never escapes limits the harness runs under. Creating one
needs root and a writable cgroupfs: `create` raises `CgroupError`, saying why, elsewhere.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
MEMORY_BYTES = 512 * 1024 * 1024  # the Kubernetes base's memory limit
CPUS = 1.0  # its CPU limit
PERIOD_US = 100_000  # the CFS period the kubelet sets


class CgroupError(Exception):
    """No cgroup can be created here (not root, a read-only or absent cgroupfs)."""


@dataclass
class Pod:
    """One created cgroup: one directory on v2, one per hierarchy (memory, cpu) on v1."""

    version: int
    memory: Path
    cpu: Path

    @property
    def directories(self) -> list[Path]:
        return list(dict.fromkeys([self.memory, self.cpu]))

    def prefix(self) -> list[str]:
        """An argv prefix that moves the process into the pod, then execs the rest of argv.

        Children inherit the cgroup: the supervisor, nginx and gunicorn's workers are all in.
        """
        joins = " && ".join(
            f"echo $$ > {shlex.quote(str(directory / 'cgroup.procs'))}"
            for directory in self.directories
        )
        return ["sh", "-c", f'{joins} && exec "$@"', "sh"]

    def oom_kills(self) -> int:
        """Processes the kernel killed for the pod's memory limit so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _field(self.memory / name, "oom_kill")

    def peak_bytes(self) -> int:
        """The most memory the pod has used (v2 kernels before 5.19: what it uses now)."""
        if self.version == 1:
            return int((self.memory / "memory.max_usage_in_bytes").read_text())
        peak = self.memory / "memory.peak"
        return int((peak if peak.exists() else self.memory / "memory.current").read_text())

    def pids(self) -> set[int]:
        """The processes in the pod now."""
        found: set[int] = set()
        for directory in self.directories:
            text = (directory / "cgroup.procs").read_text()
            found.update(int(pid) for pid in text.split())
        return found

    def remove(self, timeout: float = 10.0) -> None:
        """Kill whatever is left in the pod, then remove its directories."""
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
            time.sleep(0.05)
        for directory in self.directories:
            # A killed process leaves its cgroup a moment after it is reaped.
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)


def _field(path: Path, name: str) -> int:
    """A `name value` line's value from a cgroup file (0 when the kernel has no such line)."""
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    return 0


def _own(controller: str) -> Path:
    """This process's cgroup on a v1 hierarchy ("memory"), or on v2 with controller ""."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" == controllers):
            return Path(path.lstrip("/"))
    raise CgroupError(f"this process is in no {controller or 'v2'} cgroup")


def create(memory_bytes: int = MEMORY_BYTES, cpus: float = CPUS) -> Pod:
    """Create a pod cgroup with these limits (and no swap beyond them)."""
    if os.geteuid() != 0:
        raise CgroupError("creating a cgroup needs root")
    name = f"battery-pod-{uuid.uuid4().hex[:12]}"
    quota_us = int(cpus * PERIOD_US)
    try:
        if (ROOT / "cgroup.controllers").is_file():
            return _create_v2(ROOT / _own("") / name, memory_bytes, quota_us)
        if (ROOT / "memory").is_dir() and (ROOT / "cpu").is_dir():
            memory = ROOT / "memory" / _own("memory") / name
            cpu = ROOT / "cpu" / _own("cpu") / name
            return _create_v1(memory, cpu, memory_bytes, quota_us)
    except OSError as error:
        raise CgroupError(f"cannot create a cgroup: {error}") from None
    raise CgroupError(f"no cgroup v2 nor v1 memory and cpu hierarchies at {ROOT}")


def _create_v1(memory: Path, cpu: Path, memory_bytes: int, quota_us: int) -> Pod:
    memory.mkdir()
    pod = Pod(1, memory, cpu)
    try:
        cpu.mkdir()
        (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
        # Without swap accounting the file is absent; with it, no swap past the limit.
        memsw = memory / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(memory_bytes))
        (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(quota_us))
    except OSError:
        pod.remove()
        raise
    return pod


def _create_v2(directory: Path, memory_bytes: int, quota_us: int) -> Pod:
    parent = directory.parent
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    wanted = [f"+{name}" for name in ("memory", "cpu") if name not in enabled]
    if wanted:
        (parent / "cgroup.subtree_control").write_text(" ".join(wanted))
    directory.mkdir()
    pod = Pod(2, directory, directory)
    try:
        (directory / "memory.max").write_text(str(memory_bytes))
        swap = directory / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")
        (directory / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
    except OSError:
        pod.remove()
        raise
    return pod
