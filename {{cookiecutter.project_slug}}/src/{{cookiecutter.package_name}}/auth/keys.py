"""The issuer's signing keys: found through its discovery document, fetched from its JWKS with
httpx (never PyJWT's ``PyJWKClient``, whose urllib fetch would block the event loop), kept per
worker. A ``kid`` not in the cache refetches at most once per cooldown, however many tokens
name unknown keys; a fetch has a total budget, and a failed one keeps the keys already known,
so a provider outage (or a malformed JWKS) only fails tokens signed by keys this worker has
never seen (docs/auth.md, Keys)."""

import asyncio
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWTError

logger = logging.getLogger(__name__)

# A provider publishes a few keys (the current, the next, the previous): more is no JWKS to
# trust, and each costs a parse at every refetch.
MAX_KEYS = 32
# A discovery document or a JWKS is a few KB; reading more would let the provider (or whoever
# answers in its name) fill this worker's memory.
MAX_DOCUMENT_BYTES = 256 * 1024
# Discovery and the JWKS together, however slowly a provider trickles them: token requests
# waiting on a fetch wait this long at most, and a fetch that runs out starts the cooldown.
FETCH_BUDGET_SECONDS = 5.0
# The discovery document is read again this often: a provider may move its keys' URL.
REDISCOVER_SECONDS = 3600.0
# The algorithms each key type can verify: a key is never tried with another family, so an
# RSA public key can never become an HMAC secret (key confusion).
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
OKP_ALGORITHMS = {"Ed25519": "EdDSA"}


class KeyFetchError(Exception):
    """The discovery document or the JWKS could not be read or made no sense."""


def algorithms_for(jwk: dict[str, Any], allowed: frozenset[str]) -> frozenset[str]:
    """The allowed algorithms that this JWK may verify: none for an encryption or symmetric key,
    nor for one whose fields have the wrong types."""
    kty, curve, declared = jwk.get("kty"), jwk.get("crv"), jwk.get("alg")
    if jwk.get("use", "sig") != "sig" or not all(
        isinstance(field, str | None) for field in (kty, curve, declared)
    ):
        return frozenset()
    if kty == "RSA":
        family = RSA_ALGORITHMS
    elif kty == "EC" and curve in EC_ALGORITHMS:
        family = frozenset({EC_ALGORITHMS[curve]})
    elif kty == "OKP" and curve in OKP_ALGORITHMS:
        family = frozenset({OKP_ALGORITHMS[curve]})
    else:  # "oct" (a shared secret) above all: a public document holds no secret to trust
        return frozenset()
    candidates = family & allowed
    return candidates & {declared} if declared is not None else candidates


def parse_jwks(document: Any, allowed: frozenset[str]) -> dict[tuple[str, str], PyJWK]:
    """Each usable key of a JWKS, by (kid, algorithm); keys without a kid or unusable skipped."""
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise KeyFetchError("the JWKS has no list of keys")
    keys: dict[tuple[str, str], PyJWK] = {}
    for jwk in entries[:MAX_KEYS]:
        kid = jwk.get("kid") if isinstance(jwk, dict) else None
        if not isinstance(kid, str) or not kid:
            continue
        for algorithm in algorithms_for(jwk, allowed):
            try:
                keys[kid, algorithm] = PyJWK(jwk, algorithm)
            except (PyJWTError, TypeError, ValueError, AttributeError):  # a malformed member
                logger.warning("skipping a key the JWKS holds", extra={"kid": kid[:64]})
    return keys


class KeySet:
    """One issuer's verification keys, fetched lazily: start-up never waits for the provider."""

    def __init__(
        self,
        issuer: str,
        *,
        algorithms: Iterable[str],
        cooldown_seconds: float,
        client: httpx.AsyncClient,
    ) -> None:
        self.issuer = issuer
        self.algorithms = frozenset(algorithms)
        self.cooldown_seconds = cooldown_seconds
        self.client = client
        self._keys: dict[tuple[str, str], PyJWK] = {}
        self._jwks_uri: str | None = None
        self._rediscover_at = 0.0  # time.monotonic() from which discovery is read again
        self._next_fetch = 0.0  # time.monotonic() from which an unknown kid may refetch
        self._lock = asyncio.Lock()

    async def key(self, kid: str, algorithm: str) -> PyJWK | None:
        """The key ``kid`` for ``algorithm``, refetching the JWKS if the cooldown allows."""
        found = self._keys.get((kid, algorithm))
        if found is not None or not self.issuer or time.monotonic() < self._next_fetch:
            return found
        async with self._lock:
            # Requests that waited here while another fetched find the cooldown running.
            if time.monotonic() >= self._next_fetch:
                try:
                    await self._refresh()
                finally:  # a failed, timed-out or cancelled fetch waits out the cooldown too
                    self._next_fetch = time.monotonic() + self.cooldown_seconds
        return self._keys.get((kid, algorithm))

    async def _refresh(self) -> None:
        try:
            async with asyncio.timeout(FETCH_BUDGET_SECONDS):
                document = await self._get_jwks()
            keys = parse_jwks(document, self.algorithms)
        except (httpx.HTTPError, KeyFetchError, ValueError, RecursionError, TimeoutError) as error:
            reason = f"{type(error).__name__}: {error}"[:200]
            extra = {"reason": reason, "known_keys": len(self._keys)}
            logger.warning("the issuer's keys could not be fetched; known keys kept", extra=extra)
            return
        if not keys:  # a JWKS emptied by mistake must not lock every client out
            logger.warning("the issuer's JWKS holds no usable key; known keys kept")
            return
        self._keys = keys
        logger.info("issuer keys fetched", extra={"kids": sorted({kid for kid, _ in keys})})

    async def _get_jwks(self) -> Any:
        """The JWKS document, from the jwks_uri discovery last gave; one the provider no longer
        answers (a 404, a moved URL) is discovered again, once."""
        if self._jwks_uri is not None and time.monotonic() < self._rediscover_at:
            try:
                return await self._get_json(self._jwks_uri)
            except httpx.HTTPStatusError:
                logger.info("the issuer's jwks_uri answered an error: discovering it again")
        self._jwks_uri = await self._discover()
        self._rediscover_at = time.monotonic() + REDISCOVER_SECONDS
        return await self._get_json(self._jwks_uri)

    async def _discover(self) -> str:
        # OpenID Connect Discovery 1.0, section 4: the issuer, then the well-known path.
        url = f"{self.issuer.rstrip('/')}/.well-known/openid-configuration"
        document = await self._get_json(url)
        if not isinstance(document, dict) or document.get("issuer") != self.issuer:
            # Section 4.3: a document naming another issuer must not be used.
            raise KeyFetchError(f"{url} names another issuer")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            raise KeyFetchError(f"{url} has no jwks_uri")
        return jwks_uri

    async def _get_json(self, url: str) -> Any:
        async with self.client.stream("GET", url) as response:
            response.raise_for_status()
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise KeyFetchError(f"{url} is over {MAX_DOCUMENT_BYTES} bytes")
        return json.loads(body)
