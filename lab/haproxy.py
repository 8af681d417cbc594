"""HAProxy in front of the rollout's containers, configured from the bake's docs/deploy.md.

The one ```haproxy block of that page's "## HAProxy" section is what a user copies; the
rehearsal changes only its bind address, its server lines (the pool's slots, each keeping the
documented server options) and, when asked, its retries, and adds a stats socket to read the
servers' health from: what is measured is what the page tells users to run.
"""

from __future__ import annotations

import csv
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.ports import wait_for

if TYPE_CHECKING:
    from pathlib import Path

SECTION = "## HAProxy"
BLOCK = re.compile(r"^```haproxy\n(.*?)^```", re.MULTILINE | re.DOTALL)
SLOT = "slot"  # the server lines' names: slot1, slot2...


class HAProxyError(RuntimeError):
    """HAProxy or its documented settings could not be used; the message says why."""


def binary() -> str:
    """The haproxy command, or HAProxyError with the package to install."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
    if found is None:
        raise HAProxyError("haproxy is not installed: apt-get install haproxy")
    return found


def version() -> str:
    """HAProxy's version, as `haproxy -v` prints it first ("2.6.12-1+deb12u4")."""
    done = subprocess.run([binary(), "-v"], capture_output=True, text=True, check=True)
    return done.stdout.split()[2]


def documented(page: Path) -> str:
    """The haproxy block of page's HAProxy section, as a user copies it."""
    if not page.is_file():
        raise HAProxyError(f"{page} is missing: the rehearsal runs the settings it documents")
    section = page.read_text(encoding="utf-8").partition(f"\n{SECTION}\n")[2].split("\n## ")[0]
    blocks = BLOCK.findall(section)
    if len(blocks) != 1:
        raise HAProxyError(f"{page}: {SECTION} holds {len(blocks)} haproxy blocks, not one")
    return str(blocks[0])


def rehearsal(config: str, *, port: int, slots: list[int], retries: int | None) -> str:
    """config bound to 127.0.0.1:port, its server lines replaced by one per slot (each a port
    on loopback), its `retries` set to retries (None: as documented)."""
    lines: list[str] = []
    binds = servers = retry_lines = 0
    for line in config.splitlines():
        words = line.split()
        indent = line[: len(line) - len(line.lstrip())]
        if words[:1] == ["bind"]:
            binds += 1
            lines.append(f"{indent}bind 127.0.0.1:{port}")
        elif words[:1] == ["server"]:
            servers += 1
            if servers == 1:  # the first documented server's options, on every slot
                options = " ".join(words[3:])
                lines += [
                    f"{indent}server {SLOT}{number} 127.0.0.1:{slot} {options}".rstrip()
                    for number, slot in enumerate(slots, 1)
                ]
        elif words[:1] == ["retries"] and retries is not None:
            retry_lines += 1
            lines.append(f"{indent}retries {retries}")
        else:
            lines.append(line)
    if binds != 1 or not servers or (retries is not None and retry_lines != 1):
        raise HAProxyError(
            f"the documented block has {binds} bind, {servers} server and {retry_lines} retries"
            " lines: the rehearsal needs one bind, the servers and (with --retries) one retries"
        )
    return "\n".join(lines) + "\n"


@dataclass
class HAProxy:
    """A running haproxy, its servers' health readable on its stats socket."""

    process: subprocess.Popen[bytes]
    port: int  # where clients connect, on 127.0.0.1
    stats: Path

    def statuses(self) -> dict[str, str]:
        """Each slot's status as HAProxy sees it: "UP", "DOWN", "UP 1/2" (going down)..."""
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(5)
            conn.connect(str(self.stats))
            conn.sendall(b"show stat\n")
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        rows = csv.DictReader(answer.decode().removeprefix("# ").splitlines())
        return {row["svname"]: row["status"] for row in rows if row["svname"].startswith(SLOT)}

    def status(self, slot: int) -> str | None:
        """The status of slot (1-based); None when HAProxy has no such server."""
        return self.statuses().get(f"{SLOT}{slot}")

    def wait_status(self, slot: int, status: str, timeout: float) -> None:
        """Until HAProxy reports the slot exactly status ("UP" or "DOWN")."""
        wait_for(lambda: self.status(slot) == status, timeout, f"{SLOT}{slot} {status}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def start(config: str, port: int, directory: Path) -> HAProxy:
    """haproxy in the foreground with config plus a stats socket in directory; checked first,
    so a config HAProxy refuses fails here with HAProxy's own words."""
    stats = directory / "haproxy.sock"
    text = f"global\n    stats socket {stats} mode 600 level admin\n\n{config}"
    path = directory / "haproxy.cfg"
    path.write_text(text, encoding="utf-8")
    check = subprocess.run(
        [binary(), "-c", "-q", "-f", str(path)], capture_output=True, text=True, check=False
    )
    if check.returncode != 0:
        raise HAProxyError(f"haproxy refuses the config: {check.stdout}{check.stderr}".strip())
    log = (directory / "haproxy.log").open("wb")
    process = subprocess.Popen([binary(), "-db", "-f", str(path)], stdout=log, stderr=log)
    log.close()
    proxy = HAProxy(process, port, stats)
    wait_for(stats.exists, 10, "haproxy's stats socket")
    return proxy
