"""What a route declares to need a token: ``dependencies=[require_scopes("items:write")]``, or
``principal: Annotated[Principal, require_scopes()]`` to read who called, on an HTTP or a
WebSocket route. Answers 401 with ``WWW-Authenticate: Bearer error="invalid_token"`` and 403
with ``error="insufficient_scope"`` (RFC 6750, section 3), in the app's JSON error shape
(errors.py adds the request id); to a WebSocket handshake, as its denial response, before any
accept (the ASGI extension uvicorn supports)."""

from typing import Annotated, Any

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from opentelemetry import trace
from starlette.requests import HTTPConnection

from .verifier import InvalidTokenError, Principal, TokenVerifier

# Declares the scheme in the OpenAPI document, so /docs can send a token. auto_error=False:
# a missing token gets this module's 401 (the JSON shape, the challenge), not FastAPI's.
bearer = HTTPBearer(
    auto_error=False,
    bearerFormat="JWT",
    description="An access token from the service's OpenID issuer (docs/auth.md)",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def unauthorized(description: str | None) -> HTTPException:
    """401; RFC 6750 section 3.1: a request without credentials gets the challenge, no error."""
    challenge = "Bearer"
    if description is not None:
        challenge += f' error="invalid_token", error_description="{description}"'
    detail = description or "a bearer token is required"
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail, {"WWW-Authenticate": challenge})


def forbidden(needed: frozenset[str]) -> HTTPException:
    """403 naming the scopes the route needs (the token had a subject, not the right)."""
    scope = " ".join(sorted(needed))
    challenge = f'Bearer error="insufficient_scope", scope="{scope}"'
    detail = f"the token lacks the scope {scope}"
    return HTTPException(status.HTTP_403_FORBIDDEN, detail, {"WWW-Authenticate": challenge})


def require_scopes(*scopes: str) -> Any:
    """A dependency: a verified bearer token holding every one of ``scopes``; its Principal."""
    needed = frozenset(scopes)

    # HTTPConnection, not Request: FastAPI injects a Request on HTTP routes only, and this
    # dependency serves WebSocket routes too (their handshake's Authorization header).
    async def authorize(connection: HTTPConnection, credentials: Credentials) -> Principal:
        if credentials is None:
            raise unauthorized(None)
        verifier: TokenVerifier = connection.app.state.token_verifier
        try:
            principal = await verifier.verify(credentials.credentials)
        except InvalidTokenError as refused:
            raise unauthorized(str(refused)) from None
        # Who, never the token: the access line (middleware/access_log.py) and the trace.
        connection.state.subject = principal.subject
        trace.get_current_span().set_attribute("enduser.id", principal.subject)
        if not needed <= principal.scopes:
            raise forbidden(needed)
        return principal

    return Depends(authorize)
