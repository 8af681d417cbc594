"""The pure parts of lab/side_faults.py: the worst POST /items body, counting a route's
requests in an exposition, the answers besides the app's. The live run is not repeated here."""

from __future__ import annotations

import json

from lab.side_faults import counted, key, others, worst_items_body


def test_keys_are_unique_and_shortest_first() -> None:
    """62 one-character keys, then two-character ones: the most keys per byte, none repeated."""
    keys = [key(number) for number in range(62 + 62 * 62 + 1)]
    assert len(set(keys)) == len(keys)
    assert [len(k) for k in (keys[0], keys[61], keys[62], keys[62 + 62 * 62])] == [1, 1, 2, 3]


def test_the_worst_body_fills_its_size_with_unknown_empty_lists() -> None:
    """The body is JSON of size at most the limit, within one more key of it, all values []."""
    body = worst_items_body(8 * 1024)
    parsed = json.loads(body)
    assert 8 * 1024 - len('"zz":[],') < len(body) <= 8 * 1024
    assert set(map(len, parsed.values())) == {0}
    assert len(parsed) > 1000


def test_counted_sums_a_routes_samples_over_methods_and_statuses() -> None:
    """Only the _count samples of the route add up; its buckets and other routes do not."""
    name = "http_server_request_duration_seconds"
    items = 'method="GET",route="/items/{item_id}"'
    exposition = "\n".join(
        [
            f"# TYPE {name} histogram",
            f'{name}_count{{{items},status="404"}} 248.0',
            f'{name}_count{{{items},status="200"}} 2.0',
            f'{name}_bucket{{le="+Inf",{items},status="404"}} 248.0',
            f'{name}_count{{method="GET",route="/livez",status="200"}} 9.0',
        ]
    )
    assert counted(exposition, "/items/{item_id}") == 250


def test_others_lists_the_answers_that_were_not_the_apps_404() -> None:
    """Other statuses are named with their numbers, a closed connection as no answer; with
    none, nothing is added."""
    assert others([404, 502, 404, 502, 0]) == " (besides: no answer x 1, 502 x 2)"
    assert others([404, 404]) == ""
