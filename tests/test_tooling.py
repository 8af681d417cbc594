"""The template's own code passes the same strict tools it asks of generated projects."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import npm

from .conftest import TEMPLATE_DIR, packed, run_captured

BIN = Path(sys.executable).parent
# Named explicitly: ruff would otherwise also read the generated project's pyproject.toml,
# which is a Jinja template and not valid TOML until baked.
# (lab/, experiments/ and harness/ have their own stricter configuration: tests/test_bench.py.)
PYTHON_SOURCES = ["hooks", "local_extensions.py", "tests", "battery"]
# Every script in scripts/ (the README's commands, bench, battery, experiments) and CI's.
SHELL_SCRIPTS = [TEMPLATE_DIR / ".ci" / "run", *sorted((TEMPLATE_DIR / "scripts").iterdir())]


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return run_captured(command, cwd=TEMPLATE_DIR)


def test_template_python_passes_ruff() -> None:
    """Hooks, the Jinja extension, these tests and the battery pass ruff check and format."""
    for command in (("check", *PYTHON_SOURCES), ("format", "--check", *PYTHON_SOURCES)):
        result = run(BIN / "ruff", *command)
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_template_code_is_as_the_formatter_writes_it() -> None:
    """No line of the template's own Python opts out of ruff format (the lab's, the harness's
    and the experiments' included): a line bound is met by code, never by packing."""
    files = [TEMPLATE_DIR / "local_extensions.py"]
    for folder in ("hooks", "tests", "battery", "lab", "harness", "experiments"):
        files += sorted((TEMPLATE_DIR / folder).rglob("*.py"))
    assert packed(TEMPLATE_DIR, files) == [], "format these as ruff does instead"


def test_shell_scripts_pass_shellcheck() -> None:
    """The README's commands and CI's entry point pass shellcheck."""
    result = run(BIN / "shellcheck", "--external-sources", *SHELL_SCRIPTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_set_up_names_each_missing_package_in_one_command(tmp_path: Path) -> None:
    """As anyone but root, scripts/_setup.sh stops with one apt-get command naming each missing
    package: a command not on PATH, a path that does not exist (what a command needs only
    by recommendation), and python3-venv beside a missing python3 (a fresh minimal Debian has
    neither). What is there is not named."""
    (tmp_path / "present").symlink_to("/bin/true")
    user = tmp_path / "id"  # `id -u` of someone who is not root
    user.write_text("#!/bin/sh\necho 1000\n", encoding="utf-8")
    user.chmod(0o755)
    wanted = "python3=python3 present=pkg-present absent=pkg-absent"
    wanted += " /bin/sh=pkg-sh /no/such/header.h=pkg-header"
    setup = TEMPLATE_DIR / "scripts" / "_setup.sh"
    command = ["/bin/bash", "-c", f". {setup} && require_commands {wanted}"]

    done = subprocess.run(
        command, env={"PATH": str(tmp_path)}, capture_output=True, text=True, check=False
    )

    assert done.returncode == 1, done.stdout + done.stderr
    missing = "python3 pkg-absent pkg-header python3-venv"
    expected = f"error: missing Debian packages; run: sudo apt-get install -y {missing}\n"
    assert done.stderr == expected


# --- the template's own CI workflow ------------------------------------------------------

WORKFLOW = TEMPLATE_DIR / ".github" / "workflows" / "ci.yml"
GENERATED_WORKFLOW = (
    TEMPLATE_DIR / "{{cookiecutter.project_slug}}" / ".github" / "workflows" / "ci.yml"
)


def test_npm_from_the_registry_with_another_digest_is_refused_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """harness/npm.py installs the auth tests' provider with npm's registry tarball, not
    Debian's npm: a tarball whose SHA-256 is not the recorded one is refused, nothing kept."""
    monkeypatch.setattr(npm, "NPM_SHA256", "0" * 64)
    with pytest.raises(npm.NpmError, match=re.escape(f"{npm.NPM_TARBALL} does not match")):
        npm.fetch_npm(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_template_ci_runs_the_readme_test_command_on_push_and_pull_request() -> None:
    """The workflow's one job runs `.ci/run` (the README's ./scripts/test) for every push to
    main and every pull request, with a read-only token and no token left in .git/config."""
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # PyYAML reads the key `on` as True (YAML 1.1's boolean).
    assert workflow[True] == {"push": {"branches": ["main"]}, "pull_request": None}
    assert workflow["permissions"] == {"contents": "read"}
    ((_, job),) = workflow["jobs"].items()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs[-1] == ".ci/run"
    (checkout,) = [step for step in job["steps"] if "uses" in step]
    assert checkout["with"]["persist-credentials"] is False


def test_template_ci_pins_the_generated_workflows_actions() -> None:
    """Every `uses:` is a full commit SHA with its release in a comment, the same line the
    generated project's workflow pins (one set of pins for Dependabot and reviewers)."""
    generated = GENERATED_WORKFLOW.read_text(encoding="utf-8")
    uses = [
        line.split("uses:", 1)[1].strip()
        for line in WORKFLOW.read_text(encoding="utf-8").splitlines()
        if "uses:" in line
    ]
    assert uses
    for pin in uses:
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", pin), pin
        assert f"uses: {pin}\n" in generated, pin


def test_template_ci_passes_the_schema_and_zizmor() -> None:
    """GitHub's workflow schema accepts it; zizmor finds nothing, and its pedantic persona only
    the container image pinned by tag, as in the generated workflow (Debian's updates)."""
    schema = run(BIN / "check-jsonschema", "--builtin-schema", "vendor.github-workflows", WORKFLOW)
    assert schema.returncode == 0, schema.stdout + schema.stderr
    zizmor = [BIN / "zizmor", "--offline", "--no-progress"]
    default = run(*zizmor, "--format", "plain", WORKFLOW.parent.parent)
    assert default.returncode == 0, default.stdout + default.stderr
    assert "No findings to report" in default.stdout
    pedantic = run(*zizmor, "--persona", "pedantic", "--format", "json", WORKFLOW.parent.parent)
    findings = json.loads(pedantic.stdout)
    assert [finding["ident"] for finding in findings] == ["unpinned-images"], findings
