"""A bearer token checked as RFC 9068 and RFC 8725 ask: the algorithm from an explicit
asymmetric allow-list (never ``none``, never HS*), the key by ``kid`` from the issuer's JWKS
and bound to that algorithm, then the signature, ``iss``, ``aud``, ``exp``/``nbf``/``iat``
with a small leeway and the required claims, all by PyJWT (docs/auth.md, why PyJWT)."""

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from {{ cookiecutter.package_name }}.settings import Settings

from .keys import KeySet

# Claims every access token must carry (RFC 9068, section 2.2, those this service reads).
REQUIRED_CLAIMS = ("iss", "aud", "exp", "iat", "sub")
# nginx refuses a header over 8 KB already; the app bounds what it parses on its own too.
MAX_TOKEN_LENGTH = 8 * 1024
MAX_KID_LENGTH = 256
# The key fetch's whole budget: a request naming an unknown key waits at most this long.
FETCH_TIMEOUT_SECONDS = 5.0


class InvalidTokenError(Exception):
    """The token is refused; the message is the 401's error_description (never the token)."""


@dataclass(frozen=True)
class Principal:
    """Who a verified token speaks for: its subject, its scopes and every claim."""

    subject: str
    scopes: frozenset[str]
    claims: Mapping[str, Any]


def unverified_header(token: str) -> dict[str, Any]:
    """The token's JOSE header, to pick the key: only the first segment is decoded. PyJWT's
    get_unverified_header decodes and checks the whole token, which jwt.decode then does
    again (a quarter of a verification's instructions, docs/auth.md, Cost); jwt.decode
    still checks this header strictly, and the key found is bound to the algorithm read here."""
    head, dot, _ = token.partition(".")
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    # RecursionError: a header of thousands of nested "[" (json's parser recurses) would
    # escape as a 500; PyJWT's own parse turns it into a DecodeError too.
    except (ValueError, binascii.Error, RecursionError):
        header = None
    if not dot or not isinstance(header, dict):
        raise InvalidTokenError("the token is not a JWT")
    return header


def scopes_of(value: object) -> frozenset[str]:
    """Scopes as a space-separated string ("scope", Entra ID's "scp") or a list ("roles")."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


class TokenVerifier:
    """Verifies access tokens for one issuer and one audience; one per worker (main.py)."""

    def __init__(
        self, settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        """``transport``: httpx's, where the keys are fetched from (tests pass an issuer's)."""
        self.issuer = settings.auth_issuer
        self.audience = settings.auth_audience
        self.algorithms = frozenset(settings.auth_algorithms)
        self.leeway = settings.auth_leeway_seconds
        self.scope_claim = settings.auth_scope_claim
        self.keys = KeySet(
            settings.auth_issuer,
            algorithms=self.algorithms,
            cooldown_seconds=settings.auth_jwks_cooldown_seconds,
            client=httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS, transport=transport),
        )

    async def verify(self, token: str) -> Principal:
        """The token's principal, or InvalidTokenError saying why not."""
        if not self.issuer:
            raise InvalidTokenError("no issuer is configured")
        if len(token) > MAX_TOKEN_LENGTH:
            raise InvalidTokenError("the token is too long")
        header = unverified_header(token)
        algorithm, kid = header.get("alg"), header.get("kid")
        # Checked before any key is looked up: "none", HS256 and the rest never reach a key.
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            raise InvalidTokenError("the token's algorithm is not allowed")
        if not isinstance(kid, str) or not 0 < len(kid) <= MAX_KID_LENGTH:
            raise InvalidTokenError("the token names no signing key")
        key = await self.keys.key(kid, algorithm)
        if key is None:
            raise InvalidTokenError("the token's signing key is unknown")
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": list(REQUIRED_CLAIMS)},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidTokenError("the token has expired") from None
        except jwt.PyJWTError:
            raise InvalidTokenError("the token is invalid") from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise InvalidTokenError("the token has no subject")
        return Principal(subject, scopes_of(claims.get(self.scope_claim)), claims)

    async def aclose(self) -> None:
        """Close the key fetcher's connections (the app's lifespan, at shutdown)."""
        await self.keys.client.aclose()
