"""Supply-chain checks, the same for CI and for a person: `make audit` and `make sbom`.

audit: pip-audit of uv.lock's runtime set, hashed; .github/audit-allowlist.toml accepts a
       vulnerability with a reason and an expiry date (docs/container.md, Supply chain).
sbom:  a CycloneDX 1.6 SBOM of a built image: Debian and Python packages, checked against uv.lock.
Standard library only: `make sbom` runs on a CI runner without the project's virtualenv.
"""

import argparse
import datetime as dt
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "uv.lock"
EXPORTED = ROOT / "build" / "audit-requirements.txt"
ALLOWLIST = ROOT / ".github" / "audit-allowlist.toml"
# PYSEC-2024-1, GHSA-xxxx-xxxx-xxxx, CVE-2024-12345: the ids pip-audit reports and ignores.
VULN_ID = re.compile(r"(PYSEC-\d{4}-\d+|GHSA(-[23456789cfghjmpqrvwx]{4}){3}|CVE-\d{4}-\d{4,})")
# An acceptance is a decision to look again, not a permanent exception.
LONGEST_ACCEPTANCE = dt.timedelta(days=366)
# What pip-audit asks PyPI about each pin, here about pip-audit's own release.
PROBE = "https://pypi.org/pypi/pip-audit/{}/json"


class RefusalError(Exception):
    """What stops the check, in one line (never a traceback)."""


def normalize(name: str) -> str:
    """PEP 503: the form package indexes and purls compare names in."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions() -> dict[str, str]:
    """uv.lock's versions by normalized name, the project itself aside (stack/ included)."""
    if not LOCK.is_file():
        raise RefusalError(f"{LOCK.name} is missing: make lock writes it")
    packages = tomllib.loads(LOCK.read_text(encoding="utf-8")).get("package", [])
    project = ({"editable": "."}, {"virtual": "."})
    return {normalize(p["name"]): p["version"] for p in packages if p["source"] not in project}


def entry_problem(entry: dict[str, Any], today: dt.date) -> str | None:
    """What is wrong with one allow-list entry, if anything."""
    if set(entry) != {"id", "reason", "expires"}:
        return f"needs exactly id, reason and expires (has {sorted(entry)})"
    if not isinstance(entry["id"], str) or not VULN_ID.fullmatch(entry["id"]):
        return f"id {entry['id']!r} is not a PYSEC-, GHSA- or CVE- id"
    if not isinstance(entry["reason"], str) or len(entry["reason"].split()) < 3:
        return "the reason must say why, in words"
    expires = entry["expires"]
    # A TOML date (expires = 2026-06-30), not a string: tomllib then checks the calendar.
    if not isinstance(expires, dt.date) or isinstance(expires, dt.datetime):
        return "expires must be a date, e.g. 2026-06-30"
    if expires < today:
        return f"expired on {expires}: fix it, or renew it"
    return "expires more than a year ahead" if expires - today > LONGEST_ACCEPTANCE else None


def accepted_vulnerabilities(today: dt.date) -> list[str]:
    """The allow-list's ids, once every entry has a known id, a reason and a live expiry date."""
    try:
        entries = tomllib.loads(ALLOWLIST.read_text(encoding="utf-8")).get("accept", [])
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise RefusalError(f"{ALLOWLIST.name}: {error}") from error
    for number, entry in enumerate(entries, start=1):
        if problem := entry_problem(entry, today):
            raise RefusalError(f"{ALLOWLIST.name}, entry {number} ({entry.get('id')}): {problem}")
    return [entry["id"] for entry in entries]


def probe_database() -> None:
    """Stop in one line where pip-audit's vulnerability service cannot answer (no traceback)."""
    url = PROBE.format(importlib.metadata.version("pip-audit"))
    try:
        with urllib.request.urlopen(url, timeout=15) as response:  # noqa: S310 - https only
            if "vulnerabilities" in json.load(response):
                return
        reason: object = "an answer without vulnerability data"
    except (OSError, ValueError) as error:  # URLError and HTTPError are OSErrors
        reason = getattr(error, "reason", None) or error
    raise RefusalError(
        f"the vulnerability database (PyPI's JSON API) cannot be reached from here ({url}:"
        f" {reason}): the audit runs in CI"
    )


def audit() -> int:
    accepted = accepted_vulnerabilities(dt.datetime.now(dt.UTC).date())
    pip_audit, uv = Path(sys.executable).parent / "pip-audit", Path(sys.executable).parent / "uv"
    if not pip_audit.is_file() or not uv.is_file():
        raise RefusalError(f"{pip_audit} or {uv} is missing: make install")
    probe_database()
    locked_versions()  # a missing lock: one line, before uv's own words
    # The serving stack is this repository's own code (stack/), in no vulnerability database.
    export = [
        "export",
        "--frozen",
        "--no-dev",
        "--no-emit-project",
        "--no-emit-package",
        "serving-stack",
        "--quiet",
        "--output-file",
        str(EXPORTED),
    ]
    if subprocess.run([str(uv), *export], check=False, cwd=ROOT).returncode != 0:  # noqa: S603 - our own argument list
        raise RefusalError("uv export failed (above): uv.lock's runtime set could not be read")
    # --disable-pip: the export is fully pinned and hashed, nothing to resolve or install.
    audited = ["--requirement", str(EXPORTED), "--require-hashes", "--disable-pip"]
    # --strict: a pin the database does not know fails the audit instead of passing it.
    command = [
        str(pip_audit),
        *audited,
        "--strict",
        "--vulnerability-service",
        "pypi",
        "--progress-spinner",
        "off",
        "--aliases",
        "on",
        *(f"--ignore-vuln={vulnerability}" for vulnerability in accepted),
    ]
    return subprocess.run(command, check=False).returncode  # noqa: S603 - our own argument list


# Run in the image: the OS, dpkg's installed packages, the venv's dists.
INSPECT = r"""
import importlib.metadata, json, platform, subprocess
dpkg = subprocess.run(["dpkg-query", "--show", "--showformat=${db:Status-Status} ${Package}"
    " ${Version} ${Architecture} ${source:Package}\n"], capture_output=True, text=True, check=True)
installed = [line.split()[1:] for line in dpkg.stdout.splitlines() if line.startswith("installed ")]
python = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()}
print(json.dumps({"os": platform.freedesktop_os_release(), "debian": installed, "python": python}))
"""
# The virtualenv's own installers, not dependencies of the service.
VENV_TOOLS = {"pip", "setuptools", "wheel"}


def engine_json(engine: str, *args: str) -> Any:
    done = subprocess.run([engine, *args], capture_output=True, text=True, check=False)  # noqa: S603 - our own argument list
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RefusalError(f"{engine} {args[0]} {args[1]} failed: {last}")
    return json.loads(done.stdout)


def component(kind: str, name: str, version: str, qualifiers: str = "") -> dict[str, Any]:
    """A library with its package URL (github.com/package-url/purl-spec), percent-encoded."""
    ref = f"pkg:{kind}/{quote(name, safe='')}@{quote(version, safe='')}{qualifiers}"
    return {"type": "library", "bom-ref": ref, "name": name, "version": version, "purl": ref}


def sbom(engine: str, image: str, output: Path) -> int:
    image_id = engine_json(engine, "image", "inspect", image)[0]["Id"]
    found = engine_json(
        engine,
        "run",
        "--rm",
        "--network=none",
        "--read-only",
        "--cap-drop=ALL",
        "--entrypoint",
        "python",
        image,
        "-c",
        INSPECT,
    )
    os_id = found["os"]["ID"]
    distro = f"{os_id}-{found['os'].get('VERSION_ID', 'unstable')}"
    components = []
    for name, version, arch, source in sorted(found["debian"]):
        components.append(component(f"deb/{os_id}", name, version, f"?arch={arch}&distro={distro}"))
        components[-1]["properties"] = [{"name": "debian:source", "value": source}]
    locked = locked_versions()
    # The service itself is the SBOM's subject (below), not one of its components.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    skipped = {*VENV_TOOLS, normalize(project)}
    python = {normalize(name): version for name, version in found["python"].items()}
    python = {name: version for name, version in sorted(python.items()) if name not in skipped}
    stale = [
        f"{name} {version} (lock: {locked.get(name, 'absent')})"
        for name, version in python.items()
        if locked.get(name) != version
    ]
    if stale:
        raise RefusalError(f"{image} does not hold uv.lock's versions (rebuild): {stale}")
    components += [component("pypi", name, version) for name, version in python.items()]
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "serialNumber": f"urn:uuid:{uuid.uuid4()}",
        "metadata": {
            "timestamp": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
            "tools": {"components": [{"type": "application", "name": ".github/supply_chain.py"}]},
            "component": {
                "type": "container",
                "bom-ref": image,
                "name": image,
                "version": image_id,
                "description": f"{found['os'].get('PRETTY_NAME', distro)}; Python packages"
                " pinned by uv.lock",
            },
        },
        "components": components,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(bom, indent=2) + "\n", encoding="utf-8")
    summary = f"{len(found['debian'])} Debian and {len(python)} Python packages (CycloneDX 1.6)"
    print(f"{output}: {summary}")  # noqa: T201 - a report for the terminal
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("audit", help="pip-audit of uv.lock's runtime set with the allow-list")
    bom = commands.add_parser("sbom", help="CycloneDX SBOM of a built image")
    bom.add_argument("--engine", default="docker", help="docker or podman")
    bom.add_argument("--image", required=True)
    bom.add_argument("--output", type=Path, default=ROOT / "build" / "sbom.cdx.json")
    arguments = parser.parse_args()
    try:
        if arguments.command == "audit":
            return audit()
        return sbom(arguments.engine, arguments.image, arguments.output)
    except RefusalError as refusal:
        print(f"error: {refusal}", file=sys.stderr)  # noqa: T201 - one line, no traceback
        return 2


if __name__ == "__main__":
    sys.exit(main())
