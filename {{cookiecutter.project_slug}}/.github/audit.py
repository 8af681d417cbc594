"""`make audit`, the same for CI and for a person: pip-audit of uv.lock's runtime set, hashed.

.github/audit-allowlist.toml accepts a vulnerability with a reason and an expiry date
(docs/container.md, Supply chain). Any other failure is one line, never a traceback.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
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
    # uv.lock's runtime set, as the image installs it, but the serving stack: this repository's
    # own code (stack/), in no vulnerability database.
    runtime = ["--frozen", "--no-dev", "--no-emit-project", "--no-emit-package", "serving-stack"]
    export = [str(uv), "export", *runtime, "--quiet", "--output-file", str(EXPORTED)]
    if subprocess.run(export, check=False, cwd=ROOT).returncode != 0:  # noqa: S603 - our own argument list
        raise RefusalError("uv export failed (above): uv.lock's runtime set could not be read")
    # --disable-pip: the export is fully pinned and hashed, nothing to resolve or install.
    audited = ["--requirement", str(EXPORTED), "--require-hashes", "--disable-pip"]
    # --strict: a pin the database does not know fails the audit instead of passing it.
    verdict = ["--strict", "--vulnerability-service", "pypi", "--aliases", "on"]
    ignored = [f"--ignore-vuln={vulnerability}" for vulnerability in accepted]
    command = [str(pip_audit), *audited, *verdict, "--progress-spinner", "off", *ignored]
    return subprocess.run(command, check=False).returncode  # noqa: S603 - our own argument list


def main() -> int:
    # No options: --help says what runs, anything else is refused before the audit.
    argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None).parse_args()
    try:
        return audit()
    except RefusalError as refusal:
        print(f"error: {refusal}", file=sys.stderr)  # noqa: T201 - one line, no traceback
        return 2


if __name__ == "__main__":
    sys.exit(main())
