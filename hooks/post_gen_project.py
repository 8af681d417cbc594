"""Remove the paths of options the answers turned off, after the project is rendered.

cookiecutter renders this file with Jinja first and runs it inside the new project. The
answers arrive as one JSON document and are read as data (see pre_gen_project.py for why).
Whole directories are removed here because cookiecutter cannot skip a directory by name
without leaving an empty one behind; so are the files that only one layout has. The serving
stack, stack/, is the same in every layout (copied, never rendered: cookiecutter.json).
The service's uv.lock arrives as the template locked it (templates/uv-locks/, for the default
project name): its root package is renamed to this project here, where `uv lock` sorts it.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

CONTEXT: dict[str, object] = json.loads(r"""{{ cookiecutter | tojson }}""")

# layout=serving-only keeps the serving stack, the middleware (and logs.py, which they
# import) and the tests that need no generated app; these belong to the generated service.
# CI and Kubernetes go too: their health checks assume the service's /livez and /readyz.
SERVICE_ONLY = (
    ".github",
    "k8s",
    "docs",
    "tests/live",
    "src/{package}/api",
    "src/{package}/main.py",
    "src/{package}/settings.py",
    ".env.example",
    "src/{package}/errors.py",
    "tests/unit/test_errors.py",
    "tests/unit/test_health.py",
    "tests/unit/test_items.py",
    "tests/unit/test_main.py",
    "tests/unit/test_body_limits.py",
    "tests/unit/test_settings.py",
    "tests/unit/test_docs.py",
    "tests/unit/test_metrics.py",
    "tests/unit/test_tracing.py",
    # pip installs an existing app's own requirements there: the repository's lock is its own.
    "uv.lock",
)
# layout=service: the Makefile fragment a repository adopting the stack alone includes.
SERVING_ONLY = ("deploy/serving.mk",)
# layout=serving-only: (from, to): what a repository copies lives in deploy/, beside nothing
# of its own (its Dockerfile and compose.yaml, if any, stay untouched).
SERVING_ONLY_MOVES = (("Dockerfile", "deploy/Dockerfile"), ("compose.yaml", "deploy/compose.yaml"))
# database=postgresql only: whole files and directories (lines inside shared files are
# switched by Jinja conditions where they are).
DATABASE_ONLY = (
    "alembic.ini",
    "migrations",
    "docs/database.md",
    "src/{package}/db",
    "src/{package}/api/items_db.py",
    "src/{package}/api/channels.py",
    "tests/database",
    "tests/pg_server.py",
    "k8s/examples/migration-job.yaml",
)
# database=none only: the in-memory store's unit tests (with a database, tests/database/
# tests the items API against PostgreSQL instead).
NO_DATABASE_ONLY = ("tests/unit/test_items.py",)
# auth=oidc only: the token verification package, its tests and its guide.
AUTH_ONLY = (
    "src/{package}/auth",
    "tests/unit/test_auth.py",
    "tests/token_issuer.py",
    "tests/dev_issuer.py",
    "docs/auth.md",
)

# jobs=procrastinate only: the worker, its jobs package, the queue's schema and their tests.
JOBS_ONLY = (
    "docs/jobs.md",
    "migrations/procrastinate",
    "migrations/versions/rev_0002_procrastinate_schema.py",
    "src/{package}/jobs",
    "src/{package}/worker.py",
    "tests/jobs",
    "k8s/base/worker.yaml",
)


def disabled_paths(context: dict[str, object]) -> list[Path]:
    """The rendered paths that belong to options switched off in ``context``."""
    package = context["package_name"]
    if context["layout"] == "serving-only":
        serving_only = (*SERVICE_ONLY, *DATABASE_ONLY, *AUTH_ONLY, *JOBS_ONLY)
        return [Path(path.format(package=package)) for path in serving_only]
    database_paths = NO_DATABASE_ONLY if context["database"] != "none" else DATABASE_ONLY
    paths = [Path(path) for path in SERVING_ONLY]
    paths += [Path(path.format(package=package)) for path in database_paths]
    if context.get("auth", "none") != "oidc":
        paths += [Path(path.format(package=package)) for path in AUTH_ONLY]
    if context.get("jobs", "none") != "procrastinate":
        paths += [Path(path.format(package=package)) for path in JOBS_ONLY]
    if context["ci"] != "github":
        paths.append(Path(".github"))
    if context["kubernetes"] is not True:
        paths += [Path("k8s"), Path("docs/kubernetes.md")]
    return paths


# templates/uv-locks/ is written for the default bake (scripts/lock-bakes): its project name.
LOCKED_PROJECT = "my-service"
# uv.lock's tables: each [[package]] holds one distribution, the first line its name.
PACKAGE_TABLE = "\n[[package]]\n"


def normalize(name: str) -> str:
    """PEP 503: how uv.lock spells a distribution's name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def rename_lock(lock: str, project: str) -> str:
    """``lock`` with its root package (the editable project) named ``project``, and placed
    where `uv lock` writes it: uv sorts packages by name, so a later lock moves nothing."""
    header, *packages = lock.split(PACKAGE_TABLE)
    root = f'name = "{LOCKED_PROJECT}"\n'
    renamed = [
        f'name = "{normalize(project)}"\n{package.removeprefix(root)}'
        if package.startswith(root) and 'source = { editable = "." }' in package
        else package
        for package in packages
    ]
    renamed.sort(key=lambda package: package.split("\n", 1)[0])
    return PACKAGE_TABLE.join([header, *renamed])


def main() -> None:
    # A path missing already is fine: tests/test_layout.py checks the serving-only tree whole.
    for path in disabled_paths(CONTEXT):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    lock = Path("uv.lock")
    if lock.is_file() and not lock.read_text(encoding="utf-8").strip():
        # A dependency answer the template has no lock for yet: scripts/lock-bakes writes it.
        print("warning: no uv.lock for these answers: make lock writes one", file=sys.stderr)
        lock.unlink()
    elif lock.is_file():
        renamed = rename_lock(lock.read_text(encoding="utf-8"), str(CONTEXT["project_slug"]))
        lock.write_text(renamed, encoding="utf-8")
    if CONTEXT["layout"] == "serving-only":
        for source, target in SERVING_ONLY_MOVES:
            shutil.move(source, target)


if __name__ == "__main__":
    main()
