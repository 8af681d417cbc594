"""Last of the live tests (pytest runs tests/live/'s modules in name order): it stops the
stack conftest.py started for them all, and checks the stop. Needs nginx, as the others."""

import json
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import LiveStack, get, wait_for

pytestmark = pytest.mark.live


def test_sigterm_lets_requests_in_flight_finish_then_exits_0(stack: LiveStack) -> None:
    """SIGTERM with requests in flight: each answers 200, the runner exits 0, every line is JSON."""

    def started() -> int:
        return sum(line.get("message") == "slow request started" for line in stack.log_lines())

    before = started()
    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = [pool.submit(get, stack.port, "/slow?seconds=1") for _ in range(4)]
        wait_for(lambda: started() >= before + 4, 20, "the requests to reach the app")
        stack.process.send_signal(signal.SIGTERM)
        statuses = [reply.result(timeout=30)[0] for reply in replies]

    assert statuses == [200] * 4
    assert stack.process.wait(timeout=30) == 0
    for raw in stack.log_path.read_bytes().splitlines():
        assert list(json.loads(raw))[:4] == ["time", "level", "logger", "message"], raw
