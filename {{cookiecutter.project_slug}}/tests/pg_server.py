"""A throwaway PostgreSQL server for the tests (initdb, pg_ctl) on a free loopback port with a
random password (TCP, scram-sha-256, as in production); as root it runs as ``postgres`` or
``nobody``. Standard library only: conftest.py starts it before collection.

Also the development database: `make db` runs ``python tests/pg_server.py start`` (one server
for this checkout, its address kept in .run/database.json, its URL printed) and `make db-stop`
``stop`` (the server and its data deleted)."""

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
        """A new cluster, or with ``kept`` (``address()``'s) the one already there."""
        self.bindir, self.password, self.ids = bindir, secrets.token_urlsafe(16), server_ids()
        self.root = (
            Path(tempfile.mkdtemp(prefix="pg-test-")) if kept is None else Path(kept["root"])
        )
        self.data, self.log = self.root / "data", self.root / "server.log"
        if kept is not None:
            self.password, self.port = kept["password"], int(kept["port"])
            return
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]

    def address(self) -> dict[str, str]:
        """What another process needs to find this server again (``kept`` above)."""
        return {"root": str(self.root), "port": str(self.port), "password": self.password}

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
            [str(self.bindir / program), *args], capture_output=True, text=True, check=False,
            timeout=120, env=env, user=uid, group=gid, extra_groups=None if uid is None else [],
        )  # fmt: skip
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
        self._run(
            "initdb", "--pgdata", str(self.data), "--username", USER, f"--pwfile={password_file}",
            "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        password_file.unlink()

    def start(self) -> None:
        """Start the server on 127.0.0.1:port (its unix socket in the cluster directory)."""
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 {FAST_SETTINGS}"
        self._run(
            "pg_ctl", "start", "--wait", "--timeout=60", "--pgdata", str(self.data),
            "--log", str(self.log), "-o", f"{options} -c unix_socket_directories={self.root}",
        )  # fmt: skip

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


# `make db`'s server: one per checkout, found again through this file (a secret: mode 0600).
DEV_SERVER = Path(".run") / "database.json"
DEV_DATABASE = "development"


def start_dev_server() -> str:
    """Start the development server unless it runs; its database's URL."""
    if DEV_SERVER.is_file():
        server = PostgresServer(find_bindir(), json.loads(DEV_SERVER.read_text(encoding="utf-8")))
        if server.running:
            return server.url(DEV_DATABASE)
        server.remove()  # its data outlived the server (a reboot): start afresh
    server = start_server()
    try:
        url = server.create_database("template1", DEV_DATABASE)
    except ServerError:
        server.remove()
        raise
    DEV_SERVER.parent.mkdir(exist_ok=True)
    DEV_SERVER.touch(mode=0o600)
    DEV_SERVER.write_text(json.dumps(server.address()), encoding="utf-8")
    return url


def stop_dev_server() -> str:
    """Stop the development server and delete its data; what happened."""
    if not DEV_SERVER.is_file():
        return "no development database is running (make db starts one)"
    PostgresServer(find_bindir(), json.loads(DEV_SERVER.read_text(encoding="utf-8"))).remove()
    DEV_SERVER.unlink()
    return "the development database is stopped and its data deleted"


def main(command: str) -> int:
    try:
        if command == "start":
            url = start_dev_server()
            # stdout holds only the export line: eval "$(make --silent db)" sets it.
            print(f"export DATABASE_URL='{url}'")  # noqa: T201 - the command's output
            print("a throwaway PostgreSQL (make db-stop deletes it)", file=sys.stderr)  # noqa: T201
        elif command == "stop":
            print(stop_dev_server(), file=sys.stderr)  # noqa: T201 - a report for the terminal
        else:
            print(f"usage: {sys.argv[0]} start|stop", file=sys.stderr)  # noqa: T201
            return 2
    except ServerError as error:
        print(f"error: {error}", file=sys.stderr)  # noqa: T201 - one line, no traceback
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) == 2 else ""))
