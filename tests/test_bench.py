"""The generated project's benchmark as CI runs it: `make bench-quick`, then `make bench-check`.

Real gunicorn, nginx and wrk on 127.0.0.1 (scripts/test installs wrk and nginx-light).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from .conftest import Bake, ProjectEnv

QUICK_BUDGET_S = 60.0


def leftover_processes(project: Path) -> list[str]:
    """Processes still running in the project directory (the benchmark starts every server
    there) or naming it on their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = (entry / "cwd").resolve()
        except OSError:
            continue
        if cwd == project.resolve() or str(project) in command:
            found.append(command)
    return found


@pytest.mark.slow
def test_bench_quick_and_check(default_bake: Bake, project_env: ProjectEnv, tmp_path: Path) -> None:
    """bench-quick measures every budget configuration 3+ times in under a minute, leaves no
    server running, and bench-check passes on it but fails on a run that misses a budget."""
    project = default_bake.project
    started = time.monotonic()
    quick = project_env.make(project, "bench-quick")
    elapsed = time.monotonic() - started
    output = quick.stdout + quick.stderr
    assert quick.returncode == 0, output
    assert elapsed <= QUICK_BUDGET_S, f"bench-quick took {elapsed:.0f} s:\n{output}"
    assert "left]" in output  # the progress lines with the estimated time left
    assert leftover_processes(project) == []

    results_path = project / "build" / "bench" / "benchmark.json"
    results = json.loads(results_path.read_text(encoding="utf-8"))
    assert results["mode"] == "quick"
    measured = {
        (experiment["id"], config["id"]): config["runs"]
        for experiment in results["experiments"]
        for config in experiment["configs"]
    }
    assert set(measured) >= {
        ("middleware", "bare"),
        ("middleware", "default"),
        ("transport", "tcp-close"),
        ("transport", "socket-keepalive"),
    }
    for key, runs in measured.items():
        assert len(runs) >= 3, key
        for run in runs:
            assert run["requests"] > 0, key
            assert run["non_2xx"] + run["socket_errors"] == 0, (key, run)
    report = (project / "build" / "bench" / "benchmark.md").read_text(encoding="utf-8")
    assert "| configuration | requests/s (median) | min - max | p50 ms | p99 ms |" in report

    # The verdict on THIS machine is printed, not gated: here the same quick ratio ranged from
    # 0.68 x to 1.10 x between CI runs on an idle 2-CPU VM, wider than the middleware budget's
    # 5 % margin. What is gated: bench-check judges both budgets, its exit status matches its
    # verdict, and it closes on a run that misses a budget (below).
    check = project_env.make(project, "bench-check")
    print(f"bench-check on this machine:\n{check.stdout}")
    verdict = re.search(r"^(\d+) passed, (\d+) failed$", check.stdout, flags=re.MULTILINE)
    assert verdict, check.stdout + check.stderr
    assert int(verdict[1]) + int(verdict[2]) == 2, check.stdout
    assert (check.returncode == 0) == (verdict[2] == "0"), check.stdout + check.stderr

    # The same run with the middleware stack made to miss its budget: the gate must close.
    for experiment in results["experiments"]:
        for config in experiment["configs"]:
            if (experiment["id"], config["id"]) == ("middleware", "default"):
                for run in config["runs"]:
                    run["requests_per_s"] *= 0.5
    (tmp_path / "benchmark.json").write_text(json.dumps(results), encoding="utf-8")
    failing = project_env.make(project, "bench-check", f"BENCH_OUT={tmp_path}")
    assert failing.returncode != 0, failing.stdout
    assert "FAIL  default middleware stack" in failing.stdout
