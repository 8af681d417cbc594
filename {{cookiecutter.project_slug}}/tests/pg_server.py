"""A throwaway PostgreSQL server for the tests (initdb, pg_ctl) on a free loopback port with a
random password (TCP, scram-sha-256, as in production); as root it runs as ``postgres`` or
``nobody``. Standard library only: conftest.py starts it before collection.

Also `make db` (``python tests/pg_server.py start``) and `make db-stop` (``stop``): the
development database."""

import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

USER = "tester"
TOOLS = ("initdb", "pg_ctl", "createdb")
# Durability off: a test cluster is thrown away, and fsync dominates its run time otherwise.
FAST_SETTINGS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


class ServerError(RuntimeError):
    """The test server could not be found, initialised or started; the message says why."""


def find_bindir() -> Path:
    """PG_BINDIR, else the newest Debian /usr/lib/postgresql/*/bin, else initdb's on PATH."""
    debian = Path("/usr/lib/postgresql").glob("*/bin")
    candidates = sorted(debian, key=lambda path: int(path.parent.name), reverse=True)
    candidates += [Path(found).parent] if (found := shutil.which("initdb")) else []
    if explicit := os.environ.get("PG_BINDIR", "").strip():
        candidates = [Path(explicit)]
    for candidate in candidates:
        if all((candidate / tool).is_file() for tool in TOOLS):
            return candidate
    missing = f"PostgreSQL's server binaries ({', '.join(TOOLS)}) were not found"
    raise ServerError(f"{missing}: apt-get install postgresql, or point PG_BINDIR at them")


def server_ids() -> tuple[int, int] | None:
    """As root, the (uid, gid) to run the server as (PostgreSQL refuses root), else None."""
    if os.geteuid() != 0:
        return None
    users = {entry.pw_name: entry for entry in pwd.getpwall()}
    if entry := users.get("postgres") or users.get("nobody"):
        return entry.pw_uid, entry.pw_gid
    raise ServerError("running as root, and neither user postgres nor nobody exists")


class PostgresServer:
    """One cluster in a temporary directory; ``start`` and ``stop`` may repeat (restarts)."""

    def __init__(self, bindir: Path, kept: dict[str, str] | None = None) -> None:
        """A new cluster, or with ``kept`` (root, port, password) the one already there."""
        self.bindir, self.password, self.ids = bindir, secrets.token_urlsafe(16), server_ids()
        self.root = Path(kept["root"] if kept else tempfile.mkdtemp(prefix="pg-test-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        if kept:
            self.password, self.port = kept["password"], int(kept["port"])
            return
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]

    @property
    def running(self) -> bool:
        """The postmaster runs (it removes its pid file when it exits, crash stops included)."""
        return (self.data / "postmaster.pid").exists()

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` on this server, as the service reads it."""
        return f"postgresql+asyncpg://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def _run(self, program: str, *args: str) -> None:
        env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C", "TZ": "UTC"}
        env["PGPASSWORD"] = self.password
        uid, gid = self.ids or (None, None)  # as root: that user, none of root's groups
        done = subprocess.run(
            [str(self.bindir / program), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env=env,
            user=uid,
            group=gid,
            extra_groups=None if uid is None else [],
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise ServerError(f"{program} failed ({done.returncode}): {done.stderr.strip()} {log}")

    def initialise(self) -> None:
        """initdb: a UTF-8 cluster whose only role is USER, with the random password."""
        self.root.chmod(0o755)  # the stack's user reaches nothing here but the TCP port
        password_file = self.root / "password"
        password_file.write_text(self.password, encoding="utf-8")
        if self.ids:
            for path in (self.root, password_file):
                os.chown(path, *self.ids)
        login = [f"--username={USER}", f"--pwfile={password_file}", "--auth=scram-sha-256"]
        text = ["--encoding=UTF8", "--locale=C"]
        self._run("initdb", f"--pgdata={self.data}", *login, *text, "--no-sync")
        password_file.unlink()

    def start(self) -> None:
        """Start the server on 127.0.0.1:port (its unix socket in the cluster directory)."""
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 {FAST_SETTINGS}"
        options += f" -c unix_socket_directories={self.root}"
        where = [f"--pgdata={self.data}", f"--log={self.log}", f"--options={options}"]
        self._run("pg_ctl", "start", "--wait", "--timeout=60", *where)

    def create_database(self, template: str, name: str = "") -> str:
        """A new database (a random name unless named), a file copy of ``template``; its URL."""
        name = name or f"test_{secrets.token_hex(4)}"
        address = ["--host=127.0.0.1", f"--port={self.port}", f"--username={USER}"]
        self._run("createdb", *address, f"--template={template}", name)
        return self.url(name)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` disconnects clients at once, ``immediate`` is a crash."""
        self._run("pg_ctl", "stop", "--wait", "--timeout=60", "--mode", mode, "-D", str(self.data))

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
        server.remove()
        raise
    return server


# `make db`'s server: one per checkout, found again through this file (mode 0600: a password).
DEV_SERVER = Path(".run") / "database.json"


def dev_server(command: str) -> str:
    """start: `make db`'s server, started unless it runs, and the line exporting its URL;
    stop: the server stopped and its data deleted. What to print."""
    kept = json.loads(DEV_SERVER.read_text(encoding="utf-8")) if DEV_SERVER.is_file() else None
    server = PostgresServer(find_bindir(), kept) if kept else None
    if server and not (command == "start" and server.running):
        server.remove()  # stopping, or data that outlived its server (a reboot)
        DEV_SERVER.unlink()
    if command == "stop":
        return "the development database is stopped, its data deleted" if server else ""
    if not (server and server.running):
        server = start_server()
        DEV_SERVER.parent.mkdir(exist_ok=True)
        DEV_SERVER.touch(mode=0o600)  # first: should createdb fail, make db-stop still finds it
        kept = {"root": str(server.root), "port": str(server.port), "password": server.password}
        DEV_SERVER.write_text(json.dumps(kept), encoding="utf-8")
        server.create_database("template1", "development")
    return f"export DATABASE_URL='{server.url('development')}'"


if __name__ == "__main__":
    try:  # stdout: only the export line, for eval "$(make --silent db)"
        print(dev_server(sys.argv[1]))  # noqa: T201 - the command's output
    except ServerError as error:
        sys.exit(f"error: {error}")  # one line, no traceback
