"""What /proc says about processes: parents, process groups, CPU time, memory (Linux).

A process may exit while it is read: it is then left out, never an error.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Proc:
    """One line of /proc/<pid>/stat, the fields the harness reads."""

    pid: int
    ppid: int
    group: int
    state: str  # "Z": a zombie, exited and not yet reaped
    comm: str
    cpu_seconds: float  # user + system

    @property
    def alive(self) -> bool:
        return self.state != "Z"


def read(pid: int) -> Proc | None:
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # comm may hold spaces and parentheses: the fields follow the last ")".
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return Proc(pid, int(fields[1]), int(fields[2]), fields[0], comm, ticks / TICKS)


def table() -> dict[int, Proc]:
    """Every process, by pid."""
    found = (read(int(entry.name)) for entry in PROC.iterdir() if entry.name.isdigit())
    return {proc.pid: proc for proc in found if proc is not None}


def cmdline(pid: int) -> str:
    """The command line, its arguments joined by spaces; empty once the process is gone."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def children(parent: int, marker: str = "") -> list[int]:
    """The live children of parent (with marker in their command line), oldest pid first."""
    found = [proc.pid for proc in table().values() if proc.ppid == parent and proc.alive]
    return sorted(pid for pid in found if marker in cmdline(pid))


def tree(root: int) -> list[Proc]:
    """root and every process under it."""
    processes = table()
    below: dict[int, list[int]] = {}
    for proc in processes.values():
        below.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in processes:
            found.append(processes[pid])
            todo += below.get(pid, [])
    return found


def group_members(group: int) -> list[int]:
    """The live processes of a process group."""
    return [proc.pid for proc in table().values() if proc.group == group and proc.alive]


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds the processes have used."""
    return sum(proc.cpu_seconds for pid in pids if (proc := read(pid)) is not None)


def status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status by field ("VmRSS": "1234 kB", "Threads": "3"...)."""
    text = (PROC / str(pid) / "status").read_text(encoding="utf-8")
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def pss_kib(pids: Iterable[int]) -> int:
    """The processes' proportional set size, KiB: shared pages divided among their sharers."""
    total = 0
    for pid in pids:
        try:
            text = (PROC / str(pid) / "smaps_rollup").read_text(encoding="ascii")
        except OSError:  # it exited since its pid was read
            continue
        found = re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE)
        if found is None:
            raise ValueError(f"no Pss line for {pid}: {text}")
        total += int(found.group(1))
    return total
