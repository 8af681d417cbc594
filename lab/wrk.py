"""Drive wrk (the HTTP load generator) and parse what it prints.

Depends on the `wrk` executable (Debian/Ubuntu: `apt-get install wrk`; macOS: `brew install
wrk`), found on PATH. wrk keeps its client connections alive (HTTP/1.1) for the whole run,
which is how browsers and service clients behave; it counts as errors the responses with a
status of 400 or more ("Non-2xx or 3xx responses") and the socket errors (connect, read,
write, timeout).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, TypedDict, Unpack

if TYPE_CHECKING:
    from pathlib import Path

INSTALL_HINT = (
    "wrk (the HTTP load generator) is not on PATH: install it with `sudo apt-get install wrk`"
    " (Debian/Ubuntu) or `brew install wrk` (macOS), then run the benchmark again"
)

_UNITS_TO_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
_LATENCY = re.compile(r"^\s*(50|99)%\s+([\d.]+)(us|ms|s|m|h)\s*$", re.MULTILINE)
_RPS = re.compile(r"^Requests/sec:\s+([\d.]+)\s*$", re.MULTILINE)
_TOTAL = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),", re.MULTILINE)
_SOCKET = re.compile(
    r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", re.MULTILINE
)
_NON2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)", re.MULTILINE)


class WrkError(RuntimeError):
    """wrk is missing, failed, or printed something this parser does not understand."""


@dataclass(frozen=True)
class WrkResult:
    """One wrk run, in the units the reports use."""

    requests_per_s: float
    p50_ms: float
    p99_ms: float
    requests: int
    duration_s: float
    non_2xx: int  # responses with status >= 400 (wrk counts 3xx as successes)
    socket_errors: int  # connect + read + write + timeout

    @property
    def errors(self) -> int:
        return self.non_2xx + self.socket_errors

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _to_ms(value: str, unit: str) -> float:
    return float(value) * _UNITS_TO_MS[unit]


def parse_wrk_output(text: str) -> WrkResult:
    """Parse the report of `wrk --latency`; raise WrkError when a required line is missing."""
    rps = _RPS.search(text)
    total = _TOTAL.search(text)
    latencies = {m.group(1): _to_ms(m.group(2), m.group(3)) for m in _LATENCY.finditer(text)}
    if rps is None or total is None or set(latencies) != {"50", "99"}:
        raise WrkError(f"unexpected wrk output (was --latency given?):\n{text}")
    socket = _SOCKET.search(text)
    non_2xx = _NON2XX.search(text)
    return WrkResult(
        requests_per_s=float(rps.group(1)),
        p50_ms=latencies["50"],
        p99_ms=latencies["99"],
        requests=int(total.group(1)),
        duration_s=_to_ms(total.group(2), total.group(3)) / 1000.0,
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        socket_errors=sum(int(n) for n in socket.groups()) if socket else 0,
    )


def find_wrk() -> str:
    """Return wrk's path, or raise WrkError naming the install command."""
    path = shutil.which("wrk")
    if path is None:
        raise WrkError(INSTALL_HINT)
    return path


class Shape(TypedDict, total=False):
    """What may vary between runs besides the URL, duration and connections."""

    threads: int  # wrk's threads [1]
    script: Path | None  # a Lua script that shapes the request (lab/items_create.lua: a POST)


def wrk_command(
    wrk: str, url: str, *, duration_s: float, connections: int, **shape: Unpack[Shape]
) -> list[str]:
    """The command line of one run: fixed duration, keep-alive connections, latency percentiles."""
    script = shape.get("script")
    return [
        wrk,
        f"--threads={shape.get('threads', 1)}",
        f"--connections={connections}",
        # wrk's time arguments take s, m or h: whole seconds, at least one.
        f"--duration={max(1, round(duration_s))}s",
        # A request slower than this counts as a timeout error instead of a latency sample.
        "--timeout=10s",
        "--latency",
        *([f"--script={script}"] if script is not None else []),
        url,
    ]


def run_wrk(
    wrk: str, url: str, *, duration_s: float, connections: int, **shape: Unpack[Shape]
) -> WrkResult:
    """Run wrk once against url and return its parsed report."""
    command = wrk_command(wrk, url, duration_s=duration_s, connections=connections, **shape)
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=duration_s + 30
    )
    if done.returncode != 0:
        raise WrkError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return parse_wrk_output(done.stdout)
