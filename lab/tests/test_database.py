"""The benchmark's items experiment against a real PostgreSQL, as docs/database.md runs it.

The commands of docs/database.md's Benchmark section run verbatim in a copy of the project,
against a migrated database of the session's throwaway server: real gunicorn, nginx and wrk
on 127.0.0.1 (wrk and nginx from Debian: `apt-get install wrk nginx-light`; skipped, saying
so, where they are missing). Asserts what was measured and reported, never a speed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from lab.budgets import load_budgets
from lab.report import budgets_table
from lab.results import ConfigResult, ExperimentResult, Results
from lab.wrk import WrkError, WrkResult, find_wrk

from .tables import fetch
from .test_docs import doc_commands

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pg_server import PostgresServer

pytestmark = [pytest.mark.live]

CONFIGS = {"direct-read", "nginx-read", "direct-create", "nginx-create"}
# What a copy of the project needs to migrate and to run the benchmark's servers.
COPIED = ("Makefile", "alembic.ini", "migrations", "src", "deploy", "bench")
# The one line that says what to do, for each way the database can be unusable.
NOT_SET = "error: DATABASE_URL is not set: the benchmark runs the app against a migrated"
FIX = "DATABASE_URL=postgresql+asyncpg://user:password@host:5432/scratch make migrate bench"


@pytest.fixture(scope="module")
def load_tools(nginx_bin: str) -> None:
    """wrk and nginx, or a skip naming the install command."""
    del nginx_bin  # asked for its skip where nginx is missing
    try:
        find_wrk()
    except WrkError as error:
        pytest.skip(str(error))


def project_copy(project_root: Path, into: Path) -> Path:
    """The parts of the project the commands need; .venv is this interpreter's environment."""
    into.mkdir()
    for name in COPIED:
        source = project_root / name
        copy = shutil.copytree if source.is_dir() else shutil.copy2
        copy(source, into / name)
    (into / ".venv").symlink_to(sys.prefix)
    return into


@pytest.mark.usefixtures("load_tools")
def test_the_documented_commands_measure_the_items_endpoints(
    project_root: Path, tmp_path: Path, new_database: Callable[..., str]
) -> None:
    """make migrate, then the items experiment in short runs: every configuration answered
    without errors, the report names it with its budgets, and each POST stored a row."""
    commands = doc_commands(project_root, "Benchmark")
    assert commands == ["make migrate", ".venv/bin/python -m bench run --quick --only items"]
    project = project_copy(project_root, tmp_path / "project")
    url = new_database(migrated=False)
    env = {**os.environ, "DATABASE_URL": url}
    for command in commands:
        result = subprocess.run(
            shlex.split(command), cwd=project, env=env, capture_output=True, text=True,
            check=False, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"

    out = project / "build" / "bench"
    results = json.loads((out / "benchmark.json").read_text(encoding="utf-8"))
    assert results["mode"] == "quick"
    (items,) = results["experiments"]
    assert items["id"] == "items"
    assert {config["id"] for config in items["configs"]} == CONFIGS
    created = 0
    for config in items["configs"]:
        assert len(config["runs"]) == 3, config["id"]
        for run in config["runs"]:
            assert run["requests"] > 0, config["id"]
            assert run["non_2xx"] + run["socket_errors"] == 0, (config["id"], run)
        if config["id"].endswith("create"):
            created += sum(run["requests"] for run in config["runs"])
    # Every counted POST is a row (warm-ups and the item the reads ask for add more).
    ((rows,),) = fetch(url, "SELECT count(*) FROM items WHERE name = 'bench item'")
    assert int(str(rows)) > created

    report = (out / "benchmark.md").read_text(encoding="utf-8")
    assert "## 1. Items in PostgreSQL: the whole stack against gunicorn directly" in report
    assert "| nginx -> socket -> gunicorn, POST /items | " in report
    for budget in ("items through nginx, read one", "items through nginx, create"):
        (row,) = [line for line in report.splitlines() if line.startswith(f"| {budget} | ")]
        assert "not measured" not in row, row


# Each way the database can be unusable, and what its one line must say.
EXPECTED = {
    "not-set": NOT_SET,
    "wrong-scheme": "the app would refuse to start: DATABASE_URL must start with postgresql+",
    "not-a-url": "the app would refuse to start: DATABASE_URL has a port that is not a number",
    "not-answering": "cannot be used (ConnectionRefusedError: ",
    "wrong-password": "cannot be used (InvalidPasswordError: password authentication failed",
    "not-migrated": "answered but has no items table: run `make migrate` first",
}
SHOWN_NOWHERE = "never-shown-9f3"


def unusable_url(case: str, new_database: Callable[..., str], postgres: PostgresServer) -> str:
    """DATABASE_URL for ``case`` (not "not-set")."""
    if case == "not-answering":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        return f"postgresql+asyncpg://tester:{SHOWN_NOWHERE}@127.0.0.1:{port}/app"
    if case == "not-a-url":
        return f"postgresql+asyncpg://tester:{SHOWN_NOWHERE}@127.0.0.1:no-port/app"
    if case == "wrong-scheme":
        return f"mysql://tester:{SHOWN_NOWHERE}@127.0.0.1/app"
    if case == "wrong-password":
        return postgres.url().replace(postgres.password, SHOWN_NOWHERE)
    return new_database(migrated=False)


@pytest.mark.usefixtures("load_tools")
@pytest.mark.parametrize("case", list(EXPECTED))
def test_an_unusable_database_stops_the_benchmark_in_one_line(
    project_root: Path,
    tmp_path: Path,
    new_database: Callable[..., str],
    postgres: PostgresServer,
    case: str,
) -> None:
    """Before any server starts: one line with the cause and the command to run, no
    traceback, no password, no results."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    if case != "not-set":
        env["DATABASE_URL"] = unusable_url(case, new_database, postgres)
    # The package from src/ where it is not installed; run from elsewhere, so that no .env
    # file of the project's (which the app's settings read) can set DATABASE_URL.
    paths = [str(project_root), str(project_root / "src"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--quick", "--only", "items", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip

    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ")
    assert EXPECTED[case] in line
    assert line.endswith(FIX)
    assert SHOWN_NOWHERE not in line
    assert postgres.password not in line
    assert not out.exists()


def test_items_rows_with_errors_fail_their_budgets() -> None:
    """A fast but failing configuration (503s from a database that went away) is flagged in
    the report's budgets table, as for the other experiments."""

    def config(config_id: str, errors: int) -> ConfigResult:
        runs = [WrkResult(500.0, 1.0, 9.0, 1000, 2.0, errors, 0) for _ in range(3)]
        return ConfigResult(config_id, config_id, runs)

    items = ExperimentResult(
        "items", "Items", "q", "direct-read",
        [config("direct-read", 0), config("nginx-read", 0), config("direct-create", 0),
         config("nginx-create", 40)],
    )  # fmt: skip
    table = budgets_table(Results("quick", "c", "s", "f", {}, {}, [items]), load_budgets())
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()[2:]}
    assert rows["items through nginx, read one"].endswith("| pass |")
    assert "FAIL: nginx-create: 120 errors in 3000 requests" in rows["items through nginx, create"]
