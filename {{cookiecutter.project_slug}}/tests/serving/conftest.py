"""Fixtures for the serving-stack tests: the deploy/ files, nginx, and a live stack.

Inputs: nginx on PATH or in /usr/sbin (tests needing it skip, saying so, where it is
missing); when the tests run as root, setpriv (util-linux) to start the stack as an
unprivileged user, as the container does (the image runs as UID 10001, never root).
"""

from __future__ import annotations

{% if cookiecutter.layout == "serving-only" -%}
# No live-stack fixture here: it starts the generated service, which this layout leaves out.
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import ModuleType
{%- else -%}
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from types import ModuleType
{%- endif %}

PROJECT = Path(__file__).resolve().parents[2]
DEPLOY = PROJECT / "deploy"
PACKAGE = "{{ cookiecutter.package_name }}"
# Dedicated numeric identities for the stack and for an outsider when the tests run as root.
# They need no /etc/passwd entry: nothing in the stack looks its user up by name.
STACK_UID = 48151
OUTSIDER_UID = 48152
SYSTEM_PATH = f"{os.environ.get('PATH', os.defpath)}{os.pathsep}/usr/sbin"


def load_module(path: Path, name: str) -> ModuleType:
    """Import deploy/gunicorn.conf.py by its path (its name is no module name).

    The other deploy/ files are imported by name: pytest's ``pythonpath`` holds deploy/.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def gunicorn_conf() -> ModuleType:
    """deploy/gunicorn.conf.py imported as a module (its functions and its settings)."""
    return load_module(DEPLOY / "gunicorn.conf.py", "gunicorn_conf_under_test")


def container_cgroup(directory: Path, cpu_max: str) -> tuple[Path, Path]:
    """A cgroup v2 mount as a container sees it (its own cgroup at the mount's root), with
    this cpu.max line, and its /proc/self/cgroup: the arguments of deploy/cpus.py's functions."""
    root = directory / "cgroup"
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu\n", encoding="utf-8")
    (root / "cpu.max").write_text(cpu_max, encoding="utf-8")
    (directory / "self").write_text("0::/\n", encoding="utf-8")
    return root, directory / "self"


@pytest.fixture(scope="session")
def nginx_bin() -> str:
    """The nginx executable; the test is skipped, with the reason, where there is none."""
    found = shutil.which("nginx", path=SYSTEM_PATH)
    if found is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    return found


def run_runner(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """deploy/serve.py run to its end with only env (a refusal, a missing nginx...)."""
    return subprocess.run(
        [sys.executable, str(DEPLOY / "serve.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        env=dict(env),
        timeout=60,
    )


def tool(name: str) -> str:
    """A dev-group command-line tool, from this interpreter's environment or PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: it is in the dev dependency group (make install)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll condition until it holds; fail naming what did not happen in time."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)

{%- if cookiecutter.layout == "service" %}


# --- a live stack ---------------------------------------------------------------------------


@dataclass
class Identity:
    """Who runs the stack, and the interpreter and import path that user can use."""

    uid: int
    gid: int
    python: str
    pythonpath: list[str]
    drop: list[str] = field(default_factory=list)  # the setpriv prefix, as root

    def command(self, *args: str) -> list[str]:
        return [*self.drop, *args]


def _setpriv(uid: int) -> list[str]:
    return [
        shutil.which("setpriv") or "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
    ]


def _site_packages() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def find_identity(uid: int, source: Path) -> Identity:
    """The identity to run the stack as: this user, or as root a dedicated unprivileged uid.

    As root, this interpreter may live where others cannot enter (a pyenv under /root):
    then the system's interpreter of the same version runs the same installed packages.
    """
    # deploy/ too: the app's logs.py imports the stack's formatter (deploy/stack_log.py).
    pythonpath = [str(source), str(source.parent / "deploy"), *_site_packages()]
    if os.geteuid() != 0:
        return Identity(os.getuid(), os.getgid(), sys.executable, pythonpath)
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux): cannot drop privileges")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    env = {"PATH": SYSTEM_PATH, "PYTHONPATH": os.pathsep.join(pythonpath), "HOME": str(source)}
{%- if cookiecutter.database == "postgresql" %}
    # Importing main.py builds the app, whose settings need a database URL.
    env["DATABASE_URL"] = os.environ["DATABASE_URL"]
{%- endif %}
    # The runner starts gunicorn with sys.executable: that must work too, as this user.
    check = (
        "import subprocess, sys\n"
        f"imports = 'import gunicorn, uvicorn_worker, {PACKAGE}.main'\n"
        "subprocess.run([sys.executable, '-c', imports], check=True)\n"
    )
    errors = []
    for python in dict.fromkeys(candidates):
        probe = subprocess.run(
            [*_setpriv(uid), python, "-c", check],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if probe.returncode == 0:
            return Identity(uid, uid, python, pythonpath, _setpriv(uid))
        errors.append(f"{python}: {probe.stderr.strip().splitlines()[-1:]}")
    pytest.skip(f"no Python {version} that uid {uid} may run with the packages: {errors}")


@dataclass
class LiveStack:
    """deploy/serve.py running on the host, started as the container starts it."""

    process: subprocess.Popen[bytes]
    port: int
    run_dir: Path
    log_path: Path
    identity: Identity

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "gunicorn.sock"

    def log_lines(self) -> list[dict[str, object]]:
        """Every JSON line the stack wrote so far (runner, gunicorn, app, nginx)."""
        lines = []
        for raw in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                parsed = json.loads(raw)
                if isinstance(parsed, dict):
                    lines.append(parsed)
        return lines

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def child_pid(self, name: str) -> int:
        """The pid of a child the runner logged as started ("nginx" or "gunicorn")."""
        for line in self.log_lines():
            if line.get("logger") == "serve" and line.get("message") == f"started {name}":
                pid = line["pid"]
                assert isinstance(pid, int)
                return pid
        pytest.fail(f"the runner never logged starting {name}:\n{self.log_text()}")

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the runner was still running after {timeout:g} s:\n{self.log_text()}")

    def stop_everything(self) -> None:
        """Clean-up: TERM the runner, then kill whatever of the stack is left."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=60)
        for name in ("nginx", "gunicorn"):
            for line in self.log_lines():
                if line.get("message") == f"started {name}" and isinstance(line.get("pid"), int):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(int(str(line["pid"])), signal.SIGKILL)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def launch_stack(
    nginx_bin: str,
    app_module: str,
    app_files: Sequence[Path],
    env: Mapping[str, str],
    prepare_deploy: Callable[[Path], None] | None = None,
) -> tuple[LiveStack, Path]:
    """Start deploy/serve.py, as the container does, from a copy a non-root user can read.

    The copy (src/ plus ``app_files``, deploy/ after ``prepare_deploy`` edits it) sits in a
    fresh world-traversable directory, returned for the caller to remove: pytest's own
    temporary directories are private to the user running the tests (0700).
    """
    staging = Path(tempfile.mkdtemp(prefix="stack-test-"))
    staging.chmod(0o755)
    source = staging / "src"
    shutil.copytree(PROJECT / "src", source)
    for app_file in app_files:
        shutil.copy2(app_file, source / app_file.name)
    shutil.copytree(DEPLOY, staging / "deploy")
    if prepare_deploy is not None:
        prepare_deploy(staging / "deploy")
    run_dir = staging / "run"
    run_dir.mkdir(mode=0o755)
    identity = find_identity(STACK_UID, source)
    if identity.drop:
        os.chown(run_dir, identity.uid, identity.gid)
    port = free_port()
    environment = {
        "PATH": SYSTEM_PATH,
        "HOME": str(run_dir),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(identity.pythonpath),
        "PYTHONDONTWRITEBYTECODE": "1",
        "RUN_DIR": str(run_dir),
        "PORT": str(port),
        # Never the default 9464: stacks run side by side (and one may be a developer's).
        "METRICS_PORT": str(free_port()),
        "LISTEN_ADDRESS": "127.0.0.1",
        "APP_MODULE": app_module,
        "WEB_CONCURRENCY": "2",
        "NGINX_WORKER_PROCESSES": "1",
        "NGINX_BIN": nginx_bin,
        # The app's access line shows which requests (and ids) reached it (off by default).
        "{{ cookiecutter.package_name | upper }}_ACCESS_LOG": "true",
{%- if cookiecutter.database == "postgresql" %}
        # The session's throwaway PostgreSQL (tests/conftest.py); a test may pass another.
        "DATABASE_URL": os.environ["DATABASE_URL"],
{%- endif %}
        **env,
    }
    log_path = staging / "stack.log"
    with log_path.open("wb") as output:
        process = subprocess.Popen(
            identity.command(identity.python, str(staging / "deploy" / "serve.py")),
            env=environment,
            # Not the project: the app reads .env from its working directory, and a
            # developer's own must not change what the tests start.
            cwd=staging,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    return LiveStack(process, port, run_dir, log_path, identity), staging


@pytest.fixture
def start_stack(nginx_bin: str) -> Iterator[Callable[..., LiveStack]]:
    """Start deploy/serve.py from a copy of the project a non-root user can read.

    The copy sits in a fresh world-traversable directory: pytest's own temporary
    directories are private to the user running the tests (0700), like a home directory.
    """
    started: list[tuple[LiveStack, Path]] = []

    def start(app_module: str = f"{PACKAGE}.main:app", **env: str) -> LiveStack:
        stack, staging = launch_stack(
            nginx_bin, app_module, [Path(__file__).with_name("slow_app.py")], env
        )
        started.append((stack, staging))
        process = stack.process
        wait_for(
            lambda: process.poll() is not None or _answers(f"{stack.base}/livez"),
            90,
            f"the stack to answer GET /livez on port {stack.port}",
        )
        assert process.poll() is None, f"the runner exited during start:\n{stack.log_text()}"
        return stack

    yield start
    for stack, staging in started:
        stack.stop_everything()
        shutil.rmtree(staging, ignore_errors=True)


def _answers(url: str) -> bool:
    import urllib.request  # noqa: PLC0415 - only the live tests need it

    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)
    except OSError:
        return False
{%- endif %}
