"""Supply-chain checks, the same for CI and for a person: `make audit` and `make sbom`.

audit: pip-audit of requirements.lock, the runtime dependencies the image installs (without a
       lock: what pyproject.toml resolves to today), blocking; a vulnerability is accepted only
       while .github/audit-allowlist.toml names it with a reason and an expiry date.
sbom:  a CycloneDX 1.6 JSON SBOM of a built image: its Debian packages (dpkg's database) and its
       Python packages (the image's virtualenv), each of the latter checked against the lock.
Standard library only: `make sbom` runs on a CI runner without the project's virtualenv;
`make audit` runs pip-audit from the virtualenv this Python belongs to.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
ALLOWLIST = ROOT / ".github" / "audit-allowlist.toml"
# PYSEC-2024-1, GHSA-xxxx-xxxx-xxxx, CVE-2024-12345: the ids pip-audit reports and ignores.
VULN_ID = re.compile(r"(PYSEC-\d{4}-\d+|GHSA(-[23456789cfghjmpqrvwx]{4}){3}|CVE-\d{4}-\d{4,})")
# An acceptance is a decision to look again, not a permanent exception.
LONGEST_ACCEPTANCE = dt.timedelta(days=366)
PYPI_JSON = "https://pypi.org/pypi/{name}/{version}/json"


class RefusalError(Exception):
    """What stops the check, in one line (never a traceback)."""


def normalize(name: str) -> str:
    """PEP 503: the form package indexes and purls compare names in."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(lock: Path) -> dict[str, str]:
    """Every ``name==version`` of a pip/uv requirements file, by normalized name."""
    pins = re.findall(
        r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^]]*\])?==([^\s;\\]+)", lock.read_text(), re.MULTILINE
    )
    return {normalize(name): version for name, version in pins}


# --- audit --------------------------------------------------------------------------------


def accepted_vulnerabilities(path: Path, today: dt.date) -> list[str]:
    """The allow-list's ids, once every entry has a known id, a reason and a live expiry date."""
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("accept", [])
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise RefusalError(f"{path.name}: {error}") from error
    ids = []
    for number, entry in enumerate(entries, start=1):
        where = f"{path.name}, entry {number}"
        if set(entry) != {"id", "reason", "expires"}:
            raise RefusalError(
                f"{where}: needs exactly id, reason and expires (has {sorted(entry)})"
            )
        vulnerability, reason, expires = entry["id"], entry["reason"], entry["expires"]
        if not isinstance(vulnerability, str) or not VULN_ID.fullmatch(vulnerability):
            raise RefusalError(f"{where}: id {vulnerability!r} is not a PYSEC-, GHSA- or CVE- id")
        if not isinstance(reason, str) or len(reason.split()) < 3:
            raise RefusalError(f"{where} ({vulnerability}): the reason must say why, in words")
        # A TOML date (expires = 2026-06-30), not a string: tomllib then checks the calendar.
        if not isinstance(expires, dt.date) or isinstance(expires, dt.datetime):
            raise RefusalError(
                f"{where} ({vulnerability}): expires must be a date, e.g. 2026-06-30"
            )
        if expires < today:
            raise RefusalError(
                f"{where} ({vulnerability}) expired on {expires}: fix it, or renew it"
            )
        if expires - today > LONGEST_ACCEPTANCE:
            raise RefusalError(f"{where} ({vulnerability}): expires more than a year ahead")
        ids.append(vulnerability)
    return ids


def requirements_to_audit(workdir: Path) -> Path:
    """requirements.lock, else pyproject.toml resolved now by uv (as the image build would)."""
    if LOCK.is_file():
        return LOCK
    resolved = workdir / "requirements.txt"
    uv = Path(sys.executable).parent / "uv"
    command = [str(uv), "pip", "compile", str(ROOT / "pyproject.toml"), "--generate-hashes",
               "--quiet", "--output-file", str(resolved)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - our own argument list
    if done.returncode != 0:
        raise RefusalError(f"uv pip compile failed: {done.stderr.strip().splitlines()[-1:]}")
    return resolved


def probe_database(requirements: Path) -> None:
    """pip-audit asks PyPI's JSON API about each pin: refuse in one line when it cannot answer."""
    name, version = next(iter(locked_versions(requirements).items()))
    url = PYPI_JSON.format(name=name, version=version)
    try:
        with urllib.request.urlopen(url, timeout=15) as response:  # noqa: S310 - a fixed https URL
            answered = "vulnerabilities" in json.load(response)
    except (OSError, ValueError) as error:  # URLError and HTTPError are OSErrors
        reason = getattr(error, "reason", None) or error
        raise RefusalError(
            f"the vulnerability database (PyPI's JSON API) cannot be reached from here ({url}:"
            f" {reason}): the audit runs in CI"
        ) from error
    if not answered:
        raise RefusalError(f"PyPI's JSON API answered without vulnerability data ({url})")


def audit() -> int:
    accepted = accepted_vulnerabilities(ALLOWLIST, dt.datetime.now(dt.UTC).date())
    pip_audit = Path(sys.executable).parent / "pip-audit"
    if not pip_audit.is_file():
        raise RefusalError(f"{pip_audit} is missing: make install")
    with tempfile.TemporaryDirectory() as workdir:
        requirements = requirements_to_audit(Path(workdir))
        probe_database(requirements)
        if requirements != LOCK:
            notice = "no requirements.lock (make lock): auditing what pyproject.toml resolves to"
            print(f"{notice} today")  # noqa: T201 - a report for the terminal
        # --disable-pip: the lock is fully pinned and hashed, nothing to resolve or install.
        # --strict: a pin the database does not know fails the audit instead of passing it.
        command = [str(pip_audit), "--requirement", str(requirements), "--require-hashes",
                   "--disable-pip", "--strict", "--vulnerability-service", "pypi",
                   "--progress-spinner", "off", "--aliases", "on",
                   *(f"--ignore-vuln={vulnerability}" for vulnerability in accepted)]  # fmt: skip
        return subprocess.run(command, check=False).returncode  # noqa: S603 - our own argument list


# --- sbom ---------------------------------------------------------------------------------

# Run inside the image by its own Python: the OS, dpkg's installed packages, the venv's dists.
INSPECT = r"""
import importlib.metadata, json, platform
packages, paragraph = [], {}
for line in [*open("/var/lib/dpkg/status", encoding="utf-8").read().splitlines(), ""]:
    if not line:
        if paragraph.get("Status", "").endswith(" installed"):
            packages.append(paragraph)
        paragraph = {}
    elif not line[0].isspace() and ":" in line:
        key, _, value = line.partition(":")
        paragraph[key] = value.strip()
debian = [{"name": p["Package"], "version": p["Version"], "arch": p["Architecture"],
           "source": p.get("Source", p["Package"]).split()[0]} for p in packages]
python = [{"name": d.metadata["Name"], "version": d.version}
          for d in importlib.metadata.distributions()]
print(json.dumps({"os": platform.freedesktop_os_release(), "debian": debian, "python": python}))
"""
# The virtualenv's own installers, not dependencies of the service.
VENV_TOOLS = {"pip", "setuptools", "wheel"}


def engine_json(engine: str, *args: str) -> object:
    done = subprocess.run([engine, *args], capture_output=True, text=True, check=False)  # noqa: S603 - our own argument list
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RefusalError(f"{engine} {args[0]} {args[1]} failed: {last}")
    return json.loads(done.stdout)


def purl(kind: str, namespace: str, name: str, version: str, **qualifiers: str) -> str:
    """A package URL (github.com/package-url/purl-spec): percent-encoded name and version."""
    quote = urllib.parse.quote
    path = "/".join(part for part in (kind, namespace, quote(name, safe="")) if part)
    tail = "&".join(f"{key}={quote(value, safe='')}" for key, value in sorted(qualifiers.items()))
    return f"pkg:{path}@{quote(version, safe='')}" + (f"?{tail}" if tail else "")


def sbom(engine: str, image: str, output: Path, project: str) -> int:
    inspected = engine_json(engine, "image", "inspect", image)
    found = engine_json(
        engine, "run", "--rm", "--network=none", "--read-only", "--cap-drop=ALL",
        "--entrypoint", "python", image, "-c", INSPECT,
    )  # fmt: skip
    if not isinstance(inspected, list) or not isinstance(found, dict):
        raise RefusalError(f"{engine} answered in an unexpected shape about {image}")
    image_id = inspected[0]["Id"]
    locked = locked_versions(LOCK) if LOCK.is_file() else {}
    distro = f"{found['os']['ID']}-{found['os'].get('VERSION_ID', 'unstable')}"
    components = []
    for package in sorted(found["debian"], key=lambda p: p["name"]):
        ref = purl("deb", found["os"]["ID"], package["name"], package["version"],
                   arch=package["arch"], distro=distro)  # fmt: skip
        components.append({
            "type": "library", "bom-ref": ref, "name": package["name"],
            "version": package["version"], "purl": ref,
            "properties": [{"name": "debian:source", "value": package["source"]}],
        })  # fmt: skip
    stale = []
    for dist in sorted(found["python"], key=lambda d: normalize(d["name"])):
        name = normalize(dist["name"])
        if name in VENV_TOOLS:
            continue
        if name == normalize(project):  # the service itself: the SBOM's subject, below
            continue
        if locked and locked.get(name) != dist["version"]:
            stale.append(f"{name} {dist['version']} (lock: {locked.get(name, 'absent')})")
        ref = purl("pypi", "", name, dist["version"])
        components.append({
            "type": "library", "bom-ref": ref, "name": name, "version": dist["version"],
            "purl": ref,
        })  # fmt: skip
    if stale:
        raise RefusalError(
            f"{image} does not hold requirements.lock's versions (rebuild it): {stale}"
        )
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": f"urn:uuid:{uuid.uuid4()}",
        "version": 1,
        "metadata": {
            "timestamp": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
            "tools": {"components": [{"type": "application", "name": ".github/supply_chain.py"}]},
            "component": {
                "type": "container",
                "bom-ref": image,
                "name": image,
                "version": image_id,
                "description": f"{found['os'].get('PRETTY_NAME', distro)}; Python packages"
                + (" pinned by requirements.lock" if locked else " (no requirements.lock)"),
            },
        },
        "components": components,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(bom, indent=2) + "\n", encoding="utf-8")
    python = len(components) - len(found["debian"])
    summary = f"{len(found['debian'])} Debian and {python} Python packages (CycloneDX 1.6)"
    print(f"{output}: {summary}")  # noqa: T201 - a report for the terminal
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("audit", help="pip-audit of requirements.lock with the allow-list")
    bom = commands.add_parser("sbom", help="CycloneDX SBOM of a built image")
    bom.add_argument("--engine", default="docker", help="docker or podman")
    bom.add_argument("--image", required=True)
    bom.add_argument("--output", type=Path, default=ROOT / "build" / "sbom.cdx.json")
    bom.add_argument(
        "--project", default=tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    )
    arguments = parser.parse_args()
    try:
        if arguments.command == "audit":
            return audit()
        return sbom(arguments.engine, arguments.image, arguments.output, arguments.project)
    except RefusalError as refusal:
        print(f"error: {refusal}", file=sys.stderr)  # noqa: T201 - one line, no traceback
        return 2


if __name__ == "__main__":
    sys.exit(main())
