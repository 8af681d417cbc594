"""Overload: one JSON 503 with Retry-After, from nginx alone; /livez keeps answering.

Class 4 of docs/security.md. nginx caps the requests in flight to the app (limit_conn in
serving_stack/nginx.conf); past the cap it answers a JSON 503 with Retry-After and the request id at
once, below uvicorn's own cap (a plain-text 503) and gunicorn's backlog (a 502 when full).
The probes (/livez, /readyz) are not counted: a busy pod is neither restarted nor taken out
of rotation (its load would saturate the others). The cap is lowered to 3 here to reach it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from harness.clients import get

from .conftest import parse_json, wait_for_line

if TYPE_CHECKING:
    from .conftest import Stacks

pytestmark = pytest.mark.live

CAP = 3
CLIENTS = 8


def test_past_the_cap_clients_get_a_json_503_and_livez_answers(stacks: Stacks) -> None:
    """8 slow requests against a cap of 3: 3 x 200, 5 x JSON 503 with Retry-After; probes 200."""
    stack = stacks.start(nginx_directives={"limit_conn app_requests": str(CAP)})
    answers: list[tuple[int, dict[str, str], bytes]] = []
    lock = threading.Lock()

    def slow() -> None:
        answer = get(stack.port, "/fault/sleep?seconds=4", timeout=30)
        with lock:
            answers.append(answer)

    holders = [threading.Thread(target=slow) for _ in range(CAP)]
    for thread in holders:
        thread.start()
    wait_for_line(
        stack, lambda line: line.get("message") == "fault handler started", "the cap held", CAP
    )
    rejected = [threading.Thread(target=slow) for _ in range(CLIENTS - CAP)]
    for thread in rejected:
        thread.start()
    # While the cap is full: both probes answer, the pod stays in rotation.
    livez = [get(stack.port, "/livez")[0] for _ in range(5)]
    readyz_status = get(stack.port, "/readyz")[0]
    for thread in holders + rejected:
        thread.join(30)

    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [200] * CAP + [503] * (CLIENTS - CAP)
    for status, headers, body in answers:
        if status == 503:
            assert headers["retry-after"] == "1"
            assert headers["content-type"] == "application/json"
            assert parse_json(body) == {
                "detail": "Service Unavailable",
                "request_id": headers["x-request-id"],
            }
    assert livez == [200] * 5
    assert readyz_status == 200


def test_an_apps_own_503_keeps_its_body_and_retry_after(stacks: Stacks) -> None:
    """An app's own 503 (a failing readiness check, say) passes through nginx unchanged."""
    stack = stacks.start(nginx_directives={"limit_conn app_requests": str(CAP)})
    status, headers, body = get(stack.port, "/fault/unready")
    assert status == 503
    assert parse_json(body) == {"detail": "not ready on purpose"}
    assert headers["retry-after"] == "7"
