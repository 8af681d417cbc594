"""Where the nginx hop's cost goes: CPU time per request of each process, direct vs via nginx.

Requests/s on a shared machine measure the neighbours; CPU seconds per request barely move
with them. For each endpoint (small JSON, 1 MiB) this runs wrk against gunicorn directly and
through nginx -> unix socket -> gunicorn, both stacks started once and run side by side, and
divides each process group's CPU time (user + system, /proc/<pid>/stat, children included)
and wrk's own by the requests served. On a machine whose CPUs are all busy, the hop's ratio
can be no better than (app + wrk) / (app' + nginx + wrk): the printed "CPU-bound ratio".

Depends on the template's lab (servers, wrk, experiments' ServerSet and Front) and Linux's
/proc. Run through `scripts/experiments --cpu-share`.
"""

from __future__ import annotations

import resource
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from harness import procfs
from harness.processes import Processes
from lab.experiments import LARGE, SMALL, Front, ServerSet
from lab.servers import Launcher
from lab.wrk import WrkResult, find_wrk, parse_wrk_output, wrk_command

if TYPE_CHECKING:
    from lab.project import Project


def group_cpu_seconds(group: int) -> float:
    """User + system CPU seconds of every live process in a process group."""
    return procfs.cpu_seconds(procfs.group_members(group))


def _load(url: str, seconds: int, groups: dict[str, int]) -> tuple[WrkResult, dict[str, float]]:
    """One wrk run; CPU microseconds per request of each group and of wrk."""
    before = {name: group_cpu_seconds(group) for name, group in groups.items()}
    started = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(  # noqa: S603 - wrk, with the argument list lab/wrk.py builds
        wrk_command(find_wrk(), url, duration_s=seconds, connections=64),
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 30,
    )
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = parse_wrk_output(done.stdout)
    per_request = {
        name: (group_cpu_seconds(group) - before[name]) / result.requests * 1e6
        for name, group in groups.items()
    }
    wrk_s = (ended.ru_utime - started.ru_utime) + (ended.ru_stime - started.ru_stime)
    per_request["wrk"] = wrk_s / result.requests * 1e6
    return result, per_request


def cpu_share(project: Project, seconds: int = 8) -> str:
    """Measure and return a Markdown table."""
    rows = [
        "| endpoint | path | requests/s | app us | nginx us | wrk us | CPU-bound ratio |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    processes = Processes()
    with tempfile.TemporaryDirectory(prefix="cpu-share-") as workdir:
        Path(workdir).chmod(0o755)  # nginx's workers (another user as root) reach the socket
        launcher = Launcher(project, Path(workdir), processes)
        try:
            direct_url = launcher.start(ServerSet(), SMALL)
            (direct,) = processes.running
            nginx_url = launcher.start(ServerSet(front=Front()), SMALL)
            app, proxy = processes.running[1:]
            groups = {
                "direct": direct.popen.pid,
                "app": app.popen.pid,
                "nginx": proxy.popen.pid,
            }
            for label, path in (("small JSON", SMALL), ("1 MiB", LARGE)):
                measured = {}
                for how, url in (("direct", direct_url), ("nginx", nginx_url)):
                    _load(url + path, 2, groups)  # warm-up, thrown away
                    measured[how] = _load(url + path, seconds, groups)
                (d, dcpu), (n, ncpu) = measured["direct"], measured["nginx"]
                bound = (dcpu["direct"] + dcpu["wrk"]) / (ncpu["app"] + ncpu["nginx"] + ncpu["wrk"])
                rows.append(
                    f"| {label} | gunicorn direct | {d.requests_per_s:,.0f} "
                    f"| {dcpu['direct']:.0f} | - | {dcpu['wrk']:.0f} | |"
                )
                rows.append(
                    f"| {label} | nginx -> socket -> gunicorn | {n.requests_per_s:,.0f} "
                    f"| {ncpu['app']:.0f} | {ncpu['nginx']:.0f} | {ncpu['wrk']:.0f} "
                    f"| {bound:.2f} x |"
                )
        finally:
            processes.stop_all()
    return "\n".join(rows)
