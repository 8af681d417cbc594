"""The bounded validation answers (validation.py): 400 for non-JSON, a small 422 otherwise."""

import json

import pytest
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict

from {{ cookiecutter.package_name }}.validation import (
    MAX_ERRORS,
    MAX_LOC,
    MAX_TEXT,
    validation_payload,
)

JSON = {"content-type": "application/json"}
# Just under nginx's 1 MiB body limit: one unknown key per 10 bytes, one error per key.
MANY_UNKNOWN_KEYS = ("{" + ",".join(f'"k{i}":[1]' for i in range(90_000)) + "}").encode()


class Strict(BaseModel):
    """Like ItemIn, without a body-size limit on its route: only nginx's 1 MiB bounds it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    numbers: list[int] = []


@pytest.fixture(autouse=True)
def strict_route(app: FastAPI) -> None:
    """POST /strict validates a Strict body (the worst case for the handler)."""

    @app.post("/strict")
    async def strict(body: Strict) -> dict[str, int]:
        return {"numbers": len(body.numbers)}


def test_many_errors_give_a_small_reply(client: TestClient) -> None:
    """90 000 unknown keys: MAX_ERRORS listed, all counted, and no input echoed."""
    response = client.post("/strict", content=MANY_UNKNOWN_KEYS, headers=JSON)
    assert response.status_code == 422
    body = response.json()
    assert len(body["detail"]) == MAX_ERRORS
    assert body["error_count"] >= 90_000
    assert body["request_id"] == response.headers["x-request-id"]
    assert all(set(error) == {"type", "loc", "msg"} for error in body["detail"])
    assert len(response.content) < 4096


def test_fastapis_own_handler_amplifies(app: FastAPI) -> None:
    """The reason for the module: FastAPI's default 422 is about ten times the request."""
    from fastapi.exception_handlers import (  # noqa: PLC0415 - only this test wants it
        request_validation_exception_handler,
    )

    app.exception_handlers[RequestValidationError] = request_validation_exception_handler
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/strict", content=MANY_UNKNOWN_KEYS, headers=JSON)
    assert response.status_code == 422
    assert len(response.content) > 5 * len(MANY_UNKNOWN_KEYS)


@pytest.mark.parametrize(
    "body",
    [
        b'{"name":"a","numbers":[NaN]}',
        b'{"name":"a","numbers":[-Infinity]}',
        b'{"name":"a","x":Infinity}',
        b'{"name":"a","numbers":[1e999999]}',
        b'{"name":"a","\\ud800":1}',
        b'{"name":"a","numbers":["\\udfff"]}',
    ],
    ids=["NaN", "-Infinity", "Infinity, unknown key", "overflow", "surrogate key", "surrogate"],
)
def test_unencodable_input_is_a_422_not_a_500(client: TestClient, body: bytes) -> None:
    """Non-finite numbers and lone surrogates: a strict-JSON, UTF-8 422 (FastAPI's own: 500)."""
    response = client.post("/strict", content=body, headers=JSON)
    assert response.status_code == 422
    parsed = json.loads(response.content.decode("utf-8"), parse_constant=pytest.fail)
    assert parsed["detail"]


@pytest.mark.parametrize(
    "body",
    [b'{"name":', b"\x1a\xffb\x03l", b"[" * 100_000, b"1" * 5000],
    ids=["truncated", "binary", "100 000 open arrays", "5 000 digits"],
)
def test_a_body_that_is_not_json_is_400(client: TestClient, body: bytes) -> None:
    """Truncated, binary, too deep or too long a number: 400, as POST /items documents."""
    response = client.post("/strict", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"


def test_strings_and_locations_are_cut() -> None:
    """A huge key and a deep location are cut to MAX_TEXT characters and MAX_LOC parts."""
    errors = [{"type": "x" * 10_000, "loc": ["body", *range(100)], "msg": "m" * 10_000}]
    status, body = validation_payload(errors)
    error = json.loads(body)["detail"][0]
    assert status == 422
    assert len(error["type"]) == MAX_TEXT
    assert len(error["msg"]) == MAX_TEXT
    assert len(error["loc"]) == MAX_LOC + 1
    assert error["loc"][-1] == "..."


def test_the_json_error_says_why() -> None:
    """A decode error names the parser's reason, and is 400."""
    errors = [{"type": "json_invalid", "loc": ("body", 8), "msg": "JSON decode error",
               "ctx": {"error": "Expecting value"}}]  # fmt: skip
    status, body = validation_payload(errors)
    assert status == 400
    assert json.loads(body)["detail"][0]["msg"] == "JSON decode error: Expecting value"
