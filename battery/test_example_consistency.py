"""The example API answers the same from every worker: nothing lives in one process.

After one POST through the live stack (2 gunicorn workers), 60 GETs of that item in
parallel, each on its own connection, must all answer 200 with the same body. The first
version of this example kept items in a dict per worker: 35 x 200 and 25 x 404.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from .conftest import needs_the_example

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness.stack import RunningStack

pytestmark = [pytest.mark.live, needs_the_example()]

NEW = {"name": "lamp", "price_cents": 1999, "tags": ["home"]}


def fetch(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_sixty_parallel_gets_after_a_post_agree(start_stack: Callable[..., RunningStack]) -> None:
    """Every GET, whichever worker takes it, finds the item the POST created."""
    stack = start_stack(WEB_CONCURRENCY="2")
    status, body = fetch(f"{stack.base}/items", json.dumps(NEW).encode())
    assert status == 201
    created = json.loads(body)
    url = f"{stack.base}/items/{created['id']}"
    with ThreadPoolExecutor(max_workers=60) as pool:
        answers = list(pool.map(lambda _: fetch(url), range(60)))
    statuses = Counter(status for status, _ in answers)
    assert statuses == {200: 60}
    assert {json.loads(body) == created for _, body in answers} == {True}
