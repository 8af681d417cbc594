"""The app's error answers, JSON with the request id; main.py registers both handlers."""

import json
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .context import REQUEST_ID

# 20 errors tell a client what to fix; the rest are counted, not listed.
MAX_ERRORS = 20
# Characters per string (a message, a key in a location): enough for any field name.
MAX_TEXT = 120
# Parts per location: a body nested deeper than this is reported at this depth.
MAX_LOC = 12
_ELLIPSIS = "..."
# Statuses whose answer must have no body (RFC 9110: 1xx, 204, 304).
_NO_BODY = frozenset({204, 304})


def _text(value: object) -> str:
    """A short, always-encodable string: cut to MAX_TEXT, lone surrogates made "?"."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - len(_ELLIPSIS)] + _ELLIPSIS
    return text.encode("utf-8", "replace").decode("utf-8")


def _error(error: dict[str, Any]) -> dict[str, object]:
    message = error.get("msg", "")
    if error.get("type") == "json_invalid":
        # FastAPI's msg is only "JSON decode error": the parser's reason says what is wrong.
        reason = (error.get("ctx") or {}).get("error")
        message = f"{message}: {reason}" if reason else message
    loc = error.get("loc", ())
    # bool is an int subclass but never a location part: only exact ints stay numbers.
    cut: list[str | int] = [p if type(p) is int else _text(p) for p in loc[:MAX_LOC]]
    if len(loc) > MAX_LOC:
        cut.append(_ELLIPSIS)
    return {"type": _text(error.get("type", "")), "loc": cut, "msg": _text(message)}


async def validation_error_handler(request: Request, exc: RequestValidationError) -> Response:  # noqa: ARG001 - Starlette's handler signature
    """A bounded 400 for a body that is not JSON, else 422. FastAPI's own handler echoes every
    error's input (seconds of CPU, megabytes, even a 500): this answer is bounded whatever the
    input and never holds it (docs/app.md, Validation errors)."""
    errors = exc.errors()
    status = 400 if any(e.get("type") == "json_invalid" for e in errors[:1]) else 422
    payload = {
        "detail": [_error(error) for error in errors[:MAX_ERRORS]],
        "error_count": len(errors),
        "request_id": REQUEST_ID.get(),
    }
    # Every value is a short str or an int by now: this cannot raise, and ASCII is safe anywhere.
    body = json.dumps(payload, separators=(",", ":")).encode("ascii")
    return Response(body, status_code=status, media_type="application/json")


async def http_error_handler(request: Request, exc: HTTPException) -> Response:  # noqa: ARG001 - Starlette's handler signature
    """404, 405 and an endpoint's ``HTTPException``: ``{"detail": ..., "request_id": ...}``
    with the exception's status and headers (Allow)."""
    if exc.status_code < 200 or exc.status_code in _NO_BODY:
        return Response(status_code=exc.status_code, headers=exc.headers)
    body = {"detail": exc.detail, "request_id": REQUEST_ID.get()}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
