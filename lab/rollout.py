"""Issue 47's rollout rehearsal: an image's containers replaced one by one under load, behind
HAProxy configured as the bake's docs/deploy.md says, every request, stream and WebSocket
session counted.

    ./scripts/bench PROJECT_DIR --rollout --image TAG [--drain SECONDS] [--retries N] [--out DIR]

REPLICAS containers of TAG (host network, each its own loopback ports, locked down as the
smoke test runs it) behind HAProxy with SLOTS server slots, a slot without a container DOWN
as in a pool found by DNS. The load (lab/rollout_load.py) runs BEFORE_S s first, for the
latency baseline; then each container is replaced as a rolling update with maxSurge 1 and
maxUnavailable 0 does: a new one on a free slot, HAProxy sees it UP, the old one stopped with
`podman stop --time GRACE` (compose.yaml's stop_grace_period, told to the stack as
STOP_GRACE_PERIOD) and waited for. A database bake gets the project's throwaway PostgreSQL
and its migration, run with the image's own alembic before the first containers and once
more before the rollout's new ones, as a deploy runs it. DRAIN_SECONDS goes to every
container (0: no drain phase); --retries replaces the documented `retries`.

Writes DIR/rollout.json and DIR/rollout.md (lab/results.py's publish). Needs podman and
haproxy; the image must be in podman's store (CONTAINERS_STORAGE_CONF names another).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from websockets.exceptions import InvalidHandshake
from websockets.sync.client import connect

from harness import clients, postgres
from harness.ports import free_port
from lab import haproxy, rollout_report
from lab.project import ProjectError
from lab.rollout_load import Load

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    from lab.project import Project

REPLICAS = 2
SLOTS = 4
BEFORE_S = 4.0  # of load before the rollout: the GETs' latency baseline
AFTER_S = 2.0  # of load after it: what the last switch still cuts
START_TIMEOUT = 120.0  # s for a new container to be UP in HAProxy (its start, then 2 checks)
LOCKED_DOWN = ("--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges")
TMPFS = ("--tmpfs=/run/app:size=16m,mode=1777", "--tmpfs=/tmp:size=128m,mode=1777")


class RolloutError(ProjectError):
    """The rehearsal could not run; the message says why."""


def podman(*args: str, timeout: float = 300, check: bool = True) -> str:
    """podman's output; RolloutError with its last line of stderr when it fails (check)."""
    found = shutil.which("podman")
    if found is None:
        raise RolloutError("podman is not installed: apt-get install podman")
    done = subprocess.run(
        [found, *args], capture_output=True, text=True, check=False, timeout=timeout
    )
    if check and done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RolloutError(f"podman {args[0]} failed ({done.returncode}): {last}")
    return done.stdout.strip()


def grace_period(project: Project) -> int:
    """compose.yaml's stop_grace_period for the app (its first), in seconds."""
    compose = (project.root / "compose.yaml").read_text(encoding="utf-8")
    found = re.search(r"^\s+stop_grace_period:\s*(\d+)s\s*$", compose, re.MULTILINE)
    if found is None:
        raise RolloutError(f"{project.root}/compose.yaml names no stop_grace_period in seconds")
    return int(found.group(1))


@dataclass
class Container:
    """One running container of the image, serving on its slot's loopback port."""

    name: str
    slot: int  # 1-based, as HAProxy's slot<N>
    started: float  # time.monotonic() at `podman run`
    up_s: float = 0.0  # from `podman run` to UP in HAProxy
    stop_s: float = 0.0  # `podman stop` until it exited
    exit_code: int | None = None


@dataclass
class Pool:
    """The image's containers, each on one of the slots' ports; removes them all at the end."""

    image: str
    env: dict[str, str]
    ports: list[tuple[int, int]]  # per slot: PORT, METRICS_PORT
    grace: int
    started: list[Container] = field(default_factory=list)

    def start(self, slot: int) -> Container:
        port, metrics = self.ports[slot - 1]
        env = self.env | {"PORT": str(port), "METRICS_PORT": str(metrics)}
        name = f"rollout-{os.getpid()}-{len(self.started) + 1}"
        options = [*LOCKED_DOWN, *TMPFS, "--network=host", f"--name={name}"]
        options += [f"--env={key}={value}" for key, value in env.items()]
        container = Container(name, slot, time.monotonic())
        self.started.append(container)
        podman("run", "--detach", *options, self.image)
        return container

    def check_running(self, container: Container) -> None:
        """RolloutError with the end of its log when container is no longer running."""
        if podman("inspect", "--format={{.State.Running}}", container.name) != "true":
            logs = podman("logs", container.name, check=False)
            raise RolloutError(f"{container.name} exited at start-up: {logs[-1500:]}")

    def stop(self, container: Container) -> None:
        """SIGTERM, then SIGKILL past the grace period, as the platform stops it; its exit."""
        started = time.monotonic()
        podman("stop", f"--time={self.grace}", container.name, timeout=self.grace + 60)
        container.stop_s = time.monotonic() - started
        code = podman("inspect", "--format={{.State.ExitCode}}", container.name)
        container.exit_code = int(code)
        podman("rm", container.name)

    def remove_all(self) -> None:
        for container in self.started:
            podman("rm", "--force", "--time=0", container.name, check=False)


def migrate(image: str, url: str) -> float:
    """The image's own migration command (its smoke test's), once; the seconds it took."""
    started = time.monotonic()
    command = [*LOCKED_DOWN, "--network=host", f"--env=DATABASE_URL={url}"]
    alembic = ["--entrypoint=alembic", image, "-c", "/app/alembic.ini", "upgrade", "head"]
    podman("run", "--rm", *command, *alembic)
    return time.monotonic() - started


@contextlib.contextmanager
def database(project: Project) -> Iterator[str | None]:
    """A fresh database on the project's throwaway PostgreSQL, or None without one."""
    if not project.database:
        yield None
        return
    server = postgres.start(project.root)
    try:
        yield str(server.create_database("template1", "rollout"))
    finally:
        server.remove()


def distinct_ports(count: int) -> list[int]:
    """count free loopback ports, no two the same."""
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def served(port: int) -> set[str]:
    """The load's kinds the service on port answers, beyond GET / and POST /items: the
    upload, stream and WebSocket routes are a bake's own (tests/documented_changes.py)."""
    kinds = {"GET", "POST"}
    if clients.request(port, "POST", "/uploads")[0] == 200:
        kinds.add("upload")
    if clients.get(port, "/events?tokens=1&interval=0")[0] == 200:
        kinds.add("stream")
    with contextlib.suppress(OSError, TimeoutError, InvalidHandshake):
        connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10).close()
        kinds.add("websocket")
    return kinds


@dataclass
class Rehearsal:
    """One rollout's settings; run() returns its figures."""

    project: Project
    image: str
    drain: float | None  # None: the image's default
    retries: int | None  # None: the documented retries

    def run(self) -> dict[str, Any]:
        """Every figure of one rollout, what it ran on and how it was set up."""
        documented = haproxy.documented(self.project.root / "docs" / "deploy.md")
        grace = grace_period(self.project)
        front, *ports = distinct_ports(2 * SLOTS + 1)
        slots = [(ports[slot], ports[SLOTS + slot]) for slot in range(SLOTS)]
        config = haproxy.rehearsal(
            documented, port=front, slots=[port for port, _ in slots], retries=self.retries
        )
        env = {"LISTEN_ADDRESS": "127.0.0.1", "STOP_GRACE_PERIOD": str(grace)}
        if self.drain is not None:
            env["DRAIN_SECONDS"] = f"{self.drain:g}"
        directory = Path(tempfile.mkdtemp(prefix="rollout-"))
        proxy = None
        with database(self.project) as url:
            pool = Pool(self.image, env | ({"DATABASE_URL": url} if url else {}), slots, grace)
            try:
                if url:  # the first deploy's migration; the rollout runs its own
                    migrate(self.image, url)
                proxy = haproxy.start(config, front, directory)
                figures = self._rollout(pool, proxy, url)
            finally:
                pool.remove_all()
                if proxy is not None:
                    proxy.stop()
                shutil.rmtree(directory, ignore_errors=True)
        figures |= {"image": self.image, "grace_seconds": grace}
        figures["drain_seconds"] = "the image's default" if self.drain is None else self.drain
        figures["retries"] = "as documented" if self.retries is None else self.retries
        figures["haproxy"] = haproxy.version()
        return figures

    def _rollout(self, pool: Pool, proxy: haproxy.HAProxy, url: str | None) -> dict[str, Any]:
        old = [up(pool, proxy, slot) for slot in range(1, REPLICAS + 1)]
        for slot in range(REPLICAS + 1, SLOTS + 1):  # HAProxy starts each server UP
            proxy.wait_status(slot, "DOWN", 10)
        kinds = served(proxy.port)
        load = Load(proxy.port, kinds)
        load.start()
        try:
            time.sleep(BEFORE_S)
            began = time.monotonic()
            migration = migrate(self.image, url) if url else None
            free = list(range(REPLICAS + 1, SLOTS + 1))
            new = []
            for container in old:
                new.append(up(pool, proxy, free.pop(0)))
                pool.stop(container)
                free.append(container.slot)
            ended = time.monotonic()
            time.sleep(AFTER_S)
        finally:
            tally = load.stop()
        phases = {"before": (began - BEFORE_S, began), "during": (began, ended)}
        containers = [vars(c) | {"started": c.started - began} for c in old + new]
        return {
            "rollout_seconds": ended - began,
            "migration_seconds": migration,
            "containers": containers,
            "kinds": sorted(kinds),
            **rollout_report.figures(tally, phases),
        }


def up(pool: Pool, proxy: haproxy.HAProxy, slot: int) -> Container:
    """A new container on slot, once HAProxy sees it UP; RolloutError if it exits first."""
    container = pool.start(slot)
    checked = container.started
    while proxy.status(slot) != "UP":
        now = time.monotonic()
        if now - container.started > START_TIMEOUT:
            raise RolloutError(f"{container.name} not UP in HAProxy after {START_TIMEOUT:g} s")
        if now - checked > 1:  # podman's answer costs more than HAProxy's
            pool.check_running(container)
            checked = now
        time.sleep(0.05)
    container.up_s = time.monotonic() - container.started
    return container


def report(project: Project, args: argparse.Namespace, command: str) -> tuple[str, str]:
    """(markdown, JSON) of one rollout."""
    if args.image is None:
        raise RolloutError("--rollout needs --image TAG: the image to roll out")
    result = Rehearsal(project, args.image, args.drain, args.retries).run()
    result["command"] = command
    return rollout_report.markdown(result), json.dumps(result, indent=2)
