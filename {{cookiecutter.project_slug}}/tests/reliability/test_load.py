"""Load: many keep-alive connections through the full stack for a few seconds, no errors.

Drives wrk (Debian/Ubuntu: apt-get install wrk; skipped, saying so, where it is missing)
through bench/wrk.py, against the real app. Prints throughput and p50/p99 latency for the
record; asserts only correctness (no error of any kind), never a time: this machine's
speed is not the app's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from bench.wrk import WrkError, find_wrk, run_wrk

from .conftest import REAL_APP, server_errors

if TYPE_CHECKING:
    from .conftest import Stacks

pytestmark = [pytest.mark.live, pytest.mark.reliability]

CONNECTIONS = 32
SECONDS = 5.0


def test_keepalive_load_has_no_errors(stacks: Stacks, capsys: pytest.CaptureFixture[str]) -> None:
    """32 keep-alive connections for 5 s: every request answered 2xx, nginx saw no 5xx."""
    try:
        wrk = find_wrk()
    except WrkError as error:
        pytest.skip(str(error))
    stack = stacks.start(REAL_APP)

    result = run_wrk(wrk, f"{stack.base}/", duration_s=SECONDS, connections=CONNECTIONS)

    with capsys.disabled():
        print(  # noqa: T201 - the figures are the point: shown even when pytest captures
            f"\nload: {CONNECTIONS} keep-alive connections, {result.duration_s:.1f} s:"
            f" {result.requests} requests, {result.requests_per_s:.0f} req/s,"
            f" p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms, errors {result.errors}"
        )
    assert result.requests > 0
    assert result.errors == 0, result
    # wrk stops mid-request when its time is up: those requests are nginx's 499, not errors.
    assert [line for line in server_errors(stack) if line.get("status") != 499] == []
