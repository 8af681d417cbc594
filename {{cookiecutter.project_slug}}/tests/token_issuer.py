"""An OpenID issuer in process, for the auth tests: keys generated here (RSA, EC, Ed25519), its
discovery document and JWKS served as ASGI over httpx's transport, tokens signed with PyJWT.
Real keys and real signatures; the template's own tests also run the service against a
certified provider (oidc-provider on Node.js) through the live stack."""

import asyncio
import json
import time
import uuid
from collections import Counter
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from fastapi import FastAPI
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from starlette.types import Receive, Scope, Send

from {{ cookiecutter.package_name }}.auth.verifier import TokenVerifier

ISSUER = "https://issuer.test/realms/service"
AUDIENCE = "https://api.test"
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def new_key(algorithm: str) -> PrivateKey:
    """A fresh private key for ``algorithm`` (RS*/PS*: RSA 2048, ES256: P-256, EdDSA: Ed25519)."""
    if algorithm.startswith(("RS", "PS")):
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    return ed25519.Ed25519PrivateKey.generate()


def public_jwk(key: PrivateKey, kid: str) -> dict[str, Any]:
    """The public half of ``key`` as a JWK with its kid and use, no alg (as Keycloak's)."""
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        jwk = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(public, ec.EllipticCurvePublicKey):
        jwk = ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
    return {**jwk, "kid": kid, "use": "sig"}


class Issuer:
    """An issuer with one key per algorithm in ``algorithms``; ``requests`` counts each path."""

    def __init__(self, algorithms: tuple[str, ...] = ("RS256",), url: str = ISSUER) -> None:
        self.url = url
        self.keys: dict[str, tuple[str, PrivateKey]] = {}
        self.requests: Counter[str] = Counter()
        self.down = False  # True: every request fails, as a provider that is away
        self.jwks_path = "certs"  # where discovery says the keys are (a provider may move them)
        self.jwks_body: bytes | None = None  # the JWKS answered as these bytes instead (hostile)
        self.stall = 0.0  # seconds each answer waits first, as a provider that trickles
        for algorithm in algorithms:
            self.add_key(algorithm)

    def add_key(self, algorithm: str = "RS256") -> str:
        """Publish a new key (a rotation's next key); its kid."""
        kid = uuid.uuid4().hex
        self.keys[kid] = (algorithm, new_key(algorithm))
        return kid

    def token(
        self,
        scope: str | None = "items:write",
        *,
        kid: str | None = None,
        lifetime: float = 300,
        **claims: Any,
    ) -> str:
        """An access token signed by key ``kid`` (default: the first), claims overridable."""
        kid = kid or next(iter(self.keys))
        algorithm, key = self.keys[kid]
        now = int(time.time())
        payload = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "client-1",
            "client_id": "client-1",
            "iat": now,
            "exp": now + lifetime,
            "jti": uuid.uuid4().hex,
            "scope": scope,
        }
        payload.update(claims)
        payload = {name: value for name, value in payload.items() if value is not None}
        return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": kid, "typ": "at+jwt"})

    def jwks(self) -> dict[str, Any]:
        return {"keys": [public_jwk(key, kid) for kid, (_, key) in self.keys.items()]}

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport on which this issuer answers every URL."""
        return httpx.ASGITransport(app=self)

    async def __call__(self, scope: Scope, _receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        self.requests[scope["path"]] += 1
        documents = {
            "/realms/service/.well-known/openid-configuration": {
                "issuer": self.url,
                "jwks_uri": f"{self.url}/{self.jwks_path}",
            },
            f"/realms/service/{self.jwks_path}": self.jwks(),
        }
        document = None if self.down else documents.get(scope["path"])
        status = 200 if document is not None else (503 if self.down else 404)
        body = json.dumps(document).encode() if document is not None else b"{}"
        if self.jwks_body is not None and scope["path"].endswith(f"/{self.jwks_path}"):
            body = self.jwks_body
        await asyncio.sleep(self.stall)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


# The issuer every test app trusts unless a test makes its own (tests/conftest.py sets the
# settings' issuer and audience to it).
SHARED = Issuer()


def trusting(app: FastAPI, issuer: Issuer = SHARED) -> FastAPI:
    """``app``, fetching its keys from ``issuer`` (in process) instead of the network."""
    app.state.token_verifier = TokenVerifier(app.state.settings, transport=issuer.transport())
    return app


def bearer(token: str) -> dict[str, str]:
    """The Authorization header carrying ``token``."""
    return {"Authorization": f"Bearer {token}"}
