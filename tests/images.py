"""The generated projects' images, built and smoke-tested here with podman (tests/test_image.py).

There is no Docker daemon and no container registry on the machines the template's tests run
on, only Debian's archive and PyPI. So the Dockerfile's base, ``python:<ver>-slim-trixie``, is
a stand-in made once by the bake's own recipe, the sh block of its docs/container.md's
"Building without a registry" (debootstrap from the mirror apt already uses; the page says how
it differs), run as written and kept in the tests' cache directory under the official name
(the recipe's hash recorded beside it: a new recipe makes a new stand-in), and podman builds
and runs the unchanged Dockerfile with the settings this machine kind needs (FACTS: runc,
ulimits within the hard limits, ``--format docker`` to keep the HEALTHCHECK, the host's CA
bundle for pip behind an intercepting proxy).

Run by the full suites (tests/full_suites.py) as ``python -m tests.images COMMAND PROJECT TAG``
from the template's directory: ``build`` (the stand-in base when missing, then ``make image``),
``smoke`` (the project's own .github/smoke-test.sh; with a database, against the project's
throwaway PostgreSQL from its tests/pg_server.py).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import yaml

from harness import postgres
from harness.ports import free_port

# The same directory as tests/conftest.py's CACHE_DIR (this module also runs as a script).
CACHE_DIR = Path(tempfile.gettempdir()) / "cookiecutter-fastapi-service-cache"
PODMAN_DIR = CACHE_DIR / "podman"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# The bake's own recipe for the base where no registry answers: one sh block, run as written.
SECTION = "## Building without a registry"
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


class ImageError(RuntimeError):
    """A step could not run here; the message says why in one line."""


def engine_env() -> dict[str, str]:
    """The environment podman needs on this machine kind, its configuration written once.

    runc, because crun refuses a hybrid cgroup v1/v2 host; default ulimits within this
    process's hard limits, because podman's defaults exceed a sandbox's and setrlimit fails;
    a private store in the cache directory, so the stand-in base and layers outlive the run.
    """
    PODMAN_DIR.mkdir(parents=True, exist_ok=True)
    nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)
    conf = PODMAN_DIR / "containers.conf"
    _write_whole(
        conf,
        f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        '[engine]\nruntime = "runc"\n',
    )
    storage = PODMAN_DIR / "storage.conf"
    _write_whole(
        storage,
        f'[storage]\ndriver = "overlay"\ngraphroot = "{PODMAN_DIR / "store"}"\n'
        f'runroot = "{PODMAN_DIR / "run"}"\n',
    )
    env = dict(os.environ, CONTAINERS_CONF=str(conf), CONTAINERS_STORAGE_CONF=str(storage))
    env["PATH"] = f"{env.get('PATH', os.defpath)}:/usr/sbin:/sbin"
    return env


def _write_whole(path: Path, text: str) -> None:
    """Replace path's text at once: suites run side by side, and another's podman reading a
    half-written storage.conf failed a CI run ("runroot must be set")."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    staged = path.with_name(f"{path.name}.{os.getpid()}")
    staged.write_text(text, encoding="utf-8")
    staged.replace(path)


def podman(*args: str, check: bool = True, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run podman with engine_env(); a failure raises ImageError with its stderr's last line."""
    if shutil.which("podman") is None:
        raise ImageError("podman is not installed: apt-get install podman runc debootstrap")
    done = subprocess.run(
        ["podman", *args], env=engine_env(), capture_output=True, text=True, check=False, **kwargs
    )  # type: ignore[call-overload]  # kwargs are subprocess.run's own (input=, timeout=)
    if check and done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ImageError(f"podman {args[0]} failed ({done.returncode}): {last}")
    return done  # type: ignore[no-any-return]  # subprocess.run's overloads lose the type


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """One process at a time (the default and postgresql builds both need the stand-in)."""
    PODMAN_DIR.mkdir(parents=True, exist_ok=True)
    with (PODMAN_DIR / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def recipe(project: Path) -> str:
    """The stand-in recipe of the project's docs/container.md, the block a user saves and runs."""
    page = project / "docs" / "container.md"
    section = page.read_text(encoding="utf-8").partition(f"\n{SECTION}\n")[2].split("\n## ")[0]
    blocks = BLOCK.findall(section)
    if len(blocks) != 1:
        raise ImageError(f"{page}: {SECTION} holds {len(blocks)} sh blocks, not one")
    return str(blocks[0])


def base_image(project: Path, python_version: str) -> str:
    """The stand-in for python:<version>-slim-trixie, made by the project's documented recipe
    once per recipe (a record beside the store holds its hash and the image it made); its name."""
    name = f"docker.io/library/python:{python_version}-slim-trixie"
    script = recipe(project)
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    record = PODMAN_DIR / f"stand-in-{python_version}.made"
    with locked("base"):
        recorded = record.read_text(encoding="utf-8").split() if record.is_file() else []
        if recorded == [digest, image_id(name)]:
            return name
        if os.geteuid() != 0 or shutil.which("debootstrap") is None:
            raise ImageError(
                f"{name} is missing and only root with debootstrap can make its stand-in here"
            )
        started = time.monotonic()
        done = subprocess.run(
            ["sh", "-eu", "-c", script],
            env=engine_env() | {"ENGINE": "podman"},
            capture_output=True,
            text=True,
            check=False,
        )
        made = image_id(name)
        if done.returncode != 0 or not made:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:]
            raise ImageError(f"docs/container.md's stand-in recipe failed: {' '.join(last)}")
        record.write_text(f"{digest} {made}\n", encoding="utf-8")
        print(f"made the stand-in {name} in {time.monotonic() - started:.0f} s")
    return name


def build(project: Path, tag: str) -> None:
    """The stand-in base if missing, then the project's own `make image` with podman."""
    answers = json.loads((project / ".cookiecutter-answers.json").read_text(encoding="utf-8"))
    base_image(project, answers["default_context"]["python_version"])
    # pip inside the build trusts the host's CA bundle: HTTPS may be intercepted here.
    flags = ["--pull=never"]
    if CA_BUNDLE.is_file():
        flags.append(f"--volume={CA_BUNDLE}:{CA_BUNDLE}:ro")
    previous = image_id(tag)
    # Each multi-stage build leaves its build stage behind untagged; an hour later no build
    # of this run can still need them.
    podman("image", "prune", "--force", "--filter", "until=1h", check=False)
    started = time.monotonic()
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(project),
            "image",
            "ENGINE=podman",
            f"IMAGE={tag}",
            f"BUILD_FLAGS={' '.join(flags)}",
        ],
        env=engine_env(),
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ImageError(f"make image failed ({done.returncode}) in {project}")
    print(f"built {tag} in {time.monotonic() - started:.0f} s")
    # The store outlives the run: the image this build replaced goes (its layers the new one
    # shares stay), or every run would leave one behind.
    if previous and previous != image_id(tag):
        podman("rmi", previous, check=False)


def image_id(image: str) -> str:
    """The id of ``image`` in the store, or "" when it is not there."""
    return podman("image", "inspect", "--format", "{{.Id}}", image, check=False).stdout.strip()


def smoke(project: Path, tag: str) -> None:
    """The project's .github/smoke-test.sh against ``tag``; a database project gets a real one.

    With a database: the project's own throwaway PostgreSQL (tests/pg_server.py, on loopback),
    a fresh database on it, and SMOKE_DATABASE_URL, which makes the smoke test run the
    migration step and the items endpoints against it.
    """
    env = engine_env() | {"SMOKE_ENGINE": "podman"}
    server = None
    if (project / "tests" / "pg_server.py").is_file():
        server = postgres.start(project)
        env["SMOKE_DATABASE_URL"] = server.create_database("template1", "smoke")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(project / ".github" / "smoke-test.sh"), tag], env=env, check=False
        )
    finally:
        if server is not None:
            server.remove()
    if done.returncode != 0:
        raise ImageError(f".github/smoke-test.sh {tag} exited {done.returncode}")
    print(f"smoke-tested {tag} in {time.monotonic() - started:.0f} s")


def compose(project: Path, tag: str) -> None:
    """compose.yaml's app service with podman-compose, on the image ``tag``: healthy, /livez
    through nginx, read-only with its two tmpfs mounts, exit 0 when stopped.

    Only its ports change (free ones, in a copy beside it, so `build: .` still means the
    project); a service with a database needs the postgres image, which no registry here has.
    """
    config = yaml.safe_load((project / "compose.yaml").read_text(encoding="utf-8"))
    service = config["services"]["app"]
    ports = [free_port(), free_port()]
    service["ports"] = [f"127.0.0.1:{ports[0]}:8080", f"127.0.0.1:{ports[1]}:9464"]
    copy = project / "build" / "compose.test.yaml"
    copy.parent.mkdir(exist_ok=True)
    copy.write_text(yaml.safe_dump(config), encoding="utf-8")
    podman("tag", tag, service["image"])
    name, env = "template-test-compose", engine_env()
    command = ["podman-compose", "--project-name", name, "--file", str(copy)]

    def run(*args: str) -> None:
        done = subprocess.run(
            [*command, *args], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ImageError(f"podman-compose {args[0]} failed: {done.stderr.strip()[-300:]}")

    container = f"{name}_app_1"
    run("up", "--detach", "--no-build")
    try:
        wait_healthy(container)
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/livez", timeout=5) as answer:
            if answer.status != 200:
                raise ImageError(f"GET /livez through compose's port answered {answer.status}")
        host = json.loads(podman("inspect", container).stdout)[0]["HostConfig"]
        # podman adds tmpfs of its own on /run and /var/tmp to a read-only container.
        mounts = {entry.split(":")[0] for entry in service["tmpfs"]}
        if not host["ReadonlyRootfs"] or not mounts <= set(host["Tmpfs"]):
            raise ImageError(f"{container} is not read-only with its two tmpfs: {host['Tmpfs']}")
        run("stop")
        state = json.loads(podman("inspect", container).stdout)[0]["State"]
        if state["ExitCode"] != 0:
            raise ImageError(f"{container} exited {state['ExitCode']} when stopped")
    finally:
        run("down")
    print("compose.yaml under podman-compose: healthy, /livez 200, read-only, stopped with 0")


def wait_healthy(container: str, seconds: int = 90) -> None:
    """Until the image's HEALTHCHECK passes in ``container``: no systemd timer runs podman's
    health checks here, so this runs them, as smoke-test.sh does."""
    for _ in range(seconds):
        if podman("healthcheck", "run", container, check=False).returncode == 0:
            return
        time.sleep(1)
    logs = podman("logs", container, check=False)
    raise ImageError(f"{container} never turned healthy: {(logs.stdout + logs.stderr)[-600:]}")


@contextlib.contextmanager
def running(image: str, env: dict[str, str]) -> Iterator[int]:
    """``image`` run as smoke-test.sh runs it (read-only root, no capabilities, the two
    tmpfs), with ``env`` added, until healthy; the loopback port its nginx answers on."""
    port, name = free_port(), f"template-test-run-{os.getpid()}"
    options = [
        "--read-only",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--tmpfs=/run/app:size=16m,mode=1777",
        "--tmpfs=/tmp:size=128m,mode=1777",
        f"--publish=127.0.0.1:{port}:8080",
        *(f"--env={key}={value}" for key, value in env.items()),
    ]
    podman("rm", "--force", name, check=False)
    podman("run", "--detach", f"--name={name}", *options, image)
    try:
        wait_healthy(name)
        yield port
    finally:
        podman("rm", "--force", name, check=False)


def tag(suite: str) -> str:
    """The image a full suite (tests/conftest.py) builds, in the store it shares with others."""
    return f"localhost/template-test-{suite}:latest"


def inspect(image: str) -> dict[str, object]:
    """podman's `image inspect` of ``image``: Size (bytes), History, RootFS.Layers..."""
    found: list[dict[str, object]] = json.loads(podman("image", "inspect", image).stdout)
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "smoke", "compose"])
    parser.add_argument("project", type=Path)
    parser.add_argument("tag")
    arguments = parser.parse_args()
    try:
        commands = {"build": build, "smoke": smoke, "compose": compose}
        commands[arguments.command](arguments.project, arguments.tag)
    except (ImageError, postgres.PostgresError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
