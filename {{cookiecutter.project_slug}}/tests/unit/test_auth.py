"""Bearer tokens (auth/): verified against an issuer in process with keys generated here
(token_issuer.py), through the whole app: every refusal is a 401 or 403 in the app's JSON shape,
the keys' cache refetches at most once per cooldown and survives the provider going away. The
same cases against a certified provider, through nginx: the template's tests/test_auth.py."""

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import jwt
import pytest
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import APIRouter, FastAPI, WebSocket
from fastapi.testclient import TestClient
from httpx2 import Response
from jwt.utils import base64url_decode, base64url_encode
from pydantic import ValidationError
from starlette.testclient import WebSocketDenialResponse

from {{ cookiecutter.package_name }}.auth import Principal, keys, require_scopes
from {{ cookiecutter.package_name }}.auth.keys import MAX_KEYS, algorithms_for, parse_jwks
from {{ cookiecutter.package_name }}.auth.verifier import MAX_TOKEN_LENGTH
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings

from token_issuer import ISSUER, Issuer, bearer, trusting

from .conftest import ClientFor, JsonLines

ITEM = {"name": "lamp", "price_cents": 1999}
JWKS_PATH = "/realms/service/certs"
ALLOWED = frozenset({"RS256", "PS256", "ES256", "EdDSA"})


def app_for(issuer: Issuer, **settings: object) -> FastAPI:
    """The app trusting ``issuer``, with ``settings`` over the defaults."""
    return trusting(create_app(Settings(**settings)), issuer)  # type: ignore[arg-type]


def post(client: TestClient, token: str | None) -> Response:
    return client.post("/items", json=ITEM, headers=bearer(token) if token is not None else {})


def assert_refused(response: Response, status: int, challenge: str) -> None:
    """A JSON error with the request id and the RFC 6750 challenge ``challenge``."""
    assert response.status_code == status, response.text
    assert response.headers["www-authenticate"] == challenge
    body = response.json()
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["detail"]


def invalid(description: str) -> str:
    return f'Bearer error="invalid_token", error_description="{description}"'


@pytest.fixture
def issuer() -> Issuer:
    return Issuer(("RS256", "PS256", "ES256", "EdDSA"))


@pytest.fixture
def served(issuer: Issuer, client_for: ClientFor) -> TestClient:
    """A running app trusting ``issuer``; requests without a token unless they send one."""
    return client_for(app_for(issuer, auth_jwks_cooldown_seconds=1))


@pytest.fixture
def chat(issuer: Issuer, client_for: ClientFor) -> TestClient:
    """The app trusting ``issuer`` with a WebSocket route needing ``items:write``, written as
    FastAPI's docs write one; it sends the principal's subject and the connection's state's."""
    router = APIRouter()

    @router.websocket("/chat")
    async def session(
        websocket: WebSocket, principal: Annotated[Principal, require_scopes("items:write")]
    ) -> None:
        await websocket.accept()
        await websocket.send_json([principal.subject, websocket.state.subject])
        await websocket.close()

    app = app_for(issuer)
    # Under /_tests/ (conftest.py): a team's own /chat must not answer instead.
    app.include_router(router, prefix="/_tests")
    return client_for(app)


@pytest.mark.parametrize("algorithm", ["RS256", "PS256", "ES256", "EdDSA"])
def test_a_valid_token_of_each_algorithm_may_write(
    issuer: Issuer, served: TestClient, algorithm: str
) -> None:
    """RSA (PKCS#1 and PSS from one key type), P-256 and Ed25519 tokens are accepted."""
    kid = next(kid for kid, (alg, _) in issuer.keys.items() if alg == algorithm)
    assert post(served, issuer.token(kid=kid)).status_code == 201


def test_reads_and_probes_need_no_token(served: TestClient, issuer: Issuer) -> None:
    """GET /items/{id}, /livez and /readyz answer without a token and fetch no key."""
    created = post(served, issuer.token()).json()
    issuer.requests.clear()
    for path in (f"/items/{created['id']}", "/livez", "/readyz"):
        assert served.get(path).status_code == 200, path
    assert issuer.requests == {}


def test_no_token_is_a_401_with_the_bare_challenge(served: TestClient) -> None:
    """RFC 6750 3.1: without credentials, the challenge carries no error code."""
    assert_refused(post(served, None), 401, "Bearer")
    basic = served.post("/items", json=ITEM, headers={"Authorization": "Basic dTpw"})
    assert_refused(basic, 401, "Bearer")


def test_a_token_without_the_scope_is_a_403(served: TestClient, issuer: Issuer) -> None:
    """Verified but not allowed: insufficient_scope, naming the scope the route needs."""
    for scope in ("", "items:read", "items:write2 openid"):
        refused = post(served, issuer.token(scope=scope))
        assert_refused(refused, 403, 'Bearer error="insufficient_scope", scope="items:write"')


@pytest.mark.parametrize(
    ("claims", "description"),
    [
        ({"lifetime": -31}, "the token has expired"),  # 1 s past the 30 s leeway
        ({"aud": "https://other.test"}, "the token is invalid"),
        ({"iss": "https://issuer.test/realms/other"}, "the token is invalid"),
        ({"nbf": int(time.time()) + 120}, "the token is invalid"),
        ({"sub": None}, "the token is invalid"),
        ({"exp": None}, "the token is invalid"),
        ({"iat": None}, "the token is invalid"),
        ({"sub": ""}, "the token has no subject"),
    ],
    ids=[
        "expired",
        "audience",
        "issuer",
        "not-yet-valid",
        "no-sub",
        "no-exp",
        "no-iat",
        "empty-sub",
    ],
)
def test_a_token_with_a_wrong_claim_is_a_401(
    served: TestClient, issuer: Issuer, claims: dict[str, object], description: str
) -> None:
    """Signed by the issuer's own key, yet refused for the claim that is wrong or missing."""
    lifetime = claims.pop("lifetime", 300)
    token = issuer.token(lifetime=lifetime, **claims)  # type: ignore[arg-type]
    assert_refused(post(served, token), 401, invalid(description))


def test_the_leeway_forgives_a_late_clock_up_to_its_setting(
    issuer: Issuer, client_for: ClientFor
) -> None:
    """Expired 20 s ago: accepted with the default 30 s leeway, refused with 10 s."""
    late = issuer.token(lifetime=-20)
    assert post(client_for(app_for(issuer)), late).status_code == 201
    strict = client_for(app_for(issuer, auth_leeway_seconds=10))
    assert_refused(post(strict, late), 401, invalid("the token has expired"))


def test_a_tampered_token_is_a_401(served: TestClient, issuer: Issuer) -> None:
    """A payload changed after signing (a scope added) fails the signature."""
    header, payload, signature = issuer.token(scope="items:read").split(".")
    claims = json.loads(base64url_decode(payload))
    forged = base64url_encode(json.dumps({**claims, "scope": "items:write"}).encode())
    token = f"{header}.{forged.decode()}.{signature}"
    assert_refused(post(served, token), 401, invalid("the token is invalid"))


def test_alg_none_and_hmac_with_the_public_key_never_reach_a_key(
    served: TestClient, issuer: Issuer
) -> None:
    """alg none, and HS256 keyed with the issuer's public key (key confusion): refused for
    the algorithm, before any key is fetched."""
    kid, (_, key) = next(iter(issuer.keys.items()))
    assert isinstance(key, rsa.RSAPrivateKey)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    unsigned = jwt.encode(claims, "", algorithm="none", headers={"kid": kid})
    header = base64url_encode(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    payload = base64url_encode(json.dumps(claims).encode())
    # PyJWT's own HS256 refuses a PEM public key as its secret: signed by hand, as an attacker.
    mac = hmac.HMAC(public_pem, hashes.SHA256())
    mac.update(header + b"." + payload)
    confused = b".".join([header, payload, base64url_encode(mac.finalize())]).decode()
    for token in (unsigned, confused):
        refused = post(served, token)
        assert_refused(refused, 401, invalid("the token's algorithm is not allowed"))
    assert issuer.requests == {}


def test_a_key_of_another_type_is_never_tried(served: TestClient, issuer: Issuer) -> None:
    """An ES256 header naming the RSA key's kid finds no key: a key verifies its family only."""
    rsa_kid = next(kid for kid, (alg, _) in issuer.keys.items() if alg == "RS256")
    ec_kid = next(kid for kid, (alg, _) in issuer.keys.items() if alg == "ES256")
    token = issuer.token(kid=ec_kid)
    header, rest = token.split(".", 1)
    fields = json.loads(base64url_decode(header))
    relabelled = base64url_encode(json.dumps({**fields, "kid": rsa_kid}).encode())
    token = f"{relabelled.decode()}.{rest}"
    assert_refused(post(served, token), 401, invalid("the token's signing key is unknown"))


def test_garbage_and_oversized_tokens_are_401s(served: TestClient, issuer: Issuer) -> None:
    """Not a JWT (a header that is no object, or 5,000 nested arrays deep), no kid, a kid too
    long, a token past MAX_TOKEN_LENGTH: 401s (never the error guard's 500), no key fetched."""
    _, key = next(iter(issuer.keys.values()))
    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    no_kid = jwt.encode(claims, key, algorithm="RS256")
    long_kid = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k" * 257})
    cases = {
        "not-a-jwt": invalid("the token is not a JWT"),
        "a.b.c": invalid("the token is not a JWT"),
        base64url_encode(b"[]").decode() + ".e30.c2ln": invalid("the token is not a JWT"),
        base64url_encode(b"[" * 5000).decode() + ".e30.c2ln": invalid("the token is not a JWT"),
        issuer.token() + "x" * MAX_TOKEN_LENGTH: invalid("the token is too long"),
    }
    for token, challenge in cases.items():
        assert_refused(post(served, token), 401, challenge)
    for token in (no_kid, long_kid):
        assert_refused(post(served, token), 401, invalid("the token names no signing key"))
    assert issuer.requests == {}


def test_unknown_kids_refetch_once_per_cooldown(issuer: Issuer, client_for: ClientFor) -> None:
    """A flood of random kids within one cooldown: one fetch (the first token's), no more."""
    client = client_for(app_for(issuer, auth_jwks_cooldown_seconds=3600))
    stranger = Issuer(("ES256",))  # a new RSA key per kid would take seconds
    for _ in range(50):
        refused = post(client, stranger.token(kid=stranger.add_key("ES256")))
        assert_refused(refused, 401, invalid("the token's signing key is unknown"))
    assert issuer.requests[JWKS_PATH] == 1
    assert post(client, issuer.token()).status_code == 201  # known since that one fetch
    assert issuer.requests[JWKS_PATH] == 1


@pytest.mark.parametrize(
    "body",
    [
        b'{"keys": [[["nested"]], {"kid": "a"}]}',
        b'{"keys": [{"kid": "a", "kty": ["RSA"], "crv": {"x": 1}}]}',
        b'{"keys": [{"kid": "a", "kty": "RSA", "n": [1], "e": "AQAB"}]}',
        b'{"keys": [{"kid": "a", "kty": "EC", "crv": "P-256", "x": 7, "y": null}]}',
        b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=["nested arrays", "wrong-typed fields", "a list for a number", "numbers", "deep"],
)
def test_a_malformed_jwks_is_a_401_and_fetched_once_per_cooldown(
    issuer: Issuer, client_for: ClientFor, body: bytes
) -> None:
    """A JWKS a parser would choke on: each token request a 401, never a 500, the known keys
    kept, and the JWKS not fetched again before the cooldown."""
    client = client_for(app_for(issuer, auth_jwks_cooldown_seconds=3600))
    issuer.jwks_body = body
    for _ in range(3):
        refused = post(client, issuer.token())
        assert_refused(refused, 401, invalid("the token's signing key is unknown"))
    assert issuer.requests[JWKS_PATH] == 1


def test_a_trickling_provider_costs_one_fetch_budget_then_the_cooldown(
    issuer: Issuer, client_for: ClientFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discovery and the JWKS slower than the fetch's total budget: the token waiting on it is
    a 401 when the budget runs out, and the next ones do not fetch again (the cooldown)."""
    monkeypatch.setattr(keys, "FETCH_BUDGET_SECONDS", 0.2)
    client = client_for(app_for(issuer, auth_jwks_cooldown_seconds=3600))
    issuer.stall = 30.0
    for _ in range(3):
        refused = post(client, issuer.token())
        assert_refused(refused, 401, invalid("the token's signing key is unknown"))
    assert sum(issuer.requests.values()) == 1


def test_a_moved_jwks_uri_is_discovered_again(served: TestClient, issuer: Issuer) -> None:
    """The provider moves its keys (the old jwks_uri now 404): the next refetch asks discovery
    again, at once, and the new key verifies; no restart."""
    assert post(served, issuer.token()).status_code == 201
    issuer.jwks_path, moved = "certs-v2", issuer.add_key()
    time.sleep(1.05)  # the fixture's cooldown: 1 s
    assert post(served, issuer.token(kid=moved)).status_code == 201
    discovery, old, new = (
        f"/realms/service/{path}"
        for path in (".well-known/openid-configuration", "certs", "certs-v2")
    )
    assert issuer.requests == {discovery: 2, old: 2, new: 1}


def test_a_rotated_key_is_picked_up_after_the_cooldown(served: TestClient, issuer: Issuer) -> None:
    """A key the issuer adds later verifies once the cooldown allows a refetch; no restart."""
    assert post(served, issuer.token()).status_code == 201
    new_kid = issuer.add_key("ES256")
    del issuer.keys[next(iter(issuer.keys))]  # the old key retired at the provider
    time.sleep(1.05)  # the fixture's cooldown: 1 s
    assert post(served, issuer.token(kid=new_kid)).status_code == 201
    assert issuer.requests[JWKS_PATH] == 2


def test_the_provider_away_keeps_known_keys_and_fails_closed(
    served: TestClient, issuer: Issuer, json_lines: JsonLines
) -> None:
    """Known keys keep verifying while the provider answers 503; an unknown key is a 401,
    never a 500; the failed fetch is a warning naming no token."""
    token = issuer.token()
    assert post(served, token).status_code == 201
    issuer.down = True
    time.sleep(1.05)
    unknown = issuer.token(kid=issuer.add_key())
    assert_refused(post(served, unknown), 401, invalid("the token's signing key is unknown"))
    assert post(served, token).status_code == 201
    warnings = [line for line in json_lines.lines if line["level"] == "warning"]
    assert [line["message"] for line in warnings] == [
        "the issuer's keys could not be fetched; known keys kept"
    ]
    logged = json.dumps(json_lines.lines)
    assert token not in logged
    assert unknown.split(".")[2] not in logged


def test_start_up_and_readiness_do_not_need_the_provider(
    issuer: Issuer, client_for: ClientFor
) -> None:
    """The provider down from the start: the app starts, /readyz is 200, nothing fetched."""
    issuer.down = True
    client = client_for(app_for(issuer))
    assert client.get("/readyz").status_code == 200
    assert issuer.requests == {}
    assert_refused(post(client, issuer.token()), 401, invalid("the token's signing key is unknown"))


def test_a_discovery_document_naming_another_issuer_is_not_used(client_for: ClientFor) -> None:
    """OpenID Discovery 4.3: the document's issuer must be the configured one."""
    impostor = Issuer(url="https://issuer.test/realms/service/")  # a trailing slash is another
    client = client_for(trusting(create_app(Settings()), impostor))
    refused = post(client, impostor.token(iss=ISSUER))
    assert_refused(refused, 401, invalid("the token's signing key is unknown"))


def test_the_subject_is_in_the_access_line_and_the_token_nowhere(
    issuer: Issuer, client_for: ClientFor, json_lines: JsonLines
) -> None:
    """The app's access line names the verified sub; no log line holds any part of the token."""
    client = client_for(app_for(issuer, access_log=True))
    token = issuer.token(sub="svc-reporting")
    assert post(client, token).status_code == 201
    assert post(client, issuer.token(scope="")).status_code == 403
    assert client.get("/livez").status_code == 200
    access = [line for line in json_lines.lines if line["logger"].endswith(".access")]
    assert [line["subject"] for line in access] == ["svc-reporting", "client-1", None]
    logged = json.dumps(json_lines.lines)
    assert all(part not in logged for part in token.split("."))


@pytest.mark.parametrize("claim", ["scp", "roles"])
def test_the_scope_claim_is_a_setting(issuer: Issuer, client_for: ClientFor, claim: str) -> None:
    """Entra ID's "scp" (a string) or a "roles" list, as <PREFIX>AUTH_SCOPE_CLAIM says."""
    client = client_for(app_for(issuer, auth_scope_claim=claim))
    value: str | list[str] = "items:write" if claim == "scp" else ["admin", "items:write"]
    claims: dict[str, Any] = {"scope": None, claim: value}
    assert post(client, issuer.token(**claims)).status_code == 201
    assert post(client, issuer.token()).status_code == 403  # "scope" is not read any more


def test_openapi_declares_the_bearer_scheme_on_writes_only(issuer: Issuer) -> None:
    """/docs can send a token: HTTPBearer (JWT) is declared, POST /items requires it."""
    schema = app_for(issuer, api_docs=True).openapi()
    schemes = schema["components"]["securitySchemes"]
    assert schemes == {
        "HTTPBearer": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "An access token from the service's OpenID issuer (docs/auth.md)",
        }
    }
    assert schema["paths"]["/items"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in schema["paths"]["/items/{item_id}"]["get"]


def test_production_refuses_to_start_without_issuer_or_audience(
    issuer: Issuer, client_for: ClientFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line naming both variables; development may start without them: a write is then a
    401 saying so, never a fetch or a 500."""
    for name in ("AUTH_ISSUER", "AUTH_AUDIENCE"):
        with monkeypatch.context() as unset:
            unset.delenv(ENV_PREFIX + name)
            with pytest.raises(ValidationError) as refused:
                Settings()
            message = refused.value.errors()[0]["msg"]
            assert message == (
                f"Value error, {ENV_PREFIX}AUTH_ISSUER and {ENV_PREFIX}AUTH_AUDIENCE must be set "
                "in production: without them no token can be verified (docs/auth.md)"
            )
    monkeypatch.delenv(ENV_PREFIX + "AUTH_ISSUER")
    client = client_for(app_for(issuer, environment="development"))
    assert_refused(post(client, issuer.token()), 401, invalid("no issuer is configured"))
    assert issuer.requests == {}


@pytest.mark.parametrize(
    ("issuer_url", "refused"),
    [
        ("http://login.example.com/realms/a", True),
        ("http://10.0.0.7:8080/realms/a", True),
        ("http://127.0.0.1:8080/realms/a", False),
        ("http://localhost/realms/a", False),
        ("http://[::1]:8080/realms/a", False),
        ("https://login.example.com/realms/a", False),
    ],
)
def test_production_refuses_an_http_issuer_off_this_machine(
    monkeypatch: pytest.MonkeyPatch, issuer_url: str, *, refused: bool
) -> None:
    """A provider reached over plain HTTP across a network hands out the keys tokens are checked
    with to anyone on the path: refused in production, in one line; on this machine it is a
    provider beside the service (a sidecar, a test), and passes."""
    monkeypatch.setenv(ENV_PREFIX + "AUTH_ISSUER", issuer_url)
    if not refused:
        assert Settings().auth_issuer == issuer_url
        return
    with pytest.raises(ValidationError) as error:
        Settings()
    assert error.value.errors()[0]["msg"] == (
        f"Value error, {ENV_PREFIX}AUTH_ISSUER is http:// in production, off this machine: the "
        "keys that sign tokens would come unauthenticated; use its https:// URL"
    )
    assert Settings(environment="development").auth_issuer == issuer_url


def test_a_websocket_handshake_with_a_valid_token_opens_the_session(
    chat: TestClient, issuer: Issuer
) -> None:
    """The handshake's bearer token, verified as a request's: the route gets the principal, the
    connection's state the subject (as a request's state does)."""
    token = issuer.token(sub="svc-chat")
    with chat.websocket_connect("/_tests/chat", headers=bearer(token)) as session:
        assert session.receive_json() == ["svc-chat", "svc-chat"]


@pytest.mark.parametrize(
    ("headers", "status", "challenge"),
    [
        (lambda _: {}, 401, "Bearer"),
        (lambda _: bearer("not-a-jwt"), 401, invalid("the token is not a JWT")),
        (
            lambda issuer: bearer(issuer.token(scope="items:read")),
            403,
            'Bearer error="insufficient_scope", scope="items:write"',
        ),
    ],
    ids=["no-token", "garbage", "wrong-scope"],
)
def test_a_websocket_handshake_is_refused_as_a_request_is(
    chat: TestClient,
    issuer: Issuer,
    headers: Callable[[Issuer], dict[str, str]],
    status: int,
    challenge: str,
) -> None:
    """No token, a garbage one, one without the scope: the handshake's answer is the same 401
    or 403 as a request's (a denial response before any accept), never a 500."""
    with (
        pytest.raises(WebSocketDenialResponse) as refused,
        chat.websocket_connect("/_tests/chat", headers=headers(issuer)),
    ):
        pass
    denial = refused.value
    assert denial.status_code == status, denial.text
    assert denial.headers["www-authenticate"] == challenge
    body = denial.json()
    assert body["detail"]
    assert body["request_id"]


def test_the_jwks_parser_keeps_signing_keys_it_can_use_and_no_more() -> None:
    """Symmetric, encryption, kid-less, unknown-curve and disallowed keys are skipped; at most
    MAX_KEYS are read; a declared alg narrows the key to it."""
    issuer = Issuer(("RS256", "ES256"))
    rsa_key, ec_key = issuer.jwks()["keys"]
    document = {
        "keys": [
            rsa_key,
            ec_key,
            {**rsa_key, "kid": "enc", "use": "enc"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {**ec_key, "kid": None},
            {**ec_key, "kid": "k1", "crv": "secp256k1"},
            {**rsa_key, "kid": "ps", "alg": "PS256"},
            {**rsa_key, "kid": "hs", "alg": "HS256"},
        ]
    }
    keys = parse_jwks(document, ALLOWED)
    assert sorted(keys) == sorted(
        [
            (rsa_key["kid"], "RS256"),
            (rsa_key["kid"], "PS256"),
            (ec_key["kid"], "ES256"),
            ("ps", "PS256"),
        ]
    )
    flood = {"keys": [{**ec_key, "kid": str(n)} for n in range(MAX_KEYS * 4)]}
    assert len(parse_jwks(flood, ALLOWED)) == MAX_KEYS
    assert algorithms_for({"kty": "RSA"}, frozenset({"ES256"})) == frozenset()


def test_the_documented_route_examples_work(
    issuer: Issuer, client_for: ClientFor, project_root: Path
) -> None:
    """docs/auth.md's "Protecting a route" code, run as written: a scope on DELETE, the
    principal's subject on GET /me, both on the WebSocket route."""
    page = (project_root / "docs" / "auth.md").read_text(encoding="utf-8")
    section = page.partition("\n## Protecting a route\n")[2].split("\n## ")[0]
    source = "\n".join(re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL))
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/auth.md", "exec"), namespace)  # noqa: S102 (our own page)
    app = app_for(issuer)
    # Under /_tests/ (conftest.py): a team's own /me, say, must not answer for the page's.
    app.include_router(namespace["router"], prefix="/_tests")
    client = client_for(app)
    me = client.get("/_tests/me", headers=bearer(issuer.token(scope="", sub="svc-a")))
    assert (me.status_code, me.json()) == (200, {"subject": "svc-a"})
    assert_refused(client.get("/_tests/me"), 401, "Bearer")
    reader = bearer(issuer.token(scope="items:read"))
    refused = client.delete("/_tests/items/1", headers=reader)
    assert_refused(refused, 403, 'Bearer error="insufficient_scope", scope="items:write"')
    member = bearer(issuer.token(scope="chat:join", sub="svc-b"))
    with client.websocket_connect("/_tests/secure-chat", headers=member) as session:
        assert session.receive_text() == "hello svc-b"
    with (
        pytest.raises(WebSocketDenialResponse) as denied,
        client.websocket_connect("/_tests/secure-chat", headers=reader),
    ):
        pass
    assert denied.value.status_code == 403
