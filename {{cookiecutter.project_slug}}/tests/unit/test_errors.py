"""errors.py's 400/422 handler; needs the app (conftest.py). Hostile bodies and parameters for
every operation: the template's battery, live (test_payloads.py, test_fuzz.py)."""

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict

from {{ cookiecutter.package_name }}.errors import MAX_ERRORS

# Just under nginx's 1 MiB body limit: one unknown key per 10 bytes, one error per key.
MANY_UNKNOWN_KEYS = ("{" + ",".join(f'"k{i}":[1]' for i in range(90_000)) + "}").encode()


class Strict(BaseModel):
    """A model without the items' limits: the worst case for the 422 handler."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str


def test_many_errors_give_a_small_reply_without_the_input(app: FastAPI, client: TestClient) -> None:
    """90 000 unknown keys: MAX_ERRORS listed (type, loc, msg only), all counted, the id;
    NaN, a lone surrogate or a body that is no JSON: a small 400/422, never a 5xx."""

    @app.post("/_tests/strict")
    async def strict(body: Strict) -> None:
        del body

    json = {"content-type": "application/json"}
    response = client.post("/_tests/strict", content=MANY_UNKNOWN_KEYS, headers=json)
    body = response.json()
    assert (response.status_code, len(body["detail"])) == (422, MAX_ERRORS)
    assert body["error_count"] >= 90_000
    assert body["request_id"] == response.headers["x-request-id"]
    assert all(set(error) == {"type", "loc", "msg"} for error in body["detail"])
    assert len(response.content) < 4096
    for hostile, status in [(b'{"name":NaN}', 422), (b'{"\\ud800":1}', 422), (b"[" * 10**5, 400)]:
        refused = client.post("/_tests/strict", content=hostile, headers=json)
        assert (refused.status_code, len(refused.content) < 4096) == (status, True), hostile
