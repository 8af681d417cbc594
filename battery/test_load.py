"""Load: many keep-alive connections through the full stack for a few seconds, no errors.

Drives wrk (Debian/Ubuntu: apt-get install wrk; skipped, saying so, where it is missing)
against the service's own app. Prints throughput and latency for the record; asserts only
correctness (no error of any kind), never a time: this machine's speed is not the app's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from .conftest import REAL_APP, SYSTEM_PATH, server_errors

if TYPE_CHECKING:
    from .conftest import Stacks

pytestmark = pytest.mark.live

CONNECTIONS = 32
SECONDS = 5


def test_keepalive_load_has_no_errors(stacks: Stacks, capsys: pytest.CaptureFixture[str]) -> None:
    """32 keep-alive connections for 5 s: every request answered 2xx, nginx saw no 5xx."""
    wrk = shutil.which("wrk", path=SYSTEM_PATH)
    if wrk is None:
        pytest.skip("wrk is not installed (sudo apt-get install -y wrk)")
    stack = stacks.start(REAL_APP)

    command = [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{SECONDS}s", "--latency", f"{stack.base}/livez"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)

    with capsys.disabled():
        print(f"\nload: {result.stdout}")
    requests = re.search(r"(\d+) requests in", result.stdout)
    assert requests is not None, result.stdout
    assert int(requests[1]) > 0
    # Socket errors (connect, read, write, timeout) and non-2xx answers: wrk prints both only
    # when there are any.
    assert "Socket errors" not in result.stdout, result.stdout
    assert "Non-2xx" not in result.stdout, result.stdout
    # wrk stops mid-request when its time is up: those requests are nginx's 499, not errors.
    assert [line for line in server_errors(stack) if line.get("status") != 499] == []
