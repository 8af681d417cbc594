"""Per-client limits at nginx, through the live stack: the rate (429), requests in flight
(503), dry run and off; what they cost the metrics; the route body limit against the worst
body for POST /items.

Class 4 of docs/security.md. Each stack lists 127.0.0.1 in TRUSTED_PROXIES, so a test plays
several clients from one machine by sending X-Forwarded-For (the address nginx limits is the
real client's, as behind a load balancer). The limits are lowered to reach them in a few
requests; the battery's other stacks turn them off (conftest.py's Stacks).
"""

from __future__ import annotations

import json
import re
import signal
import threading
from typing import TYPE_CHECKING

import pytest

from harness.clients import get, request
from harness.ports import wait_for
from lab.side_faults import worst_items_body

from .conftest import app_access, lines_of, needs_the_example, nginx_access, parse_json

if TYPE_CHECKING:
    from harness.stack import RunningStack

    from .conftest import Stacks

pytestmark = pytest.mark.live

TRUSTED = {"TRUSTED_PROXIES": "127.0.0.1/32"}
# Any route of the app that is not a probe: the probes are never rate limited.
ROUTE = "/fault/pid"


def as_client(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


def limited_count(stack: RunningStack, zone: str, *, dry_run: bool) -> float:
    """nginx_limited_requests_total for a zone, from the metrics port (0 when not there)."""
    _, _, body = get(stack.metrics_port, "/metrics")
    wanted = {f'zone="{zone}"', f'dry_run="{str(dry_run).lower()}"'}
    for line in body.decode().splitlines():
        if line.startswith("nginx_limited_requests_total{"):
            labels, _, value = line.partition("} ")
            if wanted <= set(labels.removeprefix("nginx_limited_requests_total{").split(",")):
                return float(value)
    return 0.0


def refusal_lines_of(stack: RunningStack, logger: str, text: str) -> list[dict[str, object]]:
    return [line for line in lines_of(stack, logger) if text in str(line["message"])]


def refusal_lines(stack: RunningStack, text: str) -> list[dict[str, object]]:
    return refusal_lines_of(stack, "nginx.error", text)


def test_a_client_over_its_rate_gets_a_json_429_while_another_is_served(stacks: Stacks) -> None:
    """RATE_LIMIT=1, burst 2, no wait: client A's 4th quick request on is a JSON 429 with
    Retry-After and the request id, never reaching the app; client B and A's probes are
    served; the metrics count every 429 (nginx's answers never reach the app's counters)."""
    stack = stacks.start(
        RATE_LIMIT="1", RATE_LIMIT_BURST="2", RATE_LIMIT_QUEUE_SECONDS="0", **TRUSTED
    )

    first = [get(stack.port, ROUTE, as_client("192.0.2.1")) for _ in range(8)]
    other = get(stack.port, ROUTE, as_client("192.0.2.2"))
    probes = [get(stack.port, "/livez", as_client("192.0.2.1"))[0] for _ in range(10)]

    refused = [answer for answer in first if answer[0] == 429]
    assert [status for status, _, _ in first[:3]] == [200] * 3
    assert len(refused) >= 3, [status for status, _, _ in first]
    for _, headers, body in refused:
        assert headers["content-type"] == "application/json"
        assert headers["retry-after"] == "1"
        assert parse_json(body) == {
            "detail": "Too Many Requests",
            "request_id": headers["x-request-id"],
        }
    assert other[0] == 200
    assert probes == [200] * 10
    reached = {line.get("request_id") for line in app_access(stack)}
    assert not reached & {headers["x-request-id"] for _, headers, _ in refused}
    wait_for(
        lambda: limited_count(stack, "client_rate", dry_run=False) == len(refused),
        30,
        f"nginx_limited_requests_total to count {len(refused)} refusals",
    )
    (line, *_) = refusal_lines(stack, "limiting requests")
    assert (line["level"], line["client"]) == ("warning", "192.0.2.1"), line
    refused_ids = {headers["x-request-id"] for _, headers, _ in refused}

    def logged() -> list[dict[str, object]]:
        return [line for line in nginx_access(stack) if line["request_id"] in refused_ids]

    # Logged as what the client asked, not as nginx's error page (GET /.nginx-error).
    wait_for(lambda: len(logged()) == len(refused), 30, "the 429s' access lines")
    assert {(line["method"], line["path"], line["client"]) for line in logged()} == {
        ("GET", ROUTE, "192.0.2.1")
    }
    # delay= equal to burst= is nodelay: the first three waited for nothing (nginx's own
    # request_time; at 1 r/s a delayed one would have waited a second).
    served = {headers["x-request-id"] for _, headers, _ in first[:3]}
    times = [line["request_time"] for line in nginx_access(stack) if line["request_id"] in served]
    assert len(times) == 3, times
    assert all(float(str(seconds)) < 1 for seconds in times), times


# One /64 whose 8 bytes are all 0x0a, a newline to a regex without (?s), in every address.
SUBSCRIBER = "2001:db8:a0a:a0a"


def test_ipv6_addresses_inside_one_64_are_one_client(stacks: Stacks) -> None:
    """Addresses rotated inside one IPv6 /64 (CLIENT_IPV6_PREFIX, 64 unset) share one rate:
    past the burst they get 429s; a client in the next /64 is served (issue 50: each /128 had
    its own limit before, 1,000 requests in 0.1 s)."""
    stack = stacks.start(
        RATE_LIMIT="1", RATE_LIMIT_BURST="2", RATE_LIMIT_QUEUE_SECONDS="0", **TRUSTED
    )
    rotated = [f"{SUBSCRIBER}:{n:x}:a0a:{n * 7919:x}:a" for n in range(1, 9)]
    statuses = [get(stack.port, ROUTE, as_client(address))[0] for address in rotated]
    neighbour = get(stack.port, ROUTE, as_client("2001:db8:a0a:a0b::a"))[0]
    assert statuses[:3] == [200] * 3, statuses
    assert statuses.count(429) >= 3, statuses
    assert neighbour == 200
    # nginx's error line reaches the log through the relay, a moment after the 429.
    wait_for(lambda: bool(refusal_lines(stack, "limiting requests")), 30, "the 429's error line")
    (line, *_) = refusal_lines(stack, "limiting requests")
    assert str(line["client"]).startswith(SUBSCRIBER), line


def test_a_prefix_of_128_keeps_each_ipv6_address_apart(stacks: Stacks) -> None:
    """CLIENT_IPV6_PREFIX=128: every IPv6 address is a client of its own, as IPv4's are."""
    stack = stacks.start(
        RATE_LIMIT="1",
        RATE_LIMIT_BURST="2",
        RATE_LIMIT_QUEUE_SECONDS="0",
        CLIENT_IPV6_PREFIX="128",
        **TRUSTED,
    )
    rotated = [f"{SUBSCRIBER}::{n:x}" for n in range(1, 9)]
    statuses = [get(stack.port, ROUTE, as_client(address))[0] for address in rotated]
    assert statuses == [200] * 8


def test_past_its_burst_a_client_waits_its_turn_before_a_429(stacks: Stacks) -> None:
    """RATE_LIMIT=1, burst 1, a 3 s wait: of 9 requests sent at once, 2 are answered at once
    and 3 wait their turn (one a second) before the rest get 429; with no wait only 2 would
    be served. A flooding client is slowed to its rate instead of fed refusals."""
    stack = stacks.start(
        RATE_LIMIT="1", RATE_LIMIT_BURST="1", RATE_LIMIT_QUEUE_SECONDS="3", **TRUSTED
    )
    statuses: list[int] = []

    def send() -> None:
        statuses.append(get(stack.port, ROUTE, as_client("192.0.2.1"), 30)[0])

    senders = [threading.Thread(target=send) for _ in range(9)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join(timeout=60)

    served, refused = statuses.count(200), statuses.count(429)
    assert (served + refused, len(statuses)) == (9, 9), statuses
    assert served >= 5, statuses  # 1 + burst 1 + 3 waiting (more if the rate refilled)
    assert refused >= 1, statuses  # the wait is bounded: RATE_LIMIT x 3 s
    wait_for(
        lambda: limited_count(stack, "client_rate", dry_run=False) == refused,
        30,
        f"nginx_limited_requests_total to count {refused} refusals",
    )


def test_bodies_over_the_limit_wait_their_turn_then_get_429(stacks: Stacks) -> None:
    """A body over the limit costs nginx a read to answer its 413, so one address gets 5 413s
    at once, then one a second while 28 more wait, and a JSON 429 past them (counted, zone
    oversized); another address's 413 is answered at once meanwhile. Any RATE_LIMIT."""
    stack = stacks.start(RATE_LIMIT="100", **TRUSTED)
    answers: list[int] = []
    bodies: dict[int, bytes] = {}

    def send(client: str) -> int:
        # A length over the 1 MiB limit, and no body: nginx answers from the header alone.
        too_long = {**as_client(client), "Content-Length": str(2 << 20)}
        status, _, body = request(stack.port, "POST", "/edge", b"", headers=too_long, timeout=5)
        bodies[status] = body
        return status

    def attack() -> None:
        answers.append(send("192.0.2.1"))

    senders = [threading.Thread(target=attack) for _ in range(40)]
    for thread in senders:
        thread.start()
    wait_for(lambda: answers.count(429) >= 1, 30, "a 429 past the oversized queue")
    other = send("192.0.2.2")
    for thread in senders:
        thread.join(timeout=60)

    assert other == 413
    assert parse_json(bodies[429])["detail"] == "Too Many Requests"  # JSON, as every refusal
    # 5 at once and a few more at one a second within the senders' 5 s; 7 past the 33 admitted
    # (fewer when the rate refilled while the 40 were sent); the rest still waiting (0).
    assert 5 <= answers.count(413) <= 12, answers
    assert 1 <= answers.count(429) <= 7, answers
    assert answers.count(0) == 40 - answers.count(413) - answers.count(429), answers
    wait_for(
        lambda: limited_count(stack, "oversized", dry_run=False) == answers.count(429),
        30,
        "nginx_limited_requests_total to count the oversized 429s",
    )


def test_dry_run_refuses_nothing_and_counts(stacks: Stacks) -> None:
    """RATE_LIMIT_DRY_RUN=on: every request is served; nginx logs and the metrics count the
    ones the limit would have refused."""
    stack = stacks.start(
        RATE_LIMIT="1",
        RATE_LIMIT_BURST="1",
        RATE_LIMIT_QUEUE_SECONDS="0",
        RATE_LIMIT_DRY_RUN="on",
        **TRUSTED,
    )

    statuses = [get(stack.port, ROUTE, as_client("192.0.2.1"))[0] for _ in range(6)]

    assert statuses == [200] * 6
    wait_for(
        lambda: limited_count(stack, "client_rate", dry_run=True) >= 3,
        30,
        "the dry run's count",
    )
    assert refusal_lines(stack, "limiting requests, dry run")
    assert limited_count(stack, "client_rate", dry_run=False) == 0


def test_off_means_off(stacks: Stacks) -> None:
    """RATE_LIMIT=0 and CONNECTIONS_PER_CLIENT=0: both switches 0 in the rendered config (the
    limits' keys empty, so nothing is counted), and a burst of 60 requests from one client is
    all served. NGINX_ACCESS_LOG=off (the access log's if=0): nginx logs none of them, its
    buffer flushed by the graceful stop."""
    stack = stacks.start(
        RATE_LIMIT="0", CONNECTIONS_PER_CLIENT="0", NGINX_ACCESS_LOG="off", **TRUSTED
    )

    statuses = [get(stack.port, ROUTE, as_client("192.0.2.1"))[0] for _ in range(60)]
    stack.process.send_signal(signal.SIGTERM)

    assert stack.wait_exit(60) == 0, stack.log_text()[-3000:]
    assert statuses == [200] * 60
    assert nginx_access(stack) == []
    assert len(app_access(stack)) >= 60, "the app's own access lines are still written"
    rendered = (stack.run_dir / "nginx.conf").read_text(encoding="utf-8")
    assert re.search(r"^\s*map 0 \$client_rate_key ", rendered, re.MULTILINE)
    assert re.search(r"^\s*map 0 \$client_connections_key ", rendered, re.MULTILINE)
    assert refusal_lines(stack, "limiting") == []


def test_a_client_over_its_requests_in_flight_gets_a_json_503(stacks: Stacks) -> None:
    """CONNECTIONS_PER_CLIENT=2: client A's third request in flight is a JSON 503 with
    Retry-After at once; client B and A's probe are served meanwhile; the metrics count it."""
    stack = stacks.start(CONNECTIONS_PER_CLIENT="2", **TRUSTED)
    held: list[int] = []

    def hold() -> None:
        held.append(get(stack.port, "/fault/sleep?seconds=2", as_client("192.0.2.1"), 30)[0])

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for thread in holders:
        thread.start()
    wait_for(
        lambda: len(refusal_lines_of(stack, "fault_app", "fault handler started")) >= 2,
        30,
        "two requests in flight",
    )
    third = get(stack.port, ROUTE, as_client("192.0.2.1"))
    other = get(stack.port, ROUTE, as_client("192.0.2.2"))
    probe = get(stack.port, "/readyz", as_client("192.0.2.1"))
    for thread in holders:
        thread.join(timeout=30)

    assert third[0] == 503, third
    assert third[1]["retry-after"] == "1"
    assert parse_json(third[2])["request_id"] == third[1]["x-request-id"]
    assert (other[0], probe[0]) == (200, 200)  # the probes are never limited per client
    assert held == [200, 200]
    wait_for(
        lambda: limited_count(stack, "client_requests", dry_run=False) == 1,
        30,
        "the per-client refusal's count",
    )


@needs_the_example()
def test_the_worst_items_body_is_refused_by_nginx(shared_stack: RunningStack) -> None:
    """POST /items declares 8 KiB: the worst 1 MiB body (~117,000 unknown keys, 0.5 s of a
    worker's CPU to validate) is nginx's 413 and never reaches the app; the worst body
    under 8 KiB is the app's 422."""
    json_type = {"Content-Type": "application/json"}
    big, small = worst_items_body(1024 * 1024 - 1), worst_items_body(8 * 1024)

    refused = request(shared_stack.port, "POST", "/items", big, headers=json_type, timeout=30)
    served = request(shared_stack.port, "POST", "/items", small, headers=json_type, timeout=30)

    assert len(json.loads(big)) > 100_000
    assert refused[0] == 413, refused[2][:200]
    reached = {line.get("request_id") for line in app_access(shared_stack)}
    assert refused[1]["x-request-id"] not in reached
    assert served[0] == 422, served[2][:200]
