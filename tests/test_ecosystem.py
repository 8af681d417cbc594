"""The generated project's ecosystem: CI workflow, Kubernetes base, updates, developer tools.

Each artifact is checked by the tool its ecosystem trusts (check-jsonschema with GitHub's
workflow schema, zizmor, kubernetes-validate, shellcheck, pre-commit, uv), plus the relations
between files that no single tool sees (timeouts, ports, paths, users).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.version import Version

from .conftest import TEMPLATE_DIR, Bake, ProjectEnv, bake, rerender, run_captured, tree

TOOLS = Path(sys.executable).parent
WORKFLOW = Path(".github/workflows/ci.yml")
SMOKE_TEST = Path(".github/smoke-test.sh")
K8S_BASE = Path("k8s/base")
FULL_SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def tool(name: str) -> str:
    """A command-line tool of the template's test environment (the `test` dependency group)."""
    path = TOOLS / name
    assert path.exists(), f"{name} is missing: install the template's `test` dependency group"
    return str(path)


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command; fail the test with its whole output unless it exits 0."""
    result = run_captured(command, cwd=cwd, env=env)
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, (
        f"{' '.join(map(str, command))} exited {result.returncode}\n{output}"
    )
    return output


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def workflow_steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def k8s_resources(project: Path) -> dict[str, dict[str, Any]]:
    """The base's resources as kustomize reads them (kustomization.yaml's list), by kind."""
    base = project / K8S_BASE
    kustomization = load_yaml(base / "kustomization.yaml")
    documents = [load_yaml(base / name) for name in kustomization["resources"]]
    return {document["kind"]: document for document in documents}


def app_container(project: Path) -> dict[str, Any]:
    (container,) = k8s_resources(project)["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container


# --- the CI workflow ----------------------------------------------------------------------


@pytest.fixture(params=["default", "postgresql"])
def ci_bake(request: pytest.FixtureRequest) -> Bake:
    """The default bake, then the postgresql one (the two workflows differ)."""
    fixture = "default_bake" if request.param == "default" else "database_bake"
    bake: Bake = request.getfixturevalue(fixture)
    return bake


def test_workflow_is_valid_for_github(ci_bake: Bake) -> None:
    """The workflow validates against GitHub's workflow JSON schema (check-jsonschema's copy)."""
    run(
        tool("check-jsonschema"),
        "--builtin-schema",
        "vendor.github-workflows",
        WORKFLOW,
        cwd=ci_bake.project,
    )


def test_dependabot_keeps_actions_python_and_the_base_image_current(default_bake: Bake) -> None:
    """dependabot.yml validates against its schema; it updates the action pins, uv.lock
    (pyproject.toml's floors too) and the Dockerfile's base image, each in one grouped pull
    request, each a week after a release (the actions' cooldown); the base image's tag is
    literal, so it can."""
    config = default_bake.project / ".github" / "dependabot.yml"
    run(
        tool("check-jsonschema"), "--builtin-schema", "vendor.dependabot", config, cwd=config.parent
    )
    updates = {update["package-ecosystem"]: update for update in load_yaml(config)["updates"]}
    assert set(updates) == {"github-actions", "uv", "docker"}
    for update in updates.values():
        assert update["directory"] == "/"
        assert update["cooldown"] == updates["github-actions"]["cooldown"] == {"default-days": 7}
        ((_, group),) = update["groups"].items()
        assert group["patterns"] == ["*"]
    dockerfile = (default_bake.project / "Dockerfile").read_text(encoding="utf-8")
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert bases == ["python:3.13-slim-trixie"] * 2, "Dependabot cannot read a FROM with an ARG"


def test_workflow_has_no_zizmor_findings(ci_bake: Bake) -> None:
    """zizmor (GitHub Actions security audits, offline, default persona) reports nothing."""
    output = run(
        tool("zizmor"),
        "--offline",
        "--no-progress",
        "--format",
        "plain",
        ".github",
        cwd=ci_bake.project,
    )
    assert "No findings to report" in output


def test_workflow_pedantic_zizmor_findings_are_only_the_known_one(default_bake: Bake) -> None:
    """Even zizmor's pedantic persona finds only the deliberate one: the unpinned base image.

    The check job runs in the Dockerfile's own base image by tag, as the Dockerfile does, so
    both pick up Debian's security updates; a digest pin would freeze them.
    """
    command = [tool("zizmor"), "--offline", "--no-progress", "--persona", "pedantic"]
    output = run_captured(
        [*command, "--format", "json", ".github"], cwd=default_bake.project
    ).stdout
    findings = json.loads(output)
    assert [finding["ident"] for finding in findings] == ["unpinned-images"], findings


def test_workflow_pins_actions_by_commit_with_release_comment(default_bake: Bake) -> None:
    """Every `uses:` is a full 40-hex commit SHA, and its line names the release in a comment."""
    text = (default_bake.project / WORKFLOW).read_text(encoding="utf-8")
    uses_lines = [
        line for line in text.splitlines() if line.strip().startswith(("uses:", "- uses:"))
    ]
    assert uses_lines, "the workflow uses no action: the pin check would check nothing"
    for line in uses_lines:
        reference, _, comment = line.split("uses:", 1)[1].partition("#")
        assert FULL_SHA_PIN.fullmatch(reference.strip()), line
        assert re.fullmatch(r"v\d+\.\d+\.\d+", comment.strip()), line


# The publish job's token pushes to GitHub's registry and asks for the OIDC token cosign's
# keyless signature is issued for; nothing more.
PUBLISH_PERMISSIONS = {"contents": "read", "packages": "write", "id-token": "write"}


def test_workflow_is_least_privilege(default_bake: Bake) -> None:
    """Read-only token for every job but publish, which may only push packages and get an OIDC
    token, and no checkout leaves the token in .git/config."""
    workflow = load_yaml(default_bake.project / WORKFLOW)
    assert workflow["permissions"] == {"contents": "read"}
    for name, job in workflow["jobs"].items():
        expected = PUBLISH_PERMISSIONS if name == "publish" else {"contents": "read"}
        assert job.get("permissions", workflow["permissions"]) == expected, name
    checkouts = [
        s for s in workflow_steps(workflow) if s.get("uses", "").startswith("actions/checkout@")
    ]
    assert len(checkouts) == len(workflow["jobs"])
    for step in checkouts:
        assert step["with"]["persist-credentials"] is False


def test_workflow_runs_the_documented_commands(default_bake: Bake) -> None:
    """CI runs make install/lint/test/sbom/audit with nginx and keeps the SBOM (uv.lock's, so
    before any image), then builds and smoke-tests the image, all with the Makefile's targets
    and the smoke test a person runs."""
    project = default_bake.project
    workflow = load_yaml(project / WORKFLOW)
    check, image = workflow["jobs"]["check"], workflow["jobs"]["image"]
    check_runs = "\n".join(step.get("run", "") for step in check["steps"])
    for command in (
        "apt-get install",
        "nginx-light",
        "make install",
        "make lint",
        "make test",
        "make sbom",
        "make audit",
    ):
        assert command in check_runs
    # Kept by the check job, after the step that writes it (make install put uv in .venv).
    order = [step.get("run") or step.get("uses", "") for step in check["steps"]]
    (keep,) = [step for step in check["steps"] if "upload-artifact@" in step.get("uses", "")]
    assert keep["with"]["path"] == "build/sbom.cdx.json"
    assert order.index("make install") < order.index("make sbom") < order.index(keep["uses"])
    # The cost gate and the benchmark block the template's CI (tests/test_bench.py), not the
    # service's: they measure the template's choices.
    assert "bench" not in check_runs
    makefile = (project / "Makefile").read_text(encoding="utf-8")
    for target in ("install", "lint", "test", "audit", "image", "sbom"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"Makefile lacks {target}"
    # The tests run on the image's own base, so nginx there is the version production runs.
    dockerfile = (project / "Dockerfile").read_text(encoding="utf-8")
    base_image = re.search(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert base_image is not None
    assert check["container"] == base_image.group(1)
    assert image["needs"] == "check"
    image_runs = [step.get("run", "") for step in image["steps"]]
    assert image_runs[1:] == [
        "make image ENGINE=docker IMAGE=my-service:ci",
        f"{SMOKE_TEST} my-service:ci",
    ]


def test_the_publish_job_is_off_by_default_and_signs_what_it_pushes(default_bake: Bake) -> None:
    """publish runs only on a push to main with the PUBLISH_IMAGE variable "true", after the
    checks and the smoke test; it pushes with provenance and the image's SBOM as attestations
    and signs the pushed digest, keyless."""
    workflow = load_yaml(default_bake.project / WORKFLOW)
    publish = workflow["jobs"]["publish"]
    condition = publish["if"]
    for part in (
        "vars.PUBLISH_IMAGE == 'true'",
        "github.event_name == 'push'",
        "github.ref == 'refs/heads/main'",
    ):
        assert part in condition
    assert condition.count("&&") == 2, "every part must hold, not one of them"
    assert publish["needs"] == ["check", "image"]
    steps = publish["steps"]
    (push,) = [step for step in steps if step.get("uses", "").startswith("docker/build-push-")]
    assert push["with"]["push"] is True
    assert push["with"]["provenance"] == "mode=max"
    assert push["with"]["sbom"] is True  # the whole image's SBOM: make sbom is uv.lock's only
    (sign,) = [step for step in steps if "cosign sign" in step.get("run", "")]
    assert sign["run"] == 'cosign sign --yes "$IMAGE@$DIGEST"'
    assert sign["env"]["DIGEST"] == f"${{{{ steps.{push['id']}.outputs.digest }}}}"
    assert steps.index(sign) > steps.index(push)


def test_smoke_test_script_is_clean_shell(default_bake: Bake) -> None:
    """The container smoke test is executable and shellcheck finds nothing in it."""
    script = default_bake.project / SMOKE_TEST
    assert script.stat().st_mode & stat.S_IXUSR
    run(tool("shellcheck"), "--severity=style", script, cwd=default_bake.project)


def test_smoke_test_works_with_docker_or_podman(default_bake: Bake) -> None:
    """The smoke test picks Docker when its daemon answers, else podman, whose health checks it
    runs itself (no systemd timer does), on a free port; tests/test_image.py runs it whole."""
    text = (default_bake.project / SMOKE_TEST).read_text(encoding="utf-8")
    assert "docker info" in text
    assert '"$engine" healthcheck run "$name"' in text
    assert "free_port" in text
    assert '"$engine" stop --time' in text
    assert '"$engine" wait "$name"' in text
    # The same restrictions as production: read-only root, tmpfs for the run directory.
    assert "--read-only" in text
    assert "--cap-drop ALL" in text


def test_ci_none_leaves_no_files(tmp_path: Path) -> None:
    """Turning ci off removes .github/ entirely; the rest of the project stays."""
    result = bake(tmp_path, ci="none")

    assert result.exit_code == 0, result.stderr
    assert not (result.project / ".github").exists()
    assert (result.project / "pyproject.toml").is_file()


def test_kubernetes_is_opt_in(default_bake: Bake, kubernetes_bake: Bake) -> None:
    """kubernetes=true adds k8s/ and docs/kubernetes.md; the default bake has neither, and no
    file of it names them (a path a reader would look for in vain)."""
    for path in ("k8s", "docs/kubernetes.md"):
        assert (kubernetes_bake.project / path).exists(), path
        assert not (default_bake.project / path).exists(), path
    naming = [
        name
        for name, data in tree(default_bake.project).items()
        if re.search(rb"\bk8s/|kubernetes\.md", data)
    ]
    assert naming == []


# --- Kubernetes (the rest: tests/test_kubernetes.py) ----------------------------------------


def test_writable_paths_agree_across_compose_smoke_test_and_pod(kubernetes_bake: Bake) -> None:
    """compose.yaml's tmpfs, the smoke test's --tmpfs and the pod's emptyDirs are the same paths."""
    project = kubernetes_bake.project
    compose = load_yaml(project / "compose.yaml")
    (service,) = compose["services"].values()
    compose_paths = {entry.split(":")[0] for entry in service["tmpfs"]}
    smoke = (project / SMOKE_TEST).read_text(encoding="utf-8")
    smoke_paths = set(re.findall(r'--tmpfs "?(/[^\s:"]+)', smoke))
    pod_paths = {mount["mountPath"] for mount in app_container(project)["volumeMounts"]}
    assert compose_paths == smoke_paths == pod_paths, (compose_paths, smoke_paths, pod_paths)
    assert service["read_only"] is True
    assert "--read-only" in smoke
    stop_time = re.search(r"stop --time (\d+)", smoke)
    assert stop_time is not None
    assert f"{stop_time.group(1)}s" == service["stop_grace_period"]


# --- updates from the template ------------------------------------------------------------


def recorded_answers(project: Path) -> dict[str, Any]:
    data = json.loads((project / ".cookiecutter-answers.json").read_text(encoding="utf-8"))
    answers: dict[str, Any] = data["default_context"]
    return answers


def test_recorded_answers_are_the_questions_only(default_bake: Bake) -> None:
    """.cookiecutter-answers.json holds every question's answer and no machine-specific path."""
    answers = recorded_answers(default_bake.project)
    questions = json.loads((TEMPLATE_DIR / "cookiecutter.json").read_text(encoding="utf-8"))
    assert set(answers) == {key for key in questions if not key.startswith("_")}
    text = (default_bake.project / ".cookiecutter-answers.json").read_text(encoding="utf-8")
    assert str(default_bake.output_dir) not in text
    assert str(TEMPLATE_DIR) not in text
    assert answers["kubernetes"] is False
    assert answers["python_version"] == "3.13"


# Quotes, a backslash, non-ASCII and a character beyond the BMP: the record must carry them
# through JSON and cookiecutter's YAML config loader unchanged.
HOSTILE_AUTHOR = 'O\'Brien "Bob" \\ Zoë 🚀'


@pytest.fixture
def custom_bake(tmp_path: Path) -> Bake:
    """A fresh bake with answers away from the defaults (other tests run in default_bake)."""
    result = bake(
        tmp_path / "original", author_name=HOSTILE_AUTHOR, license="Apache-2.0", kubernetes="yes"
    )
    assert result.exit_code == 0, result.stderr
    return result


def test_rerender_from_recorded_answers_is_identical(custom_bake: Bake, tmp_path: Path) -> None:
    """Re-rendering with nothing changed reproduces the project byte for byte."""
    rendered = rerender(custom_bake.project, tmp_path / "again")

    assert tree(rendered) == tree(custom_bake.project)


@pytest.mark.parametrize(
    ("change", "marks"),
    [
        (("description", "Settles payments between banks."), ("Settles payments between banks.",)),
        (("python_version", "3.12"), ("3.12", "py312")),
    ],
    ids=["description", "python_version"],
)
def test_changing_one_answer_changes_only_its_lines(
    custom_bake: Bake, tmp_path: Path, change: tuple[str, str], marks: tuple[str, ...]
) -> None:
    """Bake, change one answer, re-render from the record: each changed line carries the change."""
    key, value = change
    old = str(recorded_answers(custom_bake.project)[key])
    rendered = rerender(custom_bake.project, tmp_path / "changed", f"{key}={value}")

    before, after = tree(custom_bake.project), tree(rendered)
    assert before.keys() == after.keys()
    changed_files = [name for name in before if before[name] != after[name]]
    assert ".cookiecutter-answers.json" in changed_files
    assert recorded_answers(rendered)[key] == value
    assert recorded_answers(rendered)["author_name"] == HOSTILE_AUTHOR
    assert recorded_answers(rendered)["kubernetes"] is True
    for name in changed_files:
        diff = difflib.unified_diff(
            before[name].decode().splitlines(), after[name].decode().splitlines(), lineterm="", n=0
        )
        for line in diff:
            if line.startswith(("---", "+++", "@@")):
                continue
            expected = marks if line.startswith("+") else (old, old.replace(".", ""))
            assert any(mark in line for mark in expected), f"{name}: unrelated change {line!r}"


def git(cwd: Path, *args: str) -> str:
    return run("git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args, cwd=cwd)


def template_repository(tmp_path: Path) -> Path:
    """The template's working tree, committed in a repository of its own under tmp_path."""
    template = tmp_path / "template"
    shutil.copytree(
        TEMPLATE_DIR,
        template,
        # build/: ./scripts/demo's bake, whose sockets copytree cannot copy while it serves.
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".cache", "__pycache__", ".*_cache", "build"
        ),
    )
    git(template, "init", "-q")
    git(template, "add", "-A")
    git(template, "commit", "-q", "-m", "template v1")
    return template


def test_cruft_links_with_the_recorded_answers_and_updates(tmp_path: Path) -> None:
    """The README's cruft flow: link from the record (no diff), then a template change arrives."""
    template = template_repository(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    run(
        sys.executable,
        "-m",
        "cookiecutter",
        "--no-input",
        "--output-dir",
        out,
        template,
        "description=Settles payments between banks.",
        cwd=tmp_path,
    )
    project = out / "my-service"
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "baked")
    cruft = tool("cruft")

    run(
        cruft,
        "link",
        "--no-input",
        "--config-file",
        ".cookiecutter-answers.json",
        template,
        cwd=project,
    )
    run(cruft, "diff", "--exit-code", cwd=project)  # the record reproduces the project
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "linked")
    editorconfig = template / "{{cookiecutter.project_slug}}" / ".editorconfig"
    editorconfig.write_text(
        editorconfig.read_text(encoding="utf-8") + "# template v2\n", encoding="utf-8"
    )
    git(template, "commit", "-q", "-a", "-m", "template v2")
    assert (
        subprocess.run([cruft, "check"], cwd=project, capture_output=True, check=False).returncode
        == 1
    )
    run(cruft, "update", "--skip-apply-ask", cwd=project)

    assert (project / ".editorconfig").read_text(encoding="utf-8").endswith("# template v2\n")
    assert "Settles payments between banks." in (project / "pyproject.toml").read_text(
        encoding="utf-8"
    )
    run(cruft, "check", cwd=project)


def prepare_release(template: Path, version: str, entries: str) -> None:
    """What CONTRIBUTING.md has a maintainer do before committing and scripts/release:
    Unreleased's entries (and these) under a dated section, cookiecutter.json naming it, the
    stack's section dated."""
    today = dt.date.today().isoformat()
    changelog = template / "CHANGELOG.md"
    text = changelog.read_text(encoding="utf-8")
    marker = "## [Unreleased]\n"
    changelog.write_text(
        text.replace(marker, f"{marker}\n## [{version}] - {today}\n{entries}", 1), encoding="utf-8"
    )
    answers = template / "cookiecutter.json"
    text = answers.read_text(encoding="utf-8")
    text = re.sub(r'"_template_version": "[^"]+"', f'"_template_version": "{version}"', text)
    answers.write_text(text, encoding="utf-8")
    stack_log = template / "{{cookiecutter.project_slug}}" / "stack" / "CHANGELOG.md"
    text = stack_log.read_text(encoding="utf-8")
    text = re.sub(r"^(## \S+) - unreleased$", rf"\1 - {today}", text, flags=re.MULTILINE)
    stack_log.write_text(text, encoding="utf-8")


# One file of a prepared release changed so that scripts/release must refuse, and the refusal.
RELEASE_BREAKERS = [
    ("CHANGELOG.md", r"^## \[Unreleased\]\n", "## [Unreleased]\n- a fix\n", "Unreleased still has"),
    (
        "cookiecutter.json",
        r'"_template_version": "[^"]+"',
        '"_template_version": "0.0.1"',
        "is 0.0.1",
    ),
    (
        "{{cookiecutter.project_slug}}/stack/pyproject.toml",
        r'^version = ".*"$',
        'version = "9.9.9"',
        "serving-stack 9.9.9, which this release ships, has no dated section",
    ),
]


def refused(release: str, *args: str) -> str:
    """scripts/release's refusal: exit 1 and one line saying why."""
    done = subprocess.run([release, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == "", done.stdout
    assert re.fullmatch(r"error: [^\n]+\n", done.stderr), done.stderr
    return done.stderr


def test_a_release_is_a_tag_that_cruft_creates_and_updates_from(tmp_path: Path) -> None:
    """README's versioning: scripts/release tags vX.Y.Z, refusing in one line what a bake of
    the tag would get wrong; `cruft create --checkout` bakes a release and `cruft update
    --checkout` brings exactly the next one's change, not what was committed after it."""
    template = template_repository(tmp_path)
    release = str(template / "scripts" / "release")
    version = Version(
        str(
            json.loads((template / "cookiecutter.json").read_text(encoding="utf-8"))[
                "_template_version"
            ]
        )
    )
    first, second = version.base_version, f"{version.major}.{version.minor}.{version.micro + 1}"
    assert "usage: scripts/release X.Y.Z" in refused(release, "1.1")
    assert "usage" in refused(release, f"v{first}")
    assert "CHANGELOG.md's newest release is" in refused(release, first)
    prepare_release(template, first, "")
    assert "uncommitted changes" in refused(release, first)
    git(template, "commit", "-q", "-a", "-m", f"release {first}")
    for path, pattern, replacement, refusal in RELEASE_BREAKERS:
        text = (template / path).read_text(encoding="utf-8")
        broken = re.sub(pattern, replacement, text, count=1, flags=re.MULTILINE)
        (template / path).write_text(broken, encoding="utf-8")
        git(template, "commit", "-q", "-a", "-m", "broken")
        assert refusal in refused(release, first)
        git(template, "reset", "-q", "--hard", "HEAD~1")
    assert f"tagged v{first} at" in run(release, first, cwd=tmp_path)
    assert git(template, "tag", "--list").split() == [f"v{first}"]
    out = tmp_path / "out"
    context = json.dumps({"description": "Settles payments between banks."})
    cruft = tool("cruft")
    run(
        cruft,
        "create",
        "--no-input",
        "--checkout",
        f"v{first}",
        "--output-dir",
        out,
        "--extra-context",
        context,
        template,
        cwd=tmp_path,
    )
    project = out / "my-service"
    assert f"baked from release {first} of" in (project / "README.md").read_text(encoding="utf-8")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "baked")

    editorconfig = template / "{{cookiecutter.project_slug}}" / ".editorconfig"
    original = editorconfig.read_text(encoding="utf-8")
    editorconfig.write_text(f"{original}# changed in {second}\n", encoding="utf-8")
    prepare_release(template, second, "- .editorconfig: a comment.\n")
    git(template, "commit", "-q", "-a", "-m", f"release {second}")
    run(release, second, cwd=tmp_path)
    editorconfig.write_text(f"{original}# changed after {second}\n", encoding="utf-8")
    git(template, "commit", "-q", "-a", "-m", "unreleased")
    run(
        cruft,
        "update",
        "--skip-apply-ask",
        "--checkout",
        f"v{second}",
        cwd=project,
    )

    changed = git(project, "diff", "HEAD", "--name-only").split()
    assert changed == [".cruft.json", ".editorconfig", "README.md"], changed
    diff = git(project, "diff", "HEAD", "--unified=0", "--", ".editorconfig", "README.md")
    lines = [
        line
        for line in diff.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert lines == [
        f"+# changed in {second}",
        f"-This project was baked from release {first} of the template; its",
        f"+This project was baked from release {second} of the template; its",
    ], lines
    record = json.loads((project / ".cruft.json").read_text(encoding="utf-8"))
    assert record["checkout"] == f"v{second}"
    assert record["commit"] == git(template, "rev-list", "-n", "1", f"v{second}").strip()
    assert "Settles payments between banks." in (project / "pyproject.toml").read_text(
        encoding="utf-8"
    )


# --- developer tools ----------------------------------------------------------------------


@pytest.mark.parametrize("answers", [{}, {"ci": "none"}], ids=["defaults", "ci=none"])
@pytest.mark.slow
def test_pre_commit_runs_the_ci_linters_clean(
    answers: dict[str, str], project_env: ProjectEnv, tmp_path: Path
) -> None:
    """pre-commit (local hooks on the project's .venv) covers CI's linters and passes on a bake."""
    project = bake(tmp_path / "bake", **answers).project
    config = load_yaml(project / ".pre-commit-config.yaml")
    hook_ids = {hook["id"] for repo in config["repos"] for hook in repo["hooks"]}
    assert {"ruff-check", "ruff-format", "mypy", "hadolint", "shellcheck"} <= hook_ids
    environ = project_env.environ(project) | {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "bake")
    (project / ".venv").symlink_to(project_env.venv)  # what `make install` would create

    output = run(tool("pre-commit"), "run", "--all-files", cwd=project, env=environ)

    for hook_id in ("ruff", "mypy", "hadolint"):
        assert re.search(rf"{hook_id}.*Passed", output, re.IGNORECASE), output
    if "ci" not in answers:  # the smoke test is the project's shell script
        assert re.search(r"shellcheck.*Passed", output), output


@pytest.mark.slow
def test_uv_sync_installs_the_project(default_bake: Bake, tmp_path: Path) -> None:
    """`uv sync` (registry reachable) installs the project with its dev group into .venv."""
    project = tmp_path / "my-service"
    shutil.copytree(default_bake.project, project)
    environ = dict(os.environ, UV_CACHE_DIR=str(TEMPLATE_DIR / ".cache" / "uv"))
    environ.pop("VIRTUAL_ENV", None)

    run(tool("uv"), "sync", "--quiet", cwd=project, env=environ)

    python = project / ".venv" / "bin" / "python"
    run(python, "-c", "import my_service.main, gunicorn, uvicorn_worker, pytest, mypy", cwd=project)
    assert (project / "uv.lock").is_file()


def test_editorconfig_matches_the_formatter(default_bake: Bake) -> None:
    """.editorconfig asks editors for what ruff enforces: LF, final newline, 100 columns."""
    text = (default_bake.project / ".editorconfig").read_text(encoding="utf-8")
    assert "root = true" in text
    assert "end_of_line = lf" in text
    assert "insert_final_newline = true" in text
    ruff_line_length = re.search(
        r"^line-length = (\d+)", (default_bake.project / "pyproject.toml").read_text(), re.MULTILINE
    )
    assert ruff_line_length is not None
    assert f"max_line_length = {ruff_line_length.group(1)}" in text


def test_rendered_files_follow_the_editorconfig(tmp_path: Path) -> None:
    """Every rendered text file already obeys .editorconfig, so editors change nothing on save."""
    # Fresh (other tests leave caches in default_bake), with the opt-in k8s/ too.
    project = bake(tmp_path, kubernetes="true").project
    problems = []
    for path in sorted(project.rglob("*")):
        relative = path.relative_to(project)
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if text and not text.endswith("\n"):
            problems.append(f"{relative}: no final newline")
        if "\r" in text:
            problems.append(f"{relative}: CR line endings")
        if path.suffix != ".md" and any(line != line.rstrip() for line in text.splitlines()):
            problems.append(f"{relative}: trailing whitespace")
        if path.name != "Makefile" and "\t" in text:
            problems.append(f"{relative}: tab indentation")
    assert not problems, "\n".join(problems)
