"""Node.js packages from a lock file, installed by npm fetched from its registry.

Debian's `npm` package brings about 400 more Debian packages (node-gyp's build chain among
them) into a fresh machine's set-up, for one `npm ci`; npm's own tarball on the registry is
self-contained, so the set-up installs `nodejs` alone and the tests fetch npm once, checked
against the SHA-256 recorded here, the same version on every machine.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
import urllib.request
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# 10.9 is the last npm line that runs on Debian bookworm's Node.js (18.20): npm 11 asks for 20.17.
NPM_VERSION = "10.9.9"
NPM_TARBALL = f"https://registry.npmjs.org/npm/-/npm-{NPM_VERSION}.tgz"
# Its SHA-256, taken when it was pinned (the registry also publishes its sha512 integrity).
NPM_SHA256 = "c80bd097147cce32e31010b791bab8c71a26a5e10668210ec9d2e7f4c7cea2a1"
# What is read of the answer at most: the tarball is about 2.5 MB.
TARBALL_MOST = 64 * 1024 * 1024


class NpmError(RuntimeError):
    """npm could not be fetched, or installing the lock failed: one line says why."""


def fetch_npm(cache: Path) -> Path:
    """npm-cli.js of NPM_VERSION, downloaded into cache once, refused if its digest differs."""
    cli = cache / f"npm-{NPM_VERSION}" / "package" / "bin" / "npm-cli.js"
    if cli.is_file():
        return cli
    with urllib.request.urlopen(NPM_TARBALL, timeout=120) as answer:
        data = answer.read(TARBALL_MOST)  # more is refused by the digest below, unread
    if hashlib.sha256(data).hexdigest() != NPM_SHA256:
        raise NpmError(f"{NPM_TARBALL} does not match its recorded SHA-256; not installed")
    unpacked = cli.parents[2].with_suffix(".partial")
    shutil.rmtree(unpacked, ignore_errors=True)
    # The digest vouches for the contents; where Python has the data filter (3.11.4 on, not
    # bookworm's 3.11.2), it refuses links out of the directory and devices as well.
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extraction_filter = tarfile.data_filter
        archive.extractall(unpacked)  # noqa: S202 (checked against NPM_SHA256 above)
    unpacked.rename(cli.parents[2])  # whole or not at all: a cut download leaves no half npm
    return cli


def install_locked(project: Path, cache: Path) -> Path:
    """node_modules of project's package.json and package-lock.json (`npm ci`: exactly the
    lock), installed into cache once per lock; returns that node_modules directory."""
    lock = (project / "package-lock.json").read_bytes()
    prefix = cache / f"npm-ci-{hashlib.sha256(lock).hexdigest()[:16]}"
    if not (prefix / "ok").exists():
        node = shutil.which("node")
        if node is None:
            raise NpmError("Node.js is not installed (sudo apt-get install -y nodejs)")
        cli = fetch_npm(cache)
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(project / name, prefix / name)
        command = [node, str(cli), "ci", "--no-audit", "--no-fund", "--ignore-scripts"]
        done = subprocess.run(
            command, check=False, cwd=prefix, capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise NpmError(f"npm ci in {prefix} failed: {done.stderr.strip()[-2000:]}")
        (prefix / "ok").write_text(NPM_VERSION, encoding="utf-8")
    return prefix / "node_modules"
