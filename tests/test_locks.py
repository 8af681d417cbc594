"""Every service bake carries its uv.lock, the set these tests ran against, and installs it.

templates/uv-locks/ holds one lock per answer that changes the dependencies (scripts/lock-bakes
writes them); the bake's uv.lock includes the matching one and the post-gen hook names its root
package after the project. Here: each lock still matches its bake's pyproject.toml, `make
install` gives exactly its versions, and a pyproject.toml edited without `make lock` fails
`make lint` and `make test` in one line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker

from .conftest import TEMPLATE_DIR, Bake, ProjectEnv, bake, locked_packages, run_captured

UV = Path(sys.executable).parent / "uv"
LOCKS = TEMPLATE_DIR / "templates" / "uv-locks"
# The answers each lock is for, as scripts/lock-bakes names them.
VARIANTS = {
    "database-none.lock": {},
    "database-postgresql.lock": {"database": "postgresql"},
    "database-none-auth-oidc.lock": {"auth": "oidc"},
    "database-postgresql-auth-oidc.lock": {"database": "postgresql", "auth": "oidc"},
    "database-postgresql-jobs-procrastinate.lock": {
        "database": "postgresql",
        "jobs": "procrastinate",
    },
    "database-postgresql-auth-oidc-jobs-procrastinate.lock": {
        "database": "postgresql",
        "auth": "oidc",
        "jobs": "procrastinate",
    },
}
STALE = "uv.lock does not match pyproject.toml: run make lock, then commit uv.lock"


def uv(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    return run_captured([UV, *args], cwd=project, env=environment)


def test_the_template_has_a_lock_for_each_dependency_answer() -> None:
    """templates/uv-locks/ holds exactly the locks scripts/lock-bakes writes."""
    script = (TEMPLATE_DIR / "scripts" / "lock-bakes").read_text(encoding="utf-8")
    (variants,) = re.findall(r"^variants=\((.*)\)$", script, re.MULTILINE)
    answers = re.findall(r'"([^"]*)"', variants)
    written = {f"{variant.replace('=', '-').replace(' ', '-')}.lock" for variant in answers}
    assert written == set(VARIANTS) == {path.name for path in LOCKS.iterdir()}


@pytest.mark.parametrize("lock", sorted(VARIANTS))
def test_each_bake_carries_a_current_lock_named_for_it(lock: str, tmp_path: Path) -> None:
    """A bake under any project name carries its answers' lock, its root package renamed and
    sorted where `uv lock` puts it, and the lock matches pyproject.toml (uv lock --check)."""
    result = bake(tmp_path, project_name="Zulu Billing", **VARIANTS[lock])
    assert result.exit_code == 0, result.stderr
    project = result.project
    text = (project / "uv.lock").read_text(encoding="utf-8")
    packages = tomllib.loads(text)["package"]
    names = [package["name"] for package in packages]
    assert names == sorted(names)
    (root,) = [package for package in packages if package["source"] == {"editable": "."}]
    assert root["name"] == "zulu-billing"
    shipped = (LOCKS / lock).read_text(encoding="utf-8")
    assert locked_packages(project / "uv.lock") == locked_packages(LOCKS / lock)
    assert len(text) == len(shipped) + len("zulu-billing") - len("my-service")

    checked = uv(project, "lock", "--check")
    assert checked.returncode == 0, f"{lock} is stale: run scripts/lock-bakes\n{checked.stderr}"


def test_a_serving_only_bake_keeps_pip_and_no_lock(tmp_path: Path) -> None:
    """layout=serving-only joins a repository with its own dependency tooling: no uv.lock."""
    result = bake(tmp_path, layout="serving-only")
    assert result.exit_code == 0, result.stderr
    assert not (result.project / "uv.lock").exists()
    makefile = (result.project / "Makefile").read_text(encoding="utf-8")
    assert "pip install --quiet --editable ./stack --editable . --group dev" in makefile
    assert "uv" not in re.findall(r"^\S+:", makefile, re.MULTILINE)


# Run by the bake's own interpreter: every distribution its venv holds, as name==version.
LIST_DISTRIBUTIONS = """
import importlib.metadata
for distribution in importlib.metadata.distributions():
    print(f"{distribution.metadata['Name']}=={distribution.version}")
"""


def applies_here(line: str) -> bool:
    """Whether an exported requirement's environment marker holds for this interpreter."""
    _, _, marker = line.partition(";")
    return not marker.strip() or Marker(marker.strip()).evaluate()


@pytest.mark.slow
def test_make_install_gives_exactly_the_locked_versions(default_bake: Bake, tmp_path: Path) -> None:
    """`make install` (without a uv on PATH: it installs its own, saying so) builds .venv with
    every package uv.lock pins for this machine, at its version, and nothing else."""
    project = tmp_path / "project"
    shutil.copytree(default_bake.project, project)
    path = os.pathsep.join(
        entry for entry in os.environ["PATH"].split(os.pathsep) if not (Path(entry) / "uv").exists()
    )
    environment = {**os.environ, "PATH": path}
    environment.pop("VIRTUAL_ENV", None)
    done = run_captured(["make", "--no-print-directory", "install"], cwd=project, env=environment)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "uv is not on PATH: installing it from PyPI into .uv/" in done.stdout

    exported = uv(project, "export", "--frozen", "--no-hashes", "--no-emit-project", "--quiet")
    assert exported.returncode == 0, exported.stderr
    pins = [line for line in exported.stdout.splitlines() if re.match(r"^[a-z0-9]", line)]
    expected = {
        line.split("==")[0]: line.split("==")[1].split(" ")[0]
        for line in pins
        if applies_here(line)
    }
    installed = subprocess.run(
        [project / ".venv" / "bin" / "python", "-c", LIST_DISTRIBUTIONS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {
        re.sub(r"[-_.]+", "-", name).lower(): version
        for name, _, version in (line.partition("==") for line in installed.splitlines())
    }
    assert found.pop("my-service") == "0.1.0"  # the project itself, editable
    stack = tomllib.loads((project / "stack" / "pyproject.toml").read_text(encoding="utf-8"))
    assert found.pop("serving-stack") == stack["project"]["version"]  # stack/, editable
    assert len(expected) > 60, pins
    assert found == expected


@pytest.mark.parametrize("target", ["lint", "test"])
def test_a_dependency_added_without_make_lock_fails_in_one_line(
    default_bake: Bake, project_env: ProjectEnv, tmp_path: Path, target: str
) -> None:
    """pyproject.toml edited by hand and no `make lock`: lint and test stop first, in one line
    saying what to run."""
    project = tmp_path / "project"
    shutil.copytree(default_bake.project, project, ignore=shutil.ignore_patterns("*_cache"))
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(
        text.replace("dependencies = [\n", 'dependencies = [\n    "idna>=3",\n', 1)
    )

    result = project_env.make(project, target)

    assert result.returncode != 0
    said = [line for line in result.stderr.splitlines() if not line.startswith("make")]
    assert said == [STALE], result.stderr
