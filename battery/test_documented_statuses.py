"""The statuses the OpenAPI document promises are the ones the live stack answers.

The probes are derived from the service's own OpenAPI document, never a hand-kept table:
an endpoint added the documented way is probed as it is. For each operation: a request with
plausible parameters, one with a path parameter of the wrong kind, and (for a JSON body) a
body that is not JSON and an empty object. Every answer must be JSON with a status the
operation documents; a body that is not JSON must be 400, documented (errors.py).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from harness.clients import request

from .conftest import service_openapi

if TYPE_CHECKING:
    from harness.stack import RunningStack

pytestmark = pytest.mark.live

JSON = {"Content-Type": "application/json"}


def plausible(schema: dict[str, Any]) -> str:
    """A value of a parameter's schema (its example, first enum value, or a minimal one)."""
    if "example" in schema:
        return str(schema["example"])
    if schema.get("enum"):
        return str(schema["enum"][0])
    kind = schema.get("type")
    if kind in {"integer", "number"}:
        return str(schema.get("minimum", 1))
    if kind == "boolean":
        return "true"
    return "a" * max(1, int(schema.get("minLength", 1)))


def operations() -> list[Any]:
    """One test case per operation of the service's OpenAPI document."""
    return [
        pytest.param(path, method, operation, id=f"{method.upper()} {path}")
        for path, methods in service_openapi()["paths"].items()
        for method, operation in methods.items()
    ]


def probes(path: str, operation: dict[str, Any]) -> list[tuple[str, bytes | None]]:
    """The requests (target, JSON body or None) one operation is probed with."""
    parameters = operation.get("parameters", [])
    in_path = {p["name"]: p.get("schema", {}) for p in parameters if p["in"] == "path"}
    query = "&".join(
        f"{p['name']}={plausible(p.get('schema', {}))}"
        for p in parameters
        if p["in"] == "query" and p.get("required")
    )
    target = re.sub(r"\{(\w+)\}", lambda m: plausible(in_path[m[1]]), path)
    target += f"?{query}" if query else ""
    wrong_kind = re.sub(r"\{(\w+)\}", "%21%21", path)
    has_body = "application/json" in operation.get("requestBody", {}).get("content", {})
    targets = [(target, b"{}" if has_body else None)]
    if in_path:
        targets.append((wrong_kind, b"{}" if has_body else None))
    if has_body:
        targets.append((target, b'{"name":'))
    return targets


@pytest.mark.parametrize(("path", "method", "operation"), operations())
def test_live_statuses_are_the_documented_ones(
    real_stack: RunningStack, path: str, method: str, operation: dict[str, Any]
) -> None:
    """Each probe of an operation gets a JSON answer with a status the operation documents."""
    documented = set(operation["responses"])
    for target, body in probes(path, operation):
        status, _, reply = request(
            real_stack.port, method.upper(), target, body or b"", headers=JSON
        )
        json.loads(reply)  # every answer is JSON
        assert str(status) in documented, (method, target, status, reply[:200])
        if body == b'{"name":':
            assert status == 400, reply[:200]
