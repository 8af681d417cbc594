"""The battery's fixtures: live stacks of one service directory, raw clients, mixed load.

Run by `./scripts/battery <project-dir>` (or `pytest battery --project=DIR [--python=PY]`:
in one word each, or pytest takes DIR for a test path before it knows the option).
The service directory is a generated project, or a user's own service of the same shape:
`src/<package>/main.py` with `create_app()`, `stack/serving_stack/` (the supervisor and its
nginx.conf), perhaps `deploy/nginx-locations.conf`. Its interpreter (`--python`, by default
DIR/.venv/bin/python, what `make install` creates) runs the stack; this process only sends
requests, signals and reads logs, so the battery needs none of the service's packages itself.

Stacks, the database, ports and /proc come from the shared harness (harness/). Each stack
starts (harness/stack.py) from a staging directory: the test apps of battery/apps/ (the
real app plus misbehaving routes) as the working directory gunicorn imports APP_MODULE
from, and a copy of the stack's nginx.conf a test may edit (NGINX_CONF points at it).
Inputs: nginx on PATH or in /usr/sbin (tests skip, saying so, where it is missing); as
root, setpriv (util-linux) to run the stack as an unprivileged user, as the image does.
Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import harness.stack
from harness import postgres
from harness.clients import get, parse_response
from harness.ports import wait_for
from harness.processes import Processes
from harness.procfs import children
from harness.stack import PATH as SYSTEM_PATH

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from harness.stack import RunningStack

APPS = Path(__file__).resolve().parent / "apps"
# Dedicated numeric identities for the stack and for an outsider when the battery runs as
# root. They need no /etc/passwd entry: nothing in the stack looks its user up by name.
STACK_UID = 48151
OUTSIDER_UID = 48152
# The supervisor stops gracefully within GRACEFUL_TIMEOUT (30 s as shipped): tests leave slow
# requests in flight, so a stack gets twice that before it is killed.
STOP_GRACE_S = 60.0

# Set by pytest_configure from --project and --python, before any test module is imported.
PROJECT = Path()
PYTHON = ""
PACKAGE = ""
FAULT_APP = "fault_app:app"
SLOW_APP = "slow_app:app"
REAL_APP = ""
APP_ACCESS_LOGGER = ""
DEADLINE_VARIABLE = ""
# The service's PostgreSQL (harness/postgres.py), where it has a database.
DATABASE: postgres.Database | None = None


def project_locations() -> dict[str, str]:
    """NGINX_LOCATIONS: the project's own nginx locations (a body limit per route), if any."""
    locations = PROJECT / "deploy" / "nginx-locations.conf"
    return {"NGINX_LOCATIONS": str(locations)} if locations.is_file() else {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("battery")
    group.addoption("--project", help="the service directory to prove (a generated project)")
    group.addoption("--python", help="its interpreter [PROJECT/.venv/bin/python]")


def pytest_configure(config: pytest.Config) -> None:
    global PROJECT, PYTHON, PACKAGE, REAL_APP, APP_ACCESS_LOGGER, DEADLINE_VARIABLE, DATABASE
    project = config.getoption("--project")
    if not project:
        raise pytest.UsageError("--project DIR: the service directory the battery proves")
    PROJECT = Path(project).resolve()
    PYTHON = config.getoption("--python") or str(PROJECT / ".venv" / "bin" / "python")
    packages = [path.parent.name for path in (PROJECT / "src").glob("*/__init__.py")]
    if len(packages) != 1 or not (PROJECT / "stack" / "serving_stack").is_dir():
        found = f"packages {packages} in src/"
        raise pytest.UsageError(f"{PROJECT} must hold one app in src/ and stack/, found {found}")
    PACKAGE = packages[0]
    REAL_APP = f"{PACKAGE}.main:app"
    APP_ACCESS_LOGGER = f"{PACKAGE}.access"
    # The request deadline: the stack's variable, which the app reads too.
    DEADLINE_VARIABLE = "REQUEST_TIMEOUT_SECONDS"
    config.addinivalue_line("markers", "live: starts the service's stack")
    # Before collection: modules build the service's app (its OpenAPI document) at import,
    # which reads DATABASE_URL: every stack of the session serves from a migrated copy.
    if (PROJECT / "alembic.ini").is_file():
        try:
            DATABASE = postgres.migrated(PROJECT, PYTHON)
        except postgres.PostgresError as error:
            raise pytest.UsageError(f"the service has a database: {error}") from None
        os.environ["DATABASE_URL"] = DATABASE.copy()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test its own node id, as its name. schemathesis 4 builds each API operation's
    fuzz test with the function's bare name as pytest 9.2 forms ids (from ``originalname``),
    and pytest-xdist hands tests out by id: two workers fuzzed one operation of five
    (tests/test_battery.py checks that every collected test reports)."""
    for item in items:
        if not item.nodeid.endswith(item.name) and item.parent is not None:
            item._id = item.parent.id.child(item.name)  # what pytest gives a test it collects


def pytest_unconfigure() -> None:
    if DATABASE is not None:
        DATABASE.server.remove()


def run_python(
    *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The service's interpreter run to its end (a refusal, a value it computes...)."""
    return subprocess.run(
        [PYTHON, *args],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ if env is None else env),
        cwd=APPS,  # never the project: its .env must not change what is tested
        timeout=60,
    )


def run_supervisor(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m serving_stack` run to its end with only env, the project's nginx locations
    and how its interpreter finds the project (PYTHONPATH, where the project is not installed)."""
    given = {
        **project_locations(),
        "APP_MODULE": REAL_APP,
        **{name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ},
    }
    return run_python("-m", "serving_stack", *args, env={**given, **env})


@pytest.fixture(scope="session")
def nginx_bin() -> str:
    """The nginx executable; the test is skipped, with the reason, where there is none."""
    found = shutil.which("nginx", path=SYSTEM_PATH)
    if found is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    return found


# --- who runs the stack ---------------------------------------------------------------------


@dataclass
class Identity:
    """Who runs the stack, and the interpreter and import path that user can use."""

    uid: int
    gid: int
    python: str
    pythonpath: list[str] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)  # the setpriv prefix, as root

    def command(self, *args: str) -> list[str]:
        return [*self.drop, *args]


def setpriv(uid: int) -> list[str]:
    return [
        shutil.which("setpriv") or "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
    ]


@pytest.fixture(scope="session")
def identity() -> Identity:
    """The service's user, or as root a dedicated unprivileged uid.

    As root, the service's interpreter may live where others cannot enter (a pyenv under
    /root): then the system's interpreter of the same version runs the same installed
    packages (its site-packages and src/, named on PYTHONPATH for that user only).
    """
    if os.geteuid() != 0:
        return Identity(os.getuid(), os.getgid(), PYTHON)
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux): cannot drop privileges")
    facts = run_python(
        "-c",
        "import sys, sysconfig; p = sysconfig.get_paths(); "
        "print(f'{sys.version_info[0]}.{sys.version_info[1]}', p['purelib'], p['platlib'])",
    ).stdout.split()
    version, *site = facts
    pythonpath = [str(PROJECT / "src"), str(PROJECT / "stack"), *dict.fromkeys(site)]
    env = {"PATH": SYSTEM_PATH, "PYTHONPATH": os.pathsep.join(pythonpath), "HOME": "/"}
    if "DATABASE_URL" in os.environ:  # importing main.py builds the app, which may need it
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    # The supervisor starts gunicorn with sys.executable: that must work too, as this user (a
    # first exec may still pass where the second, without root's capabilities, does not).
    check = (
        "import subprocess, sys\n"
        f"imports = 'import gunicorn, uvicorn_worker, {PACKAGE}.main'\n"
        "subprocess.run([sys.executable, '-c', imports], check=True)\n"
    )
    errors = []
    for python in dict.fromkeys(
        [PYTHON, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    ):
        probe = subprocess.run(
            [*setpriv(STACK_UID), python, "-c", check],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if probe.returncode == 0:
            return Identity(STACK_UID, STACK_UID, python, pythonpath, setpriv(STACK_UID))
        errors.append(f"{python}: {probe.stderr.strip().splitlines()[-1:]}")
    pytest.skip(f"no Python {version} that uid {STACK_UID} may run with the packages: {errors}")


# --- a live stack ---------------------------------------------------------------------------


def override_directives(conf: Path, directives: Mapping[str, str]) -> None:
    """Set each directive's value in an nginx config, failing if it is not there once."""
    text = conf.read_text(encoding="utf-8")
    for name, value in directives.items():
        pattern = re.compile(rf"^(\s*{name}\s+)[^;]+;", re.MULTILINE)
        text, found = pattern.subn(rf"\g<1>{value};", text)
        assert found == 1, f"{conf} has {found} {name} directives, expected one"
    conf.write_text(text, encoding="utf-8")


class Stacks:
    """Starts stacks of the service, each from a fresh staging directory; stops them all."""

    def __init__(self, nginx_bin: str, identity: Identity) -> None:
        self.nginx_bin = nginx_bin
        self.identity = identity
        self.processes = Processes(grace=STOP_GRACE_S)
        self.started: list[RunningStack] = []

    def start(
        self,
        app_module: str = FAULT_APP,
        *,
        ready: bool = True,
        shipped_limits: bool = False,
        extra_env: Mapping[str, str] | None = None,
        nginx_directives: Mapping[str, str] | None = None,
        stdout: int | None = None,
        **env: str,
    ) -> RunningStack:
        """Start the supervisor; with ready, wait until GET /livez answers through nginx; with
        shipped_limits, under the stack's own per-client limits, as a deployment has them.

        The staging directory is one a non-root user can read: pytest's own temporary
        directories are private to the user running the tests (0700). nginx_directives
        shortens timeouts in its copy of the stack's nginx.conf (they are not environment
        variables): each directive must appear exactly once. stdout: a file descriptor for the
        stack's output instead of its log file.
        """
        staging = Path(tempfile.mkdtemp(prefix="battery-stack-"))
        staging.chmod(0o755)
        for app_file in APPS.glob("*.py"):
            shutil.copy2(app_file, staging / app_file.name)
        shutil.copy2(PROJECT / "stack" / "serving_stack" / "nginx.conf", staging / "nginx.conf")
        if nginx_directives:
            override_directives(staging / "nginx.conf", nginx_directives)
        environment = {
            "HOME": str(staging / "run"),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "APP_MODULE": app_module,
            "NGINX_CONF": str(staging / "nginx.conf"),
            **project_locations(),
            "WEB_CONCURRENCY": "2",
            "NGINX_WORKER_PROCESSES": "1",
            "NGINX_BIN": self.nginx_bin,
            # The test apps build the service's app from this package.
            "SERVICE_PACKAGE": PACKAGE,
            # The app's access line shows which requests (and ids) reached it (off by default).
            f"{PACKAGE.upper()}_ACCESS_LOG": "true",
            # Load, overload and reload proofs send hundreds of requests a second from one
            # address: the per-client limits (on by default) only where a test asks for them.
            **({} if shipped_limits else {"RATE_LIMIT": "0", "CONNECTIONS_PER_CLIENT": "0"}),
            **(extra_env or {}),
            **env,
        }
        identity = self.identity
        if identity.pythonpath:
            environment["PYTHONPATH"] = os.pathsep.join(identity.pythonpath)
        stack = harness.stack.start(
            self.processes,
            staging,
            environment,
            python=identity.python,
            # gunicorn imports APP_MODULE from here; the app reads .env here (there is none).
            cwd=staging,
            prefix=identity.drop,
            owner=(identity.uid, identity.gid) if identity.drop else None,
            stdout=stdout,
        )
        self.started.append(stack)
        if ready:
            stack.wait_ready("/livez", 90)
        return stack

    def stop_all(self) -> None:
        for stack in self.started:
            stack.stop()
            shutil.rmtree(stack.workdir, ignore_errors=True)
        self.started.clear()


@pytest.fixture
def stacks(nginx_bin: str, identity: Identity) -> Iterator[Stacks]:
    """Start stacks in one test; all are stopped (and killed if need be) after it."""
    started = Stacks(nginx_bin, identity)
    yield started
    started.stop_all()


@pytest.fixture
def start_stack(stacks: Stacks) -> Callable[..., RunningStack]:
    """Start a stack of the real app plus /slow (apps/slow_app.py) by default."""

    def start(app_module: str = SLOW_APP, **env: str) -> RunningStack:
        return stacks.start(app_module, **env)

    return start


@pytest.fixture(scope="module")
def shared_stack(nginx_bin: str, identity: Identity) -> Iterator[RunningStack]:
    """One stack for a module of tests that only send requests (they do not stop it)."""
    started = Stacks(nginx_bin, identity)
    yield started.start(FAULT_APP, TRUSTED_PROXIES="192.0.2.0/24")
    started.stop_all()


@pytest.fixture(scope="module")
def real_stack(nginx_bin: str, identity: Identity) -> Iterator[RunningStack]:
    """The service's own app, as deployed, with its API docs and schema published."""
    started = Stacks(nginx_bin, identity)
    yield started.start(REAL_APP, **{f"{PACKAGE.upper()}_API_DOCS": "true"})
    started.stop_all()


# --- logs -----------------------------------------------------------------------------------


def lines_of(stack: RunningStack, logger: str) -> list[dict[str, object]]:
    """The stack's JSON log lines written by one logger ("nginx.access", the app's, ...)."""
    return [line for line in stack.log_lines() if line.get("logger") == logger]


def nginx_access(stack: RunningStack) -> list[dict[str, object]]:
    return lines_of(stack, "nginx.access")


def app_access(stack: RunningStack) -> list[dict[str, object]]:
    return lines_of(stack, APP_ACCESS_LOGGER)


def wait_for_line(
    stack: RunningStack, predicate: Callable[[dict[str, object]], bool], what: str, count: int = 1
) -> list[dict[str, object]]:
    """Poll the stack's log until count lines match; return them."""
    found: list[dict[str, object]] = []

    def enough() -> bool:
        found[:] = [line for line in stack.log_lines() if predicate(line)]
        return len(found) >= count

    wait_for(enough, 30, what)
    return found


def server_errors(stack: RunningStack) -> list[dict[str, object]]:
    """nginx access-log lines with a 5xx, or a 499 (the client gave up waiting)."""
    return [
        line
        for line in nginx_access(stack)
        if isinstance(status := line.get("status"), int) and (status >= 500 or status == 499)
    ]


def error_lines(stack: RunningStack, last: int = 6) -> list[str]:
    """The stack's last error lines (nginx's upstream errors, the app's tracebacks cut
    short): what an assertion on statuses prints, so a rare 5xx says where it came from."""
    said = [line for line in stack.log_lines() if line.get("level") in {"error", "critical"}]
    return [json.dumps(line)[:1500] for line in said[-last:]]


def parse_json(body: bytes) -> dict[str, object]:
    parsed = json.loads(body)
    assert isinstance(parsed, dict)
    return parsed


def elapsed(start: float) -> float:
    return time.monotonic() - start


# --- mixed load with keep-alive connections ---------------------------------------------------


@dataclass
class LoadReport:
    """What the clients saw: successes per method, failures, and stale keep-alive retries."""

    ok: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    # A reused keep-alive connection closed before any byte of the answer: the request never
    # reached nginx (its access log proves it), and clients resend it on a new connection.
    stale_retries: int = 0
    latencies: list[float] = field(default_factory=list)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


class _Stale(Exception):
    """The connection closed before any byte of the response arrived."""


async def _exchange_once(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire: bytes
) -> tuple[int, bytes, bool]:
    writer.write(wire)
    await writer.drain()
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if not error.partial:
            raise _Stale from error
        raise
    except ConnectionResetError as error:
        raise _Stale from error
    status, headers, _ = parse_response(head)
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, body, headers.get("connection", "").lower() != "close"


async def _client(port: int, method: str, deadline: float, report: LoadReport, expect: int) -> None:
    """One keep-alive connection sending requests back to back until the deadline."""
    # GET /livez: every service has it; POST /fault/echo: a body through the app's router.
    path = "/livez" if method == "GET" else "/fault/echo"
    body = b'{"name":"load","n":1}' if method == "POST" else b""
    wire = (
        f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    reused = False
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        if conn is None:
            conn = await asyncio.open_connection("127.0.0.1", port)
            reused = False
        started = loop.time()
        try:
            status, _, keep = await asyncio.wait_for(_exchange_once(*conn, wire), 30)
        except _Stale:
            conn[1].close()
            conn = None
            if not reused:
                report.failures.append(f"{method}: closed before answering on a new connection")
            else:
                report.stale_retries += 1
            continue
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as error:
            report.failures.append(f"{method}: {type(error).__name__}: {error}")
            conn[1].close()
            conn = None
            continue
        report.latencies.append(loop.time() - started)
        if status == expect:
            report.ok[method] += 1
        else:
            report.failures.append(f"{method}: status {status}")
        reused = True
        if not keep:
            conn[1].close()
            conn = None
    if conn is not None:
        conn[1].close()


def mixed_load(
    port: int, seconds: float, connections: int = 4
) -> tuple[threading.Thread, LoadReport]:
    """Start GET and POST keep-alive clients in a thread for seconds; join the thread to end."""
    report = LoadReport()

    async def main() -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        await asyncio.gather(
            *(_client(port, "GET", deadline, report, 200) for _ in range(connections)),
            *(_client(port, "POST", deadline, report, 201) for _ in range(connections)),
        )

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    return thread, report


_OPENAPI: list[dict[str, Any]] = []


def service_openapi() -> dict[str, Any]:
    """The service's OpenAPI document, built by its own interpreter (cached for the session)."""
    if not _OPENAPI:
        code = f"import json; from {PACKAGE}.main import create_app; "
        built = run_python("-c", code + "print(json.dumps(create_app().openapi()))")
        assert built.returncode == 0, built.stderr
        _OPENAPI.append(json.loads(built.stdout))
    return _OPENAPI[0]


def needs_the_example() -> pytest.MarkDecorator:
    """Skip, saying so, where the service lacks the template's example routes (/items).

    The tests so marked use the example resource; a service that removed it keeps the rest.
    """
    paths = service_openapi()["paths"]
    missing = [path for path in ("/items", "/items/{item_id}") if path not in paths]
    return pytest.mark.skipif(bool(missing), reason=f"no {missing}: the template's example routes")


def worker_pids(stack: RunningStack, master: int | None = None) -> set[int]:
    """The pids of the stack's live gunicorn workers: the children of ``master`` (by default
    the gunicorn the supervisor started first)."""
    return set(children(stack.child_pid("gunicorn") if master is None else master))


def never_reaches_app(stack: RunningStack, send: Callable[[], bytes]) -> int:
    """Run send(); prove nginx answered it alone; return the status nginx answered."""
    # Lines arrive a moment after their answers: a sentinel request before and after
    # brackets the hostile one, and each is waited for in both logs.
    _sentinel(stack)
    app_before, nginx_before = len(app_access(stack)), len(nginx_access(stack))
    raw = send()
    after = _sentinel(stack)
    new_app_lines = [line.get("path") for line in app_access(stack)[app_before:]]
    assert new_app_lines == [after], f"the hostile request reached the app: {new_app_lines}"
    new_nginx_lines = [
        line
        for line in nginx_access(stack)[nginx_before:]
        if not str(line.get("path")).startswith("/sentinel-")
    ]
    for line in new_nginx_lines:
        assert line.get("upstream_response_time") in {"", "-"}, f"nginx asked the app: {line}"
    return parse_response(raw)[0]


def _sentinel(stack: RunningStack) -> str:
    """Send a request the app answers (404) and wait for its line in both access logs."""
    path = f"/sentinel-{uuid.uuid4().hex}"
    assert get(stack.port, path)[0] == 404
    # One nginx worker writes its lines in order: once the sentinel's line is in, every
    # earlier request's line is too. The app logs every request it answers.
    for logger in (APP_ACCESS_LOGGER, "nginx.access"):
        wait_for_line(stack, _line_of(logger, path), f"the {logger} line for {path}")
    return path


def _line_of(logger: str, path: str) -> Callable[[dict[str, object]], bool]:
    return lambda line: line.get("logger") == logger and line.get("path") == path
