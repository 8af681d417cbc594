"""A download larger than nginx's buffers, read slowly: it arrives whole and nginx never spools
it to its temp directory, where a full spool (the image's is a 128 MiB tmpfs) ended it early,
logged as a 200."""

from __future__ import annotations

import contextlib
import http.client
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness import procfs

from .conftest import FAULT_APP

if TYPE_CHECKING:
    from .conftest import Stacks

DOWNLOAD_MIB = 24
READ = 256 * 1024  # a read every 30 ms: about 8 MiB/s, slower than the app sends


def spooled_bytes(workers: list[int], spool: Path) -> int:
    """The bytes of the files under spool that nginx's workers hold open. nginx removes a temp
    file as it creates it: only the worker's descriptor still names it."""
    total = 0
    for pid in workers:
        for descriptor in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(FileNotFoundError):  # closed meanwhile
                if descriptor.readlink().is_relative_to(spool):
                    total += descriptor.stat().st_size
    return total


def test_a_slow_download_arrives_whole_and_is_never_spooled(stacks: Stacks) -> None:
    """24 MiB read slowly: every byte and the chunked end arrive, and nginx's proxy temp
    directory stays empty throughout: the app's sends wait for the client instead."""
    stack = stacks.start(FAULT_APP)
    spool = stack.run_dir / "nginx-temp" / "proxy"
    workers = procfs.children(stack.child_pid("nginx"))
    connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=30)
    connection.request("GET", f"/fault/download?mib={DOWNLOAD_MIB}")
    response = connection.getresponse()
    received, most_spooled = 0, 0
    while chunk := response.read(READ):  # http.client ends at the chunked end, else raises
        received += len(chunk)
        most_spooled = max(most_spooled, spooled_bytes(workers, spool))
        time.sleep(0.03)
    connection.close()

    assert (response.status, received) == (200, DOWNLOAD_MIB << 20)
    assert most_spooled == 0, f"nginx spooled {most_spooled} bytes of the download"
