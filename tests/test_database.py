"""database=postgresql: its full suite against a real server; database=none: no trace of it."""

from __future__ import annotations

import json
import re
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import (
    KUBERNETES_VERSIONS,
    Bake,
    ProjectEnv,
    assert_renders_cleanly,
    bake,
    install_env,
    jobs_number,
    run_captured,
)
from .full_suites import FullSuites

# What database=postgresql adds, as whole files and directories.
DATABASE_PATHS = [
    "alembic.ini",
    "migrations/env.py",
    "migrations/versions/rev_0001_create_items.py",
    "docs/database.md",
    "src/{package}/db/engine.py",
    "src/{package}/api/items_db.py",
    "tests/pg_server.py",
    "tests/database/test_items_api.py",
]
# Words only the database option writes; none may appear in a bake without it.
DATABASE_WORDS = re.compile(r"sqlalchemy|asyncpg|alembic|postgres|DATABASE_URL|migrat", re.I)


def yaml_file(project: Path, name: str) -> Any:
    return yaml.safe_load((project / name).read_text(encoding="utf-8"))


def test_postgresql_bake_renders_cleanly(database_bake: Bake) -> None:
    """Valid TOML and Python, no template tags; the database files are there."""
    assert_renders_cleanly(database_bake)
    package = database_bake.package_name
    for path in DATABASE_PATHS:
        assert (database_bake.project / path.format(package=package)).is_file(), path
    # The in-memory store's tests do not apply: tests/database/ tests the items API instead.
    assert not (database_bake.project / "tests/unit/test_items.py").exists()


def test_none_bake_has_no_database_leftovers(default_bake: Bake) -> None:
    """database=none renders none of it: no file, no dependency, no variable, no word."""
    package = default_bake.package_name
    for path in DATABASE_PATHS:
        assert not (default_bake.project / path.format(package=package)).exists(), path
    assert not (default_bake.project / "migrations").exists()
    assert not (default_bake.project / "tests" / "database").exists()
    found = [
        f"{path.relative_to(default_bake.project)}: {match.group()}"
        for path in sorted(default_bake.project.rglob("*"))
        if path.is_file() and path.suffix not in {".png", ".json"}
        for match in DATABASE_WORDS.finditer(path.read_text(encoding="utf-8", errors="ignore"))
    ]
    assert found == []


def test_serving_only_with_a_database_is_refused(tmp_path: Path) -> None:
    """serving-only renders no app to store items for: refused in one line, nothing left."""
    result = bake(tmp_path, layout="serving-only", database="postgresql")
    assert result.exit_code != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: database=postgresql needs layout=service: serving-only renders no app to store "
        "items for (add the database to your own app)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_compose_runs_migrations_before_the_app(database_bake: Bake) -> None:
    """db has a healthcheck; migrate waits for it; app waits for migrate to succeed."""
    services = yaml_file(database_bake.project, "compose.yaml")["services"]
    assert services["db"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["migrate"]["entrypoint"][:3] == ["alembic", "-c", "/app/alembic.ini"]
    assert services["app"]["depends_on"] == {
        "migrate": {"condition": "service_completed_successfully"}
    }
    # Compose refuses to start without a password: none ships in the file.
    assert "${POSTGRES_PASSWORD:?" in services["db"]["environment"]["POSTGRES_PASSWORD"]


def test_compose_runs_the_worker_after_migrations(jobs_bake: Bake) -> None:
    """jobs=procrastinate: compose's worker is the app's image with the worker's entrypoint,
    waits for migrate to succeed, shares the app's DATABASE_URL and lockdown, serves its health
    port on the container's interfaces (published on loopback), checks /livez with Python
    (no curl in the image), and its stop_grace_period = STOP_GRACE_PERIOD >= drain + margin."""
    services = yaml_file(jobs_bake.project, "compose.yaml")["services"]
    app, worker = services["app"], services["worker"]
    package = jobs_bake.package_name
    prefix = f"{package.upper()}_"
    assert worker["entrypoint"] == ["python", "-m", f"{package}.worker"]
    assert "command" not in worker
    assert (worker["build"], worker["image"]) == (app["build"], app["image"])
    assert worker["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    env = worker["environment"]
    assert env["DATABASE_URL"] == app["environment"]["DATABASE_URL"]
    assert env[f"{prefix}JOBS_HEALTH_HOST"] == "0.0.0.0"  # noqa: S104 - the container's
    port = int(env[f"{prefix}JOBS_HEALTH_PORT"])
    assert worker["ports"] == [f"127.0.0.1:{port}:{port}"]
    for key in ("read_only", "cap_drop", "security_opt"):
        assert worker[key] == app[key], key
    assert worker["read_only"] is True
    drain = float(
        env.get(
            f"{prefix}JOBS_DRAIN_SECONDS",
            jobs_number(jobs_bake.project, r"jobs_drain_seconds: float = Field\(default=([\d.]+)"),
        )
    )
    margin = jobs_number(jobs_bake.project, r"^JOBS_ABORT_MARGIN = ([\d.]+)$")
    grace = float(env["STOP_GRACE_PERIOD"])
    assert worker["stop_grace_period"] == f"{grace:g}s"
    assert grace >= drain + margin
    check = " ".join(worker["healthcheck"]["test"])
    assert worker["healthcheck"]["test"][:2] == ["CMD", "python"]
    assert f"127.0.0.1:{port}/livez" in check
    assert "curl" not in check


def test_the_smoke_test_runs_the_worker_beside_the_app(jobs_bake: Bake) -> None:
    """jobs=procrastinate: the smoke test starts the worker from the image under test with its
    entrypoint, waits for the job counter as prometheus_client writes it (its labels in either
    order), stops it within compose's grace period; shellcheck finds nothing."""
    project, package = jobs_bake.project, jobs_bake.package_name
    smoke = (project / ".github" / "smoke-test.sh").read_text(encoding="utf-8")
    assert f'--entrypoint python "$image" -m {package}.worker' in smoke
    observe = (project / "src" / package / "jobs" / "observe.py").read_text(encoding="utf-8")
    labels = re.search(r'Counter\("jobs", "[^"]*", \[(.*?)\]\)', observe)
    assert labels is not None
    assert sorted(re.findall(r'"(\w+)"', labels.group(1))) == ["outcome", "task"]
    # prometheus_client writes them in declared order or sorted, by release: both accepted.
    assert 'task="announce_item",outcome="succeeded"|' in smoke
    assert '|outcome="succeeded",task="announce_item"' in smoke
    compose = yaml_file(project, "compose.yaml")["services"]["worker"]
    grace = re.search(r"^  worker_grace=(\d+)$", smoke, re.MULTILINE)
    assert grace is not None
    assert f"{grace.group(1)}s" == compose["stop_grace_period"]
    assert 'stop --time "$worker_grace" "$worker"' in smoke
    shellcheck = Path(sys.executable).parent / "shellcheck"
    done = run_captured([shellcheck, "--severity=style", project / ".github" / "smoke-test.sh"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_worker_without_jobs(database_bake: Bake) -> None:
    """jobs=none (the default, here with a database and kubernetes): no worker.yaml, no worker
    in the kustomization, compose or the PodMonitor example, no trace of its command."""
    project, package = database_bake.project, database_bake.package_name
    assert not (project / "k8s" / "base" / "worker.yaml").exists()
    base = yaml_file(project, "k8s/base/kustomization.yaml")
    assert "worker.yaml" not in base["resources"]
    assert "worker" not in yaml_file(project, "compose.yaml")["services"]
    monitors = (project / "k8s" / "examples" / "podmonitor.yaml").read_text(encoding="utf-8")
    assert [doc["metadata"]["name"] for doc in yaml.safe_load_all(monitors)] == [project.name]
    words = re.compile(rf"worker\.yaml|{package}\.worker|JOBS_|job worker|procrastinate")
    found = [
        f"{path.relative_to(project)}: {match.group()}"
        for path in sorted(project.rglob("*"))
        if path.is_file() and path.suffix not in {".png"}
        for match in words.finditer(path.read_text(encoding="utf-8", errors="ignore"))
    ]
    assert found == []


def test_kubernetes_reads_the_url_from_a_secret_and_migrates_first(database_bake: Bake) -> None:
    """The app and the migrate init container take DATABASE_URL from the same Secret."""
    base = database_bake.project / "k8s" / "base"
    spec = yaml.safe_load((base / "deployment.yaml").read_text(encoding="utf-8"))["spec"]
    pod = spec["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["command"] == ["alembic", "-c", "/app/alembic.ini", "upgrade", "head"]
    for container in (init, *pod["containers"]):
        (url,) = [env for env in container["env"] if env["name"] == "DATABASE_URL"]
        assert url["valueFrom"]["secretKeyRef"] == {
            "name": f"{database_bake.project.name}-database",
            "key": "url",
        }
    tools = Path(sys.executable).parent
    names = yaml.safe_load((base / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    oldest = KUBERNETES_VERSIONS[0]
    result = run_captured(
        [str(tools / "kubernetes-validate"), "--strict", "--kubernetes-version", oldest, *names],
        cwd=base,
    )
    assert result.stdout.count("passed") == len(names), result.stdout + result.stderr


def test_generated_ci_installs_the_postgresql_binaries(database_bake: Bake) -> None:
    """CI's test job installs Debian's postgresql, so `make test` starts its server there too."""
    workflow = yaml_file(database_bake.project, ".github/workflows/ci.yml")
    runs = [step.get("run", "") for step in workflow["jobs"]["check"]["steps"]]
    assert any("postgresql" in run.split() for run in " ".join(runs).splitlines())
    assert "make test" in runs


@pytest.mark.slow
@pytest.mark.full_suite("postgresql")
def test_postgresql_bake_lints_and_passes_its_full_suite(full_suites: FullSuites) -> None:
    """A route and a migration added the way the docs say (tests/documented_changes.py),
    then make lint and the whole make test (a real PostgreSQL, migrations up and down, the
    items API), then the battery's tests that need a database: restarts under load through
    the live stack, and the probes (readiness while the database is stopped), run beside the
    default bake's suite (tests/full_suites.py)."""
    if shutil.which("initdb") is None and not list(Path("/usr/lib/postgresql").glob("*/bin")):
        pytest.fail("PostgreSQL's server binaries are missing (apt-get install postgresql)")
    results = full_suites.result("postgresql")
    for result in results:
        target = result.args[-1]
        assert result.returncode == 0, f"{target}\n{result.stdout[-20000:]}\n{result.stderr}"
    steps = [result.args[-1] for result in results]
    assert steps == ["documented changes", "lint", "test", "battery"]
    # The live tests skip, saying why, where they cannot run the stack: here they must run.
    test, battery = results[2:]
    skipped = [line for line in test.stdout.splitlines() if line.startswith("SKIPPED")]
    assert not [line for line in skipped if "database" in line or "uid" in line], skipped
    # test_database.py's one test and test_probes.py's two (liveness, readiness): none skipped.
    assert "3 passed" in battery.stdout, battery.stdout[-5000:]


@pytest.mark.slow
def test_make_db_runs_the_documented_migration_steps(
    database_bake: Bake, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """docs/database.md's development database, its lines run as written on a machine with
    no PostgreSQL running: `make db` exports a URL, `make migrate` migrates that database,
    `make db-stop` stops the server and deletes its data."""
    project = tmp_path_factory.mktemp("make-db") / "project"
    shutil.copytree(database_bake.project, project, ignore=shutil.ignore_patterns("*_cache"))
    env = ProjectEnv(install_env(project), tmp_path_factory.mktemp("mypy-cache"))
    docs = (project / "docs" / "database.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", docs, re.DOTALL) if "make db-stop" in b]
    lines = block.splitlines()
    assert lines == ['eval "$(make --silent db)"', "make migrate", "make db-stop"]
    environment = {**env.environ(project), "VENV": str(env.venv)}
    environment.pop("DATABASE_URL", None)

    # All but db-stop, then where the server stands, then db-stop: one shell, as a person's.
    shown = ['"$VENV/bin/alembic" current', 'echo "url=$DATABASE_URL"', "cat .run/database.json"]
    script = "\n".join(["set -e", *lines[:-1], *shown])
    try:
        done = run_captured(["bash", "-c", script], cwd=project, env=environment)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "0001 (head)" in done.stdout, done.stdout + done.stderr
        url_line = r"^url=(postgresql\+asyncpg://tester:\S+@127\.0\.0\.1:\d+/development)$"
        (url,) = re.findall(url_line, done.stdout, re.MULTILINE)
        server = json.loads(done.stdout.splitlines()[-1])
        assert f":{server['port']}/" in url
        assert Path(server["root"], "data", "postmaster.pid").is_file()
    finally:
        stopped = run_captured(["bash", "-c", lines[-1]], cwd=project, env=environment)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout == "the development database is stopped, its data deleted\n"
    assert not Path(server["root"]).exists()
    assert not (project / ".run" / "database.json").exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(server["port"])), timeout=5).close()
