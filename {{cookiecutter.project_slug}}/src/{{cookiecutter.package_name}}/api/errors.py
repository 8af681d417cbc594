"""The app's own HTTP errors (404, 405, an endpoint's ``HTTPException``) as JSON with the
request id, like every other error body; main.py registers ``http_error_handler``."""

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from {{ cookiecutter.package_name }}.request_context import REQUEST_ID

# Statuses whose answer must have no body (RFC 9110: 1xx, 204, 304).
_NO_BODY = frozenset({204, 304})


async def http_error_handler(request: Request, exc: HTTPException) -> Response:  # noqa: ARG001 - Starlette's handler signature
    """``{"detail": ..., "request_id": ...}`` with the exception's status and headers (Allow)."""
    if exc.status_code < 200 or exc.status_code in _NO_BODY:
        return Response(status_code=exc.status_code, headers=exc.headers)
    body = {"detail": exc.detail, "request_id": REQUEST_ID.get()}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
