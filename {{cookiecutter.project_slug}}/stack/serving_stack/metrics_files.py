"""Metric files a full filesystem cannot turn into a crash (SIGBUS; README.md's design notes):
created allocated, each next doubling reserved. Standard library only: the gunicorn master
imports this and must never import prometheus_client."""

from __future__ import annotations

import ctypes
import errno
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

# prometheus_client's initial file size (a file keeps a size it has: never a correctness risk).
INITIAL_SIZE = 1 << 16
# The dead workers' values, a file of each kind (counter_archive.db: metrics_listener.Archive);
# no pid in the name, so never taken for a worker's file (file_pid).
ARCHIVE = "archive"
# What the template's app writes (its WebSocket counters and readiness gauge too: files made
# at its start, unallocated, killed a worker with SIGBUS on a full disk); kinds other code
# adds are learned (kinds()).
KINDS = ("histogram", "counter", "gauge_livesum", "gauge_livemostrecent")
_FALLOC_FL_KEEP_SIZE = 1  # linux/falloc.h: allocate past the end, leave the size alone
try:  # libc's fallocate(2); None where it is missing (not Linux)
    _FALLOCATE: Any = ctypes.CDLL(None, use_errno=True).fallocate
    _FALLOCATE.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
except (OSError, AttributeError):
    _FALLOCATE = None


def reserve(fd: int, length: int) -> None:
    """Allocate a file's first length bytes, its size unchanged; OSError (ENOSPC) if refused."""
    if _FALLOCATE is None:
        return
    if _FALLOCATE(fd, _FALLOC_FL_KEEP_SIZE, 0, length) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EOPNOTSUPP, errno.ENOSYS):  # a filesystem without it
            raise OSError(code, os.strerror(code))


def file_pid(path: Path) -> int | None:
    """The pid in a metric file's name (``histogram_123.db``), or None."""
    kind, _, pid = path.stem.rpartition("_")
    return int(pid) if kind and pid.isdigit() else None


def file_kind(path: Path) -> str:
    return path.stem.rpartition("_")[0]  # histogram_123.db: histogram


def kinds(directory: Path) -> set[str]:
    """The file kinds a worker will write: the template's, and those of the files there (the
    archive's too), so code that adds a counter gets its file allocated too."""
    return {*KINDS, *(file_kind(path) for path in directory.glob("*_*.db"))}


def prepare_worker(
    directory: Path, pid: int, wanted: Iterable[str] | None = None
) -> OSError | None:
    """Create and allocate a process's metric files of the kinds wanted (default: kinds());
    the OSError if the filesystem refuses (its new files removed)."""
    created: list[Path] = []
    try:
        for kind in sorted(kinds(directory) if wanted is None else wanted):
            path = directory / f"{kind}_{pid}.db"
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o660)
            try:
                size = os.fstat(fd).st_size
                if size == 0:
                    created.append(path)
                size = max(size, INITIAL_SIZE)
                os.posix_fallocate(fd, 0, size)
                reserve(fd, 2 * size)
            finally:
                os.close(fd)
    except OSError as exc:
        for path in created:
            path.unlink(missing_ok=True)
        return exc
    return None


def reserve_growth(path: Path) -> None:
    """Reserve a metric file's next doubling (prometheus_client's truncate(2) keeps them)."""
    fd = os.open(path, os.O_RDWR)
    try:
        stat = os.fstat(fd)
        if stat.st_size and stat.st_blocks * 512 < 2 * stat.st_size:
            reserve(fd, 2 * stat.st_size)
    finally:
        os.close(fd)
