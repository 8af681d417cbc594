"""The generated projects' images, built and run: what the Dockerfile and the smoke test promise.

The default and postgresql bakes each get `make lock`, `make image` and
`.github/smoke-test.sh` (the postgresql one against a real PostgreSQL: the migration step,
then items), with podman on a stand-in base (tests/images.py), in the background beside the
other suites (tests/full_suites.py); the default bake first gets a WebSocket route and an
event stream the documented way (tests/documented_changes.py), then its own `make lint` and
`make test` (the new routes break none of its tests). These tests read those steps'
results, then check what only the template can: both routes through the built image's nginx
and the image's size against the figure recorded here. Beside them, without an image, the
supply chain's make targets: `make sbom` against uv.lock, `make audit`'s refusals.
"""

from __future__ import annotations

import datetime as dt
import http.client
import itertools
import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from websockets.sync.client import connect

from . import images
from .conftest import Bake, ProjectEnv, run_captured

if TYPE_CHECKING:
    from .full_suites import FullSuites

# The images' sizes as podman reports them (bytes), measured 2026-11-27 on the stand-in base
# (121 MB; CONTRIBUTING.md), with templates/uv-locks/ of that day: 0.95 x and 0.96 x the
# 2026-11-24 builds (201.3, 249.0 MB), uv's venv holding no pip. A build more than 20 %
# larger fails: a compiler left in, a cache not cleaned, a heavy dependency. Smaller is fine;
# record the new figure when a change means it.
RECORDED_SIZE = {"image": 190_400_000, "image-postgresql": 238_600_000}
LARGEST_GROWTH = 1.20


def steps(full_suites: FullSuites, suite: str) -> dict[str, subprocess.CompletedProcess[str]]:
    """The suite's steps by name, each required to have passed (its output in the message)."""
    results = {step.args[0]: step for step in full_suites.result(suite)}
    for name, step in results.items():
        assert step.returncode == 0, f"{suite}: {name} failed\n{step.stdout[-6000:]}{step.stderr}"
    changes = ["documented changes", "lint", "test"] if suite == "image" else ["documented changes"]
    compose = ["compose"] if suite == "image" else []
    expected = [*changes, "lock", "build", "smoke test", *compose]
    assert list(results) == expected, list(results)
    return results


@pytest.mark.full_suite("image")
def test_the_default_image_passes_its_smoke_test(full_suites: FullSuites) -> None:
    """Healthy, every process uid 10001 without capabilities, read-only root, no compiler,
    answers through nginx (a WebSocket handshake reaching the app's WebSocket handling), exit
    0 on SIGTERM, only JSON log lines; and compose.yaml runs it
    under podman-compose (podman refuses Docker's tmpfs uid= option it used to have)."""
    results = steps(full_suites, "image")
    smoke = results["smoke test"].stdout
    assert "compose.yaml under podman-compose: healthy" in results["compose"].stdout
    for said in (
        "processes checked",
        "created and read back item",
        "stopped with status 0",
        "all JSON",
        "ok: healthy, locked down",
        "WebSocket handshake: the app's 403",
    ):
        assert said in smoke, smoke


# The image run with a short request deadline, so a stream outlives it within seconds.
STREAM_DEADLINE_SECONDS = 2


def read_events(port: int, target: str) -> tuple[list[tuple[int, float, float]], bool]:
    """GET target's server-sent events as they arrive: (number, sent, arrived) for each, and
    whether the chunked body ended with its terminator (False: the stream was cut)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", target)
    response = connection.getresponse()
    assert response.status == 200, response.status
    assert response.getheader("content-type", "").startswith("text/event-stream")
    events, complete, pending = [], True, b""
    try:
        # read1, not readline: readline takes a missing terminating chunk for a clean end.
        while data := response.read1(65536):
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if line.startswith(b"data: "):
                    number, sent = line.split()[1:3]
                    events.append((int(number), float(sent), time.time()))
    except (http.client.IncompleteRead, OSError):
        complete = False
    finally:
        connection.close()
    return events, complete


@pytest.mark.full_suite("image")
def test_a_websocket_and_a_stream_added_as_documented_work_through_the_images_nginx(
    full_suites: FullSuites,
) -> None:
    """The image of a bake given a WebSocket echo and a server-sent-event route the README's
    way (a router module, included in create_app) echoes through its nginx to a real
    WebSocket client, and streams events for twice its request deadline, whole and each
    before the app sent the next, with no edit to serving_stack/nginx.conf."""
    steps(full_suites, "image")
    interval = 0.5
    count = int(2 * STREAM_DEADLINE_SECONDS / interval) + 2
    env = {"REQUEST_TIMEOUT_SECONDS": str(STREAM_DEADLINE_SECONDS)}

    with images.running(images.tag("image"), env) as port:
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10) as session:
            session.send("hello")
            assert session.recv(timeout=10) == "echo: hello"
            request_id = session.response.headers.get("x-request-id", "")
        started = time.monotonic()
        events, complete = read_events(port, f"/events?tokens={count}&interval={interval}")
        took = time.monotonic() - started

    assert re.fullmatch(r"[0-9a-f]{32}", request_id), request_id  # nginx's, past the socket
    assert complete, events
    assert [number for number, _, _ in events] == list(range(count)), events
    assert took > 2 * STREAM_DEADLINE_SECONDS, took
    for (_, _, arrived), (_, next_sent, _) in itertools.pairwise(events):
        assert arrived < next_sent, events


@pytest.mark.full_suite("image-postgresql")
def test_the_postgresql_image_migrates_and_serves_items_from_a_real_database(
    full_suites: FullSuites,
) -> None:
    """The migration step runs from the image, then /readyz sees the database and an item is
    created and read back through nginx, all under the smoke test's restrictions."""
    smoke = steps(full_suites, "image-postgresql")["smoke test"].stdout
    assert "the migration step (alembic upgrade head)" in smoke, smoke
    assert '"checks":{"database":"ok"}' in smoke, smoke
    for said in (
        "processes checked",
        "created and read back item",
        "WebSocket handshake: the app's 403",
        "all JSON",
        "ok: healthy",
    ):
        assert said in smoke, smoke


@pytest.mark.full_suite("image")
@pytest.mark.full_suite("image-postgresql")
def test_the_images_stay_within_their_recorded_size(full_suites: FullSuites) -> None:
    """Each image is at most 20 % larger than the size recorded above, and its HEALTHCHECK and
    non-root numeric user survived the build (podman drops the first without --format docker)."""
    report = []
    for suite, recorded in RECORDED_SIZE.items():
        results = steps(full_suites, suite)
        timed = re.findall(
            r"^(?:made|built|smoke-tested) .* s$",
            results["build"].stdout + results["smoke test"].stdout,
            re.MULTILINE,
        )
        report += timed
        details: dict[str, Any] = images.inspect(images.tag(suite))
        size, layers = int(details["Size"]), len(details["RootFS"]["Layers"])
        report.append(
            f"{suite}: {size / 1e6:.1f} MB in {layers} layers (recorded {recorded / 1e6:.1f})"
        )
        assert size <= recorded * LARGEST_GROWTH, report
        assert details["Healthcheck"]["Test"][:2] == ["CMD", "python"], details["Healthcheck"]
        assert details["Config"]["User"] == "10001:10001"
    print("\n".join(report))


# --- the supply chain: `make sbom`, and `make audit`'s refusals (.github/audit.py) ---------


@pytest.fixture
def audited(default_bake: Bake, tmp_path: Path) -> Path:
    """A copy of the default bake, its uv.lock included, for `make sbom` and the audit to read."""
    project = tmp_path / "project"
    shutil.copytree(default_bake.project, project, ignore=shutil.ignore_patterns("*_cache"))
    return project


def locked_runtime_set(lock: dict[str, Any]) -> set[tuple[str, str]]:
    """uv.lock's runtime set as (name, version), read here rather than by uv: the project's
    dependencies and theirs, with the extras each asks for, never the dev group; every
    platform's, as uv's export keeps a platform's package with its marker."""
    packages = lock["package"]
    (project,) = [package for package in packages if package["source"] == {"editable": "."}]
    found: set[tuple[str, str]] = set()
    followed: set[tuple[str, str, str]] = set()
    wanted = list(project["dependencies"])
    while wanted:
        dependency = wanted.pop()
        # A name locked at two versions (one per Python range): the dependency names its own.
        (package,) = [
            package
            for package in packages
            if package["name"] == dependency["name"]
            and dependency.get("version", package["version"]) == package["version"]
        ]
        found.add((package["name"], package["version"]))
        for extra in ["", *dependency.get("extra", [])]:
            if (package["name"], package["version"], extra) in followed:
                continue
            followed.add((package["name"], package["version"], extra))
            if extra:
                wanted += package.get("optional-dependencies", {}).get(extra, [])
            else:
                wanted += package.get("dependencies", [])
    return found


def test_make_sbom_lists_exactly_the_locks_runtime_packages(
    audited: Path, project_env: ProjectEnv
) -> None:
    """`make sbom` (uv's own exporter, no image) writes build/sbom.cdx.json: valid CycloneDX 1.5
    whose components are uv.lock's runtime packages at their versions, the serving stack among
    them without a package URL, no dev tool; the project is its subject, not a component."""
    result = project_env.make(audited, "sbom")

    assert result.returncode == 0, result.stdout + result.stderr
    written = audited / "build" / "sbom.cdx.json"
    bom = json.loads(written.read_text(encoding="utf-8"))
    components = {(component["name"], component["version"]) for component in bom["components"]}
    lock = tomllib.loads((audited / "uv.lock").read_text(encoding="utf-8"))
    expected = locked_runtime_set(lock)
    assert len(expected) > 20, expected
    assert len(components) == len(bom["components"]), "a component listed twice"
    assert components - expected == set(), "components that are not uv.lock's runtime set"
    assert expected - components == set(), "uv.lock's runtime packages missing from the SBOM"
    names = {name for name, _ in components}
    assert names.isdisjoint({"pytest", "ruff", "mypy", "coverage", "pip-audit", "uv"}), names
    assert bom["metadata"]["component"]["name"] == "my-service"
    # stack/ is no index's package: a pkg:pypi purl would send scanners to PyPI for it.
    stack = tomllib.loads((audited / "stack" / "pyproject.toml").read_text(encoding="utf-8"))
    (serving,) = [
        component for component in bom["components"] if component["name"] == "serving-stack"
    ]
    assert serving["version"] == stack["project"]["version"]
    assert "purl" not in serving, serving
    for component in bom["components"]:
        if component is not serving:
            assert component["purl"] == f"pkg:pypi/{component['name']}@{component['version']}"

    # The CycloneDX schema pip-audit's dependency cyclonedx-python-lib ships in the project's
    # venv, read by check-jsonschema (its $refs to the SPDX and JSF schemas resolve beside it).
    (schema,) = project_env.venv.glob(
        "lib/python*/site-packages/cyclonedx/schema/*/bom-1.5.SNAPSHOT.schema.json"
    )
    check_jsonschema = Path(sys.executable).parent / "check-jsonschema"
    validated = run_captured([check_jsonschema, "--schemafile", schema, written])
    assert validated.returncode == 0, validated.stdout + validated.stderr


def audit(project: Path, env: ProjectEnv) -> subprocess.CompletedProcess[str]:
    python = env.venv / "bin" / "python"
    return run_captured([python, ".github/audit.py"], cwd=project)


def test_make_audit_stops_in_one_line_where_no_vulnerability_database_answers(
    audited: Path, project_env: ProjectEnv
) -> None:
    """Where PyPI's vulnerability data cannot be reached (these machines), `make audit` fails
    with one line saying so, never a traceback; where it can, pip-audit's verdict stands."""
    result = project_env.make(audited, "audit")

    said = [line for line in result.stderr.splitlines() if not line.startswith("make")]
    assert "Traceback" not in result.stdout + result.stderr
    if result.returncode != 0:
        assert len(said) == 1, result.stderr
        assert said[0].startswith("error: the vulnerability database"), said


def allowlist_entry(**fields: object) -> str:
    lines = [
        f"{key} = {json.dumps(value) if isinstance(value, str) else value}"
        for key, value in fields.items()
    ]
    return "[[accept]]\n" + "\n".join(lines) + "\n"


SOON = dt.date.today() + dt.timedelta(days=30)
# The audit's own day (UTC) and its longest acceptance, 366 days: the boundary both ways.
YEAR_AHEAD = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=366)
REASON = "only the package's command-line tool is affected; the service never runs it"


@pytest.mark.parametrize(
    ("entry", "refusal"),
    [
        (
            allowlist_entry(id="GHSA-2c5f-9jv8-qx7w", expires=SOON),
            "needs exactly id, reason and expires",
        ),
        (
            allowlist_entry(id="PYSEC-2024-1", reason=REASON, expires=dt.date(2020, 1, 1)),
            "expired on 2020-01-01",
        ),
        (
            allowlist_entry(id="CVE-2024-12345", reason=REASON, expires=str(SOON)),
            "expires must be a date",
        ),
        (
            allowlist_entry(id="BUG-1", reason=REASON, expires=SOON),
            "is not a PYSEC-, GHSA- or CVE- id",
        ),
        (allowlist_entry(id="PYSEC-2024-1", reason="ok", expires=SOON), "the reason must say why"),
        (
            allowlist_entry(
                id="PYSEC-2024-1", reason=REASON, expires=SOON + dt.timedelta(days=400)
            ),
            "more than a year ahead",
        ),
        (
            allowlist_entry(
                id="PYSEC-2024-1", reason=REASON, expires=YEAR_AHEAD + dt.timedelta(days=1)
            ),
            "more than a year ahead",
        ),
        (
            allowlist_entry(
                id="PYSEC-2024-1", reason=REASON, expires=dt.datetime.combine(SOON, dt.time())
            ),
            "expires must be a date",
        ),
        (allowlist_entry(id="GHSA-2c5f-9jv8-qx7w", reason=REASON, expires=SOON), None),
        (allowlist_entry(id="GHSA-2c5f-9jv8-qx7w", reason=REASON, expires=YEAR_AHEAD), None),
    ],
    ids=[
        "no reason",
        "expired",
        "date as text",
        "unknown id",
        "no real reason",
        "too far",
        "a day past a year",
        "date and time",
        "valid",
        "valid, a year ahead",
    ],
)
def test_every_allowlist_entry_needs_an_id_a_reason_and_a_live_expiry(
    audited: Path, project_env: ProjectEnv, entry: str, refusal: str | None
) -> None:
    """A malformed or expired entry of .github/audit-allowlist.toml fails the audit in one line
    naming the entry; a valid one lets the audit go on to the vulnerability database."""
    (audited / ".github" / "audit-allowlist.toml").write_text(entry, encoding="utf-8")

    result = audit(audited, project_env)

    if refusal is None:
        assert "audit-allowlist.toml" not in result.stderr, result.stderr
    else:
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("error: audit-allowlist.toml, entry 1"), result.stderr
        assert refusal in result.stderr, result.stderr
