"""Fixtures that bake the template and share one installed environment between bakes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import procfs

from .full_suites import FullSuite, FullSuites, Step
from .images import engine_env
from .images import tag as images_tag

TEMPLATE_DIR = Path(__file__).resolve().parent.parent
# Outside the checkout, which may sit in a private directory: as root, the generated project's
# live tests run its packages as an unprivileged user, who must be able to read them.
CACHE_DIR = Path(tempfile.gettempdir()) / "cookiecutter-fastapi-service-cache"
DEFAULT_CONTEXT: dict[str, object] = json.loads(
    (TEMPLATE_DIR / "cookiecutter.json").read_text(encoding="utf-8")
)


@dataclass(frozen=True)
class Bake:
    """The outcome of one `cookiecutter --no-input` run."""

    exit_code: int
    stderr: str
    output_dir: Path

    @property
    def project(self) -> Path:
        """The rendered project directory (the only directory cookiecutter created)."""
        (project,) = [path for path in self.output_dir.iterdir() if path.is_dir()]
        return project

    @property
    def package_name(self) -> str:
        """The app's import name: src/ holds it alone (the serving stack is stack/)."""
        (package,) = [path.parent.name for path in (self.project / "src").glob("*/__init__.py")]
        return package


def bake(output_dir: Path, **answers: str) -> Bake:
    """Run cookiecutter's command line exactly as a user or CI would, answers as key=value."""
    output_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "cookiecutter",
        "--no-input",
        "--output-dir",
        str(output_dir),
        str(TEMPLATE_DIR),
        *(f"{key}={value}" for key, value in answers.items()),
    ]
    result = run_captured(command)
    return Bake(result.returncode, result.stderr, output_dir)


def shared_bake(output_dir: Path, **answers: str) -> Bake:
    """A bake that must succeed, its directory open to the unprivileged user the live tests run
    the stack as (shared_tmp says why)."""
    result = bake(output_dir, **answers)
    assert result.exit_code == 0, result.stderr
    output_dir.chmod(0o755)
    return result


def rerender(project: Path, output_dir: Path, *changes: str) -> Path:
    """The README's update command: the recorded answers as defaults, plus key=value changes."""
    command = [
        sys.executable,
        "-m",
        "cookiecutter",
        "--no-input",
        "--config-file",
        str(project / ".cookiecutter-answers.json"),
        "--output-dir",
        str(output_dir),
        str(TEMPLATE_DIR),
        *changes,
    ]
    done = run_captured(command, cwd=output_dir.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    (rendered,) = [p for p in output_dir.iterdir() if p.is_dir()]
    return rendered


def tree(project: Path) -> dict[str, bytes]:
    """Every file's bytes by path, what running the code leaves (bytecode, caches) aside."""
    return {
        str(path.relative_to(project)): path.read_bytes()
        for path in sorted(project.rglob("*"))
        if path.is_file() and not {"__pycache__", ".pytest_cache", ".ruff_cache"} & set(path.parts)
    }


# Kubernetes versions the manifests are validated against (oldest supported, newest).
# The markers that let a line opt out of ruff format, spelled apart so no file names them
# whole: a line bound is met by code, never by packing (test_bake, test_tooling).
PACKING_MARKERS = tuple("# fmt: " + word for word in ("skip", "off"))


def packed(root: Path, paths: Iterable[Path]) -> list[str]:
    """The paths, relative to root, of the Python files a packing marker opts out."""
    return [
        str(path.relative_to(root))
        for path in paths
        if any(marker in path.read_text(encoding="utf-8") for marker in PACKING_MARKERS)
    ]


KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
# ./scripts/bench, as a person runs it.
BENCH_SCRIPT = TEMPLATE_DIR / "scripts" / "bench"


LEFTOVER_TAG = re.compile(r"(?<!\$)\{\{|\{%|cookiecutter\.")


def rendered_text_files(project: Path) -> list[Path]:
    files = []
    for path in sorted(project.rglob("*")):
        if path.is_file():
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            files.append(path)
    return files


def assert_renders_cleanly(result: Bake) -> None:
    """Valid TOML and Python everywhere, and no Jinja left in any text file."""
    assert result.exit_code == 0, result.stderr
    for path in rendered_text_files(result.project):
        text = path.read_text(encoding="utf-8")
        leftovers = [m.group() for m in LEFTOVER_TAG.finditer(text)]
        assert not leftovers, f"{path.relative_to(result.project)}: leftover {leftovers}"
        if path.suffix == ".toml":
            tomllib.loads(text)
        elif path.suffix == ".py":
            compile(text, str(path), "exec")


def run_captured(
    argv: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """A command's result with its output as text, never raising on a non-zero exit: each
    test asserts on returncode itself and shows the output it needs."""
    return subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def bench_environ(project_env: ProjectEnv, project: Path) -> dict[str, str]:
    """./scripts/bench's environment: the bakes' shared environment's Python, no database."""
    env = dict(project_env.environ(project), BENCH_PYTHON=str(project_env.venv / "bin" / "python"))
    env.pop("DATABASE_URL", None)
    return env


def lab_environ(project_env: ProjectEnv, project: Path) -> dict[str, str]:
    """The lab's and the experiments' environment, as scripts/bench and scripts/experiments
    set it: the template's checkout beside the bake's app and stack on PYTHONPATH."""
    layout = [TEMPLATE_DIR, project / "src", project / "stack"]
    return dict(project_env.environ(project), PYTHONPATH=os.pathsep.join(map(str, layout)))


def battery_command(env: ProjectEnv, project: Path, *args: str) -> list[str]:
    """./scripts/battery against a bake, run by the bakes' shared environment's Python."""
    python = f"--python={env.venv / 'bin' / 'python'}"
    return [str(TEMPLATE_DIR / "scripts" / "battery"), str(project), python, *args]


def bench(
    project: Path, project_env: ProjectEnv, *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """./scripts/bench as a person runs it, with the bakes' shared environment's Python."""
    command = [str(BENCH_SCRIPT), str(project), *args]
    return run_captured(command, cwd=cwd, env=bench_environ(project_env, project))


def leftover_processes(project: Path) -> list[str]:
    """Processes still running in the project directory (the lab starts every server there)
    or naming it on their command line."""
    found = []
    for pid in procfs.table():
        command = procfs.cmdline(pid)
        with contextlib.suppress(OSError):
            if pid != os.getpid() and (
                Path(f"/proc/{pid}/cwd").resolve() == project.resolve() or str(project) in command
            ):
                found.append(command)
    return found


@pytest.fixture(scope="session")
def shared_tmp() -> Iterator[Path]:
    """A temporary directory other users may enter.

    As root, the generated project's live tests run the stack as an unprivileged user, which
    must read the project: pytest's own temporary directories are private (mode 0700).
    """
    path = Path(tempfile.mkdtemp(prefix="template-bakes-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def default_bake(shared_tmp: Path) -> Bake:
    """The project rendered with every default answer."""
    return shared_bake(shared_tmp / "default")


@pytest.fixture(scope="session")
def kubernetes_bake(shared_tmp: Path) -> Bake:
    """The project rendered with kubernetes=true, the other answers default (read only): k8s/
    is opt-in, so the default bake has none. Rendered only: it shares the default bake's
    uv.lock, so project_env serves it too."""
    return shared_bake(shared_tmp / "kubernetes", kubernetes="true")


@pytest.fixture(scope="session")
def database_bake(shared_tmp: Path) -> Bake:
    """The project rendered with database=postgresql and kubernetes=true (the manifests'
    database parts: the migrate init container, the Secret, the connection budget), the other
    answers default (read only: a test that edits a bake makes its own)."""
    return shared_bake(shared_tmp / "database", database="postgresql", kubernetes="true")


@pytest.fixture(scope="session")
def jobs_bake(shared_tmp: Path) -> Bake:
    """The project rendered with database=postgresql, jobs=procrastinate and kubernetes=true
    (the job worker's compose service and k8s/base/worker.yaml), the other answers default
    (read only)."""
    return shared_bake(
        shared_tmp / "jobs", database="postgresql", jobs="procrastinate", kubernetes="true"
    )


@dataclass(frozen=True)
class ProjectEnv:
    """A virtualenv holding the generated project's runtime and dev dependencies.

    Bakes with the same pyproject.toml share it: the project's own code is not installed
    there but put first on PYTHONPATH, so one environment serves every bake. Its packages
    are in src/, the serving stack's in stack/.
    """

    venv: Path
    mypy_cache: Path

    def environ(self, project: Path) -> dict[str, str]:
        env = dict(os.environ)
        paths = [project / "src", project / "stack"]
        env["PYTHONPATH"] = os.pathsep.join(map(str, paths))
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env['PATH']}{os.pathsep}/usr/sbin"
        env["VIRTUAL_ENV"] = str(self.venv)
        # mypy's cache is keyed by module and file hash, so bakes can share it safely.
        env["MYPY_CACHE_DIR"] = str(self.mypy_cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def make(self, project: Path, *targets: str) -> subprocess.CompletedProcess[str]:
        """Run the project's own Makefile targets against this environment."""
        return run_captured(
            ["make", "--no-print-directory", "-C", str(project), *targets, f"VENV={self.venv}"],
            env=self.environ(project),
        )


def jobs_number(project: Path, pattern: str) -> float:
    """A number the bake's settings.py defines (the drain's default, the abort margin)."""
    package = next(p.parent.name for p in (project / "src").glob("*/settings.py"))
    settings = (project / "src" / package / "settings.py").read_text(encoding="utf-8")
    found = re.search(pattern, settings, re.MULTILINE)
    assert found is not None, f"settings.py no longer matches {pattern}"
    return float(found.group(1))


def assert_make(env: ProjectEnv, project: Path, target: str, *args: str) -> None:
    result = env.make(project, target, *args)
    assert result.returncode == 0, f"make {target}\n{result.stdout}\n{result.stderr}"


def assert_lints_and_tests(env: ProjectEnv, project: Path, *test_args: str) -> None:
    assert_make(env, project, "lint")
    subset = [f"PYTEST_ARGS={' '.join(test_args)}"] if test_args else []
    assert_make(env, project, "test", *subset)


def _dependencies(project: Path) -> list[str]:
    """The project's and its serving stack's (stack/, on PYTHONPATH instead of installed)."""
    data = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    stack = tomllib.loads((project / "stack" / "pyproject.toml").read_text(encoding="utf-8"))
    own = [r for r in data["project"]["dependencies"] if not r.startswith("serving-stack")]
    return [*own, *stack["project"]["dependencies"], *data["dependency-groups"]["dev"]]


def locked_packages(lock: Path) -> dict[str, str]:
    """uv.lock's versions by name, the project and the serving stack (their directory
    sources) aside."""
    packages = tomllib.loads(lock.read_text(encoding="utf-8"))["package"]
    return {
        package["name"]: package["version"]
        for package in packages
        if not {"editable", "virtual", "directory"} & set(package["source"])
    }


def install_env(project: Path) -> Path:
    """A venv with ``project``'s dependencies, cached by them (bakes with the same share).

    A service bake's are exactly its uv.lock's, runtime and dev (`uv sync --locked`, as its
    `make install` does): the template's tests run against the set every bake ships. pip stays
    in the venv (--inexact). The serving stack itself is not installed: each bake's stack/ is
    on PYTHONPATH (ProjectEnv.environ). A serving-only bake has no lock: its pyproject.toml's
    ranges and the stack's, with pip. Bytecode is left to the first import, unlike `make
    install`'s --compile-bytecode: compiling every package costs 14 s of CPU per venv
    (measured), importing compiles only what runs, once (the tests that follow the README run
    `make install` itself).
    """
    lock = project / "uv.lock"
    if lock.is_file():
        requirements = [f"{name}=={version}" for name, version in locked_packages(lock).items()]
    else:
        requirements = _dependencies(project)
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:16]
    venv = CACHE_DIR / f"project-env-{digest}"
    if not (venv / "ok").exists():
        CACHE_DIR.mkdir(mode=0o755, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        if lock.is_file():
            uv = Path(sys.executable).parent / "uv"
            sync = [uv, "sync", "--locked", "--inexact", "--no-install-project", "--quiet"]
            sync += ["--no-install-package", "serving-stack"]  # on PYTHONPATH, per bake
            environment = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv)}
            environment.pop("VIRTUAL_ENV", None)
            subprocess.run(
                [*sync, "--python", venv / "bin" / "python"],
                cwd=project,
                env=environment,
                check=True,
            )
        else:
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
            subprocess.run([*pip, "--upgrade", "pip"], check=True)
            subprocess.run([*pip, *requirements], check=True)
        (venv / "ok").write_text("\n".join(requirements), encoding="utf-8")
    return venv


@pytest.fixture(scope="session")
def project_env(default_bake: Bake, tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    """Install the default bake's dependencies once; reused across runs while they are unchanged."""
    venv = install_env(default_bake.project)
    return ProjectEnv(venv=venv, mypy_cache=tmp_path_factory.mktemp("mypy-cache"))


# The answers of each bake a test names in @pytest.mark.full_suite.
FULL_SUITE_ANSWERS: dict[str, dict[str, str]] = {
    "default": {},
    # The battery against a bake of its own, from the session's start: behind the default
    # bake's lint and tests, in one thread, it began a minute later and was the run's longest
    # chain. With kubernetes=true, as the postgresql suite: battery/test_probes.py reads the
    # probes from k8s/base and skips without it (k8s/ is opt-in).
    "battery": {"kubernetes": "true"},
    "postgresql": {"database": "postgresql", "kubernetes": "true"},
    # Each bake's image, built and smoke-tested with podman (tests/images.py, test_image.py).
    "image": {},
    "image-postgresql": {"database": "postgresql", "jobs": "procrastinate"},
    # Background jobs: its documented changes, then lint and test (real workers, PostgreSQL).
    "jobs": {"database": "postgresql", "jobs": "procrastinate", "kubernetes": "true"},
    # The lab's commands (tests/full_suites.py says why in the background); lab_output().
    "lab": {},
    # The peers experiment's short run (test_peers.py), which judges no ratio; peers_output().
    "peers": {},
    # The rollout rehearsal (test_rollout.py) of the two images above, each against the bake
    # it was built from; its own bake gives it the shared environment only.
    "rollout": {},
}
# A suite that starts when others have ended. The lab's steps keep one CPU busy each: started
# with the others they slowed the battery from 5 to 11 minutes. The postgresql bake's suite ends
# at about minute 4 (cold runs; the images end sooner only when their layers are cached). The
# peers' run loads both CPUs, so it waits for the battery, whose clients time the servers; in
# the foreground, after the battery, it left one CPU idle while the other finished the
# foreground's last single-threaded tests (CPU at 50 % for about two minutes of a run).
# The jobs suite after the battery: its worker starts and its bench's 10,000 jobs, beside the
# battery, took the victims' share under attack below the battery's floor (0.69 x).
# The two images one after the other: their runtime stages' apt layer is the same, built once,
# and the second build's uv finds the first's wheels in the shared cache.
# The rollout rehearsal loads both CPUs (two containers, HAProxy and its clients), so it waits
# for the battery too; it reads the images the image suites build, which end around minute
# 2.5, the battery around minute 8: after the battery, both images exist (it waits for them
# too, for a session that selects no battery).
SUITE_AFTER = {
    "lab": ("postgresql",),
    "peers": ("battery",),
    "image-postgresql": ("image",),
    "jobs": ("battery",),
    "rollout": ("battery", "image-postgresql"),
}
# ./scripts/experiments, as a person runs it.
EXPERIMENTS_SCRIPT = TEMPLATE_DIR / "scripts" / "experiments"


def full_suite_dir(shared_tmp: Path, name: str) -> Path:
    """Where full suite ``name`` bakes its project (and the lab's steps write)."""
    return shared_tmp / f"full-suite-{name}"


def lab_output(shared_tmp: Path, step: str) -> Path:
    """Where the lab suite's step writes its results (--out)."""
    return full_suite_dir(shared_tmp, "lab") / "out" / step


def jobs_output(project: Path) -> Path:
    """Where the jobs suite's `./scripts/bench --jobs` writes jobs.md and jobs.json."""
    return project.parent / "out" / "jobs"


def peers_output(shared_tmp: Path) -> Path:
    """Where the peers suite's short run writes peers.json and its report: the default out,
    build/bench, below where it ran (the report quotes its command, which names no path)."""
    return full_suite_dir(shared_tmp, "peers") / "build" / "bench"


def rollout_output(shared_tmp: Path, step: str) -> Path:
    """Where the rollout suite's step writes rollout.json and rollout.md (--out)."""
    return full_suite_dir(shared_tmp, "rollout") / "out" / step.replace(" ", "-")


# The rollout suite's steps: (name, image suite, ./scripts/bench's options besides --out). A
# balancer that does not retry (--retries 0), as cloud balancers do for a POST: without the
# drain phase, then with the image's own DRAIN_SECONDS, then the database bake's with it.
ROLLOUT_STEPS = (
    ("drain off", "image", ("--drain", "0", "--retries", "0")),
    ("drain on", "image", ("--retries", "0")),
    ("postgresql drain on", "image-postgresql", ("--retries", "0")),
)


def rollout_steps(env: ProjectEnv, project: Path) -> list[Step]:
    """The rollout suite: `./scripts/bench BAKE --rollout --image TAG ...` for each of
    ROLLOUT_STEPS, BAKE the image suite's bake its image was built from, in podman's store
    the image suites build into (tests/images.py)."""
    shared_tmp = project.parent.parent  # the bake is in full_suite_dir(shared_tmp, "rollout")
    store = {name: engine_env()[name] for name in ("CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF")}
    steps = []
    for name, suite, options in ROLLOUT_STEPS:
        bake = full_suite_dir(shared_tmp, suite) / project.name
        command = [str(BENCH_SCRIPT), str(bake), "--rollout", "--image", images_tag(suite)]
        command += [*options, "--out", str(rollout_output(shared_tmp, name))]
        steps.append(Step(name, command, bake.parent, bench_environ(env, bake) | store))
    return steps


# What each commit's peers run measures the stack against: the server `fastapi run` starts and
# the one the lab installs for itself; the full run (`--peers`, before a release) takes all five.
PEERS_SHORT_SERVERS = ("stack", "uvicorn", "granian")


def peers_steps(env: ProjectEnv, project: Path) -> list[Step]:
    """The peers suite: `./scripts/bench BAKE --peers --short --servers ...`, as a person runs
    it."""
    command = [str(BENCH_SCRIPT), str(project), "--peers", "--short"]
    command += ["--servers", *PEERS_SHORT_SERVERS]
    return [Step("peers short", command, project.parent, bench_environ(env, project))]


def lab_steps(env: ProjectEnv, project: Path) -> list[Step]:
    """The lab suite: the cost gate twice (the same command: the counts must agree), the
    lab's own tests, then the experiments' floors, grid and CPU share, each run as a person
    runs it (./scripts/bench, ./scripts/experiments) and read by its test."""
    shared_tmp = project.parent.parent  # the bake is in full_suite_dir(shared_tmp, "lab")
    bench_env = bench_environ(env, project)
    gate = [str(BENCH_SCRIPT), str(project), "--only", "cost"]
    lab_env = dict(lab_environ(env, project), LAB_PROJECT=str(project))
    lab_tests = [str(env.venv / "bin" / "python"), "-m", "pytest", "-q", "lab/tests"]
    experiments_env = dict(os.environ, EXPERIMENTS_VENV=str(env.venv))
    script = str(EXPERIMENTS_SCRIPT)
    experiments = {
        "floors": [script, "--floors"],
        "grid": [script, "--quick", "--only", "middleware"],
        "cpu-share": [script, "--cpu-share", "--quick"],
    }
    return [
        Step(
            "cost", [*gate, "--out", str(lab_output(shared_tmp, "cost"))], project.parent, bench_env
        ),
        Step(
            "cost-again",
            [*gate, "--out", str(lab_output(shared_tmp, "cost-again"))],
            project.parent,
            bench_env,
        ),
        Step("lab tests", lab_tests, TEMPLATE_DIR, lab_env),
        *(
            Step(
                name,
                [*command, "--out", str(lab_output(shared_tmp, name))],
                TEMPLATE_DIR,
                experiments_env,
            )
            for name, command in experiments.items()
        ),
    ]


def full_suite_steps(name: str, env: ProjectEnv, project: Path) -> list[Step]:
    """What each full suite runs, in order (tests/full_suites.py).

    default: `make lint`, `make test`. battery: `./scripts/battery` against a bake of its own
    (kubernetes=true; the shared venv's interpreter). lab: lab_steps(). peers: peers_steps().
    postgresql: first a route and a migration added the documented way
    (tests/documented_changes.py), then lint and test, then the battery's database and probe
    tests (the rest of the battery is the battery suite's).
    image and image-postgresql: `make lock`, then the image built and smoke-tested (the
    default one also through compose.yaml) with podman (tests/images.py);
    each first gets a WebSocket, a stream and an upload route the documented way
    (tests/documented_changes.py), the rollout rehearsal's load (rollout_steps()); the default
    one then its own lint and test (the routes break none of the bake's tests), and
    tests/test_image.py reaches the routes in the built image.
    """
    if name == "lab":
        return lab_steps(env, project)
    if name == "peers":
        return peers_steps(env, project)
    if name == "rollout":
        return rollout_steps(env, project)
    python = str(env.venv / "bin" / "python")
    documented = [python, str(TEMPLATE_DIR / "tests" / "documented_changes.py"), str(project)]

    def make(target: str) -> Step:
        command = ["make", "--no-print-directory", "-C", str(project), target, f"VENV={env.venv}"]
        return Step(target, command)

    if name.startswith("image"):  # `make lock` as a person would, then the image from it
        images = [sys.executable, "-m", "tests.images"]
        image = [str(project), images_tag(name)]
        steps = [("build", "build"), ("smoke test", "smoke")]
        if name == "image":  # compose.yaml too (the postgresql one needs a postgres image)
            steps.insert(2, ("compose", "compose"))
        commands = [Step(step, [*images, command, *image], TEMPLATE_DIR) for step, command in steps]
        # Routes the image's own smoke test knows nothing of; the default bake's lint and test
        # prove them (the jobs suite lints and tests a database bake like this one).
        changes = Step("documented changes", [*documented, "streams"])
        if name == "image":
            return [changes, make("lint"), make("test"), make("lock"), *commands]
        return [changes, make("lock"), *commands]

    if name == "default":
        return [make("lint"), make("test")]
    if name == "jobs":  # then the lab's figures, as a person runs them (./scripts/bench --jobs)
        figures = [str(BENCH_SCRIPT), str(project), "--jobs", "--out", str(jobs_output(project))]
        bench_jobs = Step("bench jobs", figures, project.parent, bench_environ(env, project))
        changes = Step("documented changes", [*documented, "jobs"])
        return [changes, make("lint"), make("test"), bench_jobs]
    # The script a person runs (it checks nginx and the template's venv, then pytest).
    if name == "battery":
        return [Step("battery", battery_command(env, project))]
    # The battery's tests that need a database: restarts under load, readiness while it is down.
    selected = "test_database or test_liveness or test_readiness"
    database = Step("battery", battery_command(env, project, "-k", selected))
    changes = Step("documented changes", [*documented, "database"])
    return [changes, make("lint"), make("test"), database]


# The session's full suites, for the summary of where their time went.
STARTED_SUITES = pytest.StashKey[FullSuites]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "full_suite(bake): reads full_suites.result(bake), the bake's whole suite"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that wait on the background suites last, so every other test runs while
    the suites do: first those reading a suite's result (full_suite), then the measurements
    (the quiet_machine fixture waits until every suite has ended). Stable within each group."""

    def group(item: pytest.Item) -> int:
        if "quiet_machine" in getattr(item, "fixturenames", ()):
            return 2
        return 1 if item.get_closest_marker("full_suite") else 0

    items.sort(key=group)


@pytest.fixture(scope="session")
def full_suites(
    request: pytest.FixtureRequest, shared_tmp: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FullSuites]:
    """Start, all at once, the full suite of each bake that a selected test marks full_suite
    (FULL_SUITE_ANSWERS names them; see tests/full_suites.py for why side by side)."""
    selected = {
        mark.args[0] for item in request.session.items for mark in item.iter_markers("full_suite")
    }
    suites = {}
    for name in sorted(selected):
        # A bake of its own: the tests that read default_bake's files run at the same time.
        result = shared_bake(full_suite_dir(shared_tmp, name), **FULL_SUITE_ANSWERS[name])
        # A mypy cache of its own too: the option bakes' lint runs at the same time.
        env = ProjectEnv(install_env(result.project), tmp_path_factory.mktemp("mypy-cache"))
        steps = full_suite_steps(name, env, result.project)
        suites[name] = FullSuite(steps, env.environ(result.project))
    for name, firsts in SUITE_AFTER.items():
        if name in suites:
            suites[name].after = tuple(suites[first] for first in firsts if first in suites)
    started = FullSuites(suites)
    request.config.stash[STARTED_SUITES] = started
    yield started
    started.stop()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """When each background step ran: what a run's wall time is made of."""
    started = config.stash.get(STARTED_SUITES, None)
    if started is not None:
        terminalreporter.section("full suites, each step's minutes")
        for line in started.timeline():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session", autouse=True)
def start_full_suites(full_suites: FullSuites) -> None:
    """Start the selected full suites with the session's first test, not with the first test
    that reads one: the tests before it run while the suites wait on their servers."""
