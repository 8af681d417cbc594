"""Hostile input for every operation in the app's OpenAPI schema (a new endpoint is probed too):
huge, deep, non-finite, non-JSON bodies and hostile parameters get small JSON 4xx answers.
"""

import json
import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict

from {{ cookiecutter.package_name }}.main import app as served
from {{ cookiecutter.package_name }}.validation import MAX_ERRORS

JSON = {"content-type": "application/json"}
# Just under nginx's 1 MiB body limit: one unknown key per 10 bytes, one error per key.
MANY_UNKNOWN_KEYS = ("{" + ",".join(f'"k{i}":[1]' for i in range(90_000)) + "}").encode()
# Not JSON (a 400, as POST /items documents) first, then valid JSON that no model takes.
NOT_JSON = {
    "truncated": b'{"name":',
    "binary": b"\x1a\xffb\x03l",
    "unclosed 100 000 deep": b"[" * 100_000,
    "5 000 digits": b'{"name":"a","price_cents":' + b"9" * 5000 + b"}",
}
HOSTILE_BODIES = {
    **NOT_JSON,
    "90 000 unknown keys": MANY_UNKNOWN_KEYS,
    "nested 100 000 deep": b"[" * 100_000 + b"]" * 100_000,
    "NaN": b'{"name":"a","price_cents":NaN,"numbers":[NaN]}',
    "-Infinity": b'{"name":"a","price_cents":-Infinity}',
    "overflow": b'{"name":"a","price_cents":1e999999}',
    "surrogate key": b'{"name":"a","\\ud800":1}',
    "surrogate value": b'{"name":"\\udfff","price_cents":1}',
}
HOSTILE_VALUES = ["A" * 5000, "%00", "\u00e9t\u00e9", "..%2F..%2F", "-1", "9" * 40, "NaN", "1e999"]
OPERATIONS = [
    (method.upper(), path, operation)
    for path, methods in served.openapi()["paths"].items()
    for method, operation in methods.items()
]
WITH_BODY = [
    (method, re.sub(r"\{[^}]+\}", "1", path))
    for method, path, operation in OPERATIONS
    if "application/json" in operation.get("requestBody", {}).get("content", {})
]
WITH_PARAMETERS = [
    (method, path, parameter["in"], parameter["name"])
    for method, path, operation in OPERATIONS
    for parameter in operation.get("parameters", [])
    if parameter["in"] in {"path", "query"}
]


def bounded_status(client: TestClient, method: str, url: str, **request: object) -> int:
    """The status of a small, strict-JSON, UTF-8 answer that is not a server error."""
    response = client.request(method, url, headers=JSON, **request)  # type: ignore[arg-type]
    assert response.status_code < 500, response.content[:300]
    assert len(response.content) < 4096
    json.loads(response.content.decode("utf-8"), parse_constant=pytest.fail)
    return response.status_code


@pytest.mark.parametrize(("method", "path"), WITH_BODY)
@pytest.mark.parametrize("body", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_hostile_bodies_get_small_4xx_answers(
    client: TestClient, method: str, path: str, body: bytes
) -> None:
    """Each body is refused in a bounded answer, a 400 when it is no JSON at all."""
    status = bounded_status(client, method, path, content=body)
    assert status == 400 if body in NOT_JSON.values() else status >= 400


@pytest.mark.parametrize(("method", "path", "where", "name"), WITH_PARAMETERS)
@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=range(len(HOSTILE_VALUES)))
def test_hostile_parameters_get_bounded_answers(
    client: TestClient, method: str, path: str, *, where: str, name: str, value: str
) -> None:
    """Long, encoded, non-ASCII or out-of-range values in a path or query: never a 5xx."""
    filled = re.sub(r"\{[^}]+\}", "1", path.replace("{" + name + "}", value))
    params = {name: value} if where == "query" else {}
    bounded_status(client, method, filled, params=params, content=b"{}")


class Strict(BaseModel):
    """A model without the items' limits: the worst case for the 422 handler."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str


def test_many_errors_give_a_small_reply_without_the_input(app: FastAPI, client: TestClient) -> None:
    """90 000 unknown keys: MAX_ERRORS listed (type, loc, msg only), all counted, the id."""

    @app.post("/strict")
    async def strict(body: Strict) -> None:
        del body

    response = client.post("/strict", content=MANY_UNKNOWN_KEYS, headers=JSON)
    body = response.json()
    assert (response.status_code, len(body["detail"])) == (422, MAX_ERRORS)
    assert body["error_count"] >= 90_000
    assert body["request_id"] == response.headers["x-request-id"]
    assert all(set(error) == {"type", "loc", "msg"} for error in body["detail"])
