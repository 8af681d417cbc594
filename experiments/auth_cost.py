"""What verifying a bearer token costs an auth=oidc bake, in instructions per request.

    <bake>/.venv/bin/python -m experiments.auth_cost <auth=oidc bake>

Run from the template's root with the bake's Python (its dependencies: PyJWT, httpx). The
lab's cost gate (lab/cost.py: valgrind's cachegrind, in-process requests from forked
children, GET only) counts two apps built by the bake's own ``create_app``, each with one
extra route that answers ``{}``: ``/probe`` open, and the same route declaring
``require_scopes("items:write")``. Every request of both carries the same RS256 token (2048-bit
key, made here), whose key the verifier has cached during the warm-up, so the difference is
the cost of verifying a token with a cached key: the header parse, the signature, the claims,
the scope check. Instructions, not seconds: the count does not move with the machine's load.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from lab.cost import measure
from lab.project import FACTORY_VARIABLE, discover

ISSUER = "https://issuer.cost.test"
AUDIENCE = "https://api.cost.test"
PATH = "/probe"


def _factory_module() -> Any:
    """The bake's main module (lab/cost.py passes its factory as $LAB_FACTORY)."""
    module, _, _ = os.environ[FACTORY_VARIABLE].partition(":")
    # main.py builds an app at import, and production needs an issuer and an audience
    # (lab/cost.py runs the driver in a clean environment: set here, in the measured process).
    prefix = module.partition(".")[0].upper()
    os.environ[f"{prefix}_AUTH_ISSUER"] = ISSUER
    os.environ[f"{prefix}_AUTH_AUDIENCE"] = AUDIENCE
    return importlib.import_module(module)


@functools.cache
def _credentials() -> tuple[dict[str, Any], str]:
    """One key and one token per process: every app built here trusts the same JWKS."""
    # By name: the default bake's environment, where mypy checks experiments/, has none of
    # auth=oidc's dependencies; this runs only under an auth bake's Python.
    jwt = importlib.import_module("jwt")
    rsa = importlib.import_module("cryptography.hazmat.primitives.asymmetric.rsa")
    rsa_algorithm = importlib.import_module("jwt.algorithms").RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    kid = uuid.uuid4().hex
    jwk = {**rsa_algorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid, "use": "sig"}
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "cost",
        "iat": now,
        "exp": now + 3600,
        "scope": "items:write",
    }
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})
    # lab/drive.py sends its fixed headers (what nginx forwards) to every app it drives; the
    # token goes with them, so both apps parse the same bytes and only the route differs.
    sys.modules["__main__"]._HEADERS.append((b"authorization", f"Bearer {token}".encode()))
    return jwk, token


def _build(*, verified: bool) -> Any:
    httpx = importlib.import_module("httpx")  # as above: an auth bake's dependency

    main = _factory_module()
    package = main.__name__.rpartition(".")[0]
    settings_module = importlib.import_module(f"{package}.settings")
    auth = importlib.import_module(f"{package}.auth")
    verifier_module = importlib.import_module(f"{package}.auth.verifier")
    jwk, _ = _credentials()
    documents = {
        "/.well-known/openid-configuration": {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"},
        "/jwks": {"keys": [jwk]},
    }

    def provider(request: Any) -> Any:
        return httpx.Response(200, json=documents[request.url.path])

    settings = settings_module.Settings(auth_issuer=ISSUER, auth_audience=AUDIENCE)
    app = main.create_app(settings)
    # The keys come from this process (a real JWKS document, parsed as the network's would be).
    transport = httpx.MockTransport(provider)
    app.state.token_verifier = verifier_module.TokenVerifier(settings, transport=transport)
    dependencies = [auth.require_scopes("items:write")] if verified else []

    async def probe() -> dict[str, str]:
        return {}

    app.add_api_route(PATH, probe, dependencies=dependencies, include_in_schema=False)

    return app


def verified_app() -> Any:
    return _build(verified=True)


def open_app() -> Any:
    return _build(verified=False)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    project = discover(Path(argv[0]).resolve())
    here = __name__ if __name__ != "__main__" else "experiments.auth_cost"
    counts = {
        name: measure(project, factory=f"{here}:{name}", path=PATH, each=False)
        for name in ("open_app", "verified_app")
    }
    opened = counts["open_app"].per_request["default"]
    verified = counts["verified_app"].per_request["default"]
    print(f"| GET {PATH}, in process, the shipped middleware | instructions per request |")
    print("|---|---:|")
    print(f"| open route | {opened:,.0f} |")
    print(f"| require_scopes, a cached RS256 key | {verified:,.0f} |")
    print(f"| verification alone | {verified - opened:,.0f} ({verified / opened:.2f} x) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
