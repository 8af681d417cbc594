"""Body limits per route: the largest request body a route accepts, declared beside it in the
OpenAPI document, where clients see it; nginx enforces it with a ``location`` of that size
(docs/settings.md, Body limits per route; tests/unit/test_body_limits.py checks they agree)."""

from typing import Any

BODY_LIMIT_KEY = "x-max-body-bytes"


def max_body_bytes(limit: int) -> dict[str, Any]:
    """A route's ``openapi_extra`` declaring the largest body it accepts, in bytes."""
    return {BODY_LIMIT_KEY: limit}
