"""A throwaway PostgreSQL server for the tests, from the installed server binaries.

initdb makes a cluster in a fresh temporary directory and pg_ctl runs it on a free loopback
port, with a random password (scram-sha-256), as an unprivileged user: PostgreSQL refuses to
run as root, so as root the server runs as a dedicated uid through setpriv (util-linux).
Nothing here is a stand-in: the tests talk to a real server over TCP, as production does.

Inputs: the binaries' directory from PG_BINDIR, else ``pg_config --bindir``, else the
newest /usr/lib/postgresql/*/bin (Debian's `postgresql` package), else initdb on PATH.
Standard library only, so tests/conftest.py can start it before collection.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Who runs the server when the tests run as root: initdb insists on a user with a passwd
# entry, so an existing unprivileged one (Debian's package creates `postgres`).
SERVER_USERS = ("postgres", "nobody")
USER = "tester"
INSTALL_HINT = (
    "PostgreSQL's server binaries (initdb, pg_ctl) were not found: install them "
    "(Debian/Ubuntu: apt-get install postgresql) or point PG_BINDIR at their directory"
)
# Durability off: a test cluster is thrown away, and fsync dominates its run time otherwise.
FAST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


class ServerError(RuntimeError):
    """The test server could not be found, initialised or started; the message says why."""


def _has_server(directory: Path) -> bool:
    return (directory / "initdb").is_file() and (directory / "pg_ctl").is_file()


def find_bindir(environ: dict[str, str] | None = None) -> Path:
    """The directory holding initdb and pg_ctl; ServerError naming the fix if there is none."""
    environ = dict(os.environ) if environ is None else environ
    if explicit := environ.get("PG_BINDIR", "").strip():
        if not _has_server(Path(explicit)):
            raise ServerError(f"PG_BINDIR={explicit} holds no initdb and pg_ctl")
        return Path(explicit)
    candidates = []
    if pg_config := shutil.which("pg_config"):
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(Path(found.stdout.strip()))
    candidates += sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
        reverse=True,
    )
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).parent)
    for candidate in candidates:
        if _has_server(candidate):
            return candidate
    raise ServerError(INSTALL_HINT)


def server_ids() -> tuple[int, int] | None:
    """The (uid, gid) to run the server as when root, else None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in SERVER_USERS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise ServerError(
        f"running as root, and none of the users {SERVER_USERS} exists to run PostgreSQL"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass
class PostgresServer:
    """One cluster in a temporary directory; ``start`` and ``stop`` may repeat (restarts)."""

    bindir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pg-test-")))
    port: int = field(default_factory=_free_port)
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def running(self) -> bool:
        """The postmaster runs (it removes its pid file when it exits, crash stops included)."""
        return (self.data / "postmaster.pid").exists()

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` on this server, as the service reads it."""
        return f"postgresql+asyncpg://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        # As root: run as an unprivileged user. Elsewhere as the user running the tests.
        drop = []
        if ids := server_ids():
            drop = [shutil.which("setpriv") or "setpriv", f"--reuid={ids[0]}"]
            drop += [f"--regid={ids[1]}", "--clear-groups", "--inh-caps=-all"]
        result = subprocess.run(
            [*drop, *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env={"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C", "TZ": "UTC"},
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise ServerError(
                f"{Path(args[0]).name} failed ({result.returncode}): {result.stderr.strip()} {log}"
            )

    def initialise(self) -> None:
        """initdb: a UTF-8 cluster whose only role is USER, with the random password."""
        self.root.chmod(0o755)  # the stack's user reaches nothing here but the TCP port
        password_file = self.root / "password"
        password_file.write_text(self.password, encoding="utf-8")
        if ids := server_ids():
            os.chown(self.root, *ids)
            os.chown(password_file, *ids)
        self._run(
            str(self.bindir / "initdb"), "--pgdata", str(self.data), "--username", USER,
            f"--pwfile={password_file}", "--auth=scram-sha-256", "--encoding=UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        password_file.unlink()

    def start(self) -> None:
        """Start the server on 127.0.0.1:port (its unix socket in the cluster directory)."""
        options = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={self.root}",
            "-c max_connections=100",
            *(f"-c {setting}" for setting in FAST_SETTINGS),
        ]
        self._run(
            str(self.bindir / "pg_ctl"), "start", "--wait", "--timeout=60",
            "--pgdata", str(self.data), "--log", str(self.log), "-o", " ".join(options),
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` disconnects clients at once, ``immediate`` is a crash."""
        self._run(
            str(self.bindir / "pg_ctl"), "stop", "--wait", "--timeout=60", "--mode", mode,
            "--pgdata", str(self.data),
        )  # fmt: skip

    def remove(self) -> None:
        """Stop the server if it runs and delete the cluster."""
        if self.running:
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> PostgresServer:
    """Find the binaries, initialise a cluster and start it; ServerError says what failed."""
    server = PostgresServer(find_bindir())
    try:
        server.initialise()
        server.start()
    except Exception:
        shutil.rmtree(server.root, ignore_errors=True)
        raise
    return server
