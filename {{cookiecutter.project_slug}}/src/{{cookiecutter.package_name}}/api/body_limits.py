"""Body limits per route: the largest request body a route accepts, declared beside it.

nginx enforces the limit before the app reads a byte (a JSON 413): a route that declares one
has a ``location`` in deploy/nginx.conf with the same ``client_max_body_size``, and
tests/unit/test_body_limits.py fails while the two differ. Why at nginx: pydantic reads a
whole body before it can refuse it, and a 1 MiB body of many small unknown keys costs a
worker over half a second of CPU (docs/security.md). Routes that declare nothing take
nginx's default, 1 MiB. The limit is declared in the OpenAPI document (``x-max-body-bytes``),
where clients see it and the test reads it. Depends on nothing.
"""

from __future__ import annotations

from typing import Any

# An OpenAPI extension field of the operation: clients see the limit in the schema.
BODY_LIMIT_KEY = "x-max-body-bytes"


def max_body_bytes(limit: int) -> dict[str, Any]:
    """A route's ``openapi_extra`` declaring the largest body it accepts, in bytes."""
    return {BODY_LIMIT_KEY: limit}


def declared_limits(openapi: dict[str, Any]) -> dict[str, int]:
    """Each path of an OpenAPI document with a declared limit (the largest of its methods')."""
    limits: dict[str, int] = {}
    for path, operations in openapi.get("paths", {}).items():
        for operation in operations.values():
            if isinstance(operation, dict) and BODY_LIMIT_KEY in operation:
                limits[path] = max(limits.get(path, 0), int(operation[BODY_LIMIT_KEY]))
    return limits
