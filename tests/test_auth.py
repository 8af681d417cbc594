"""auth=oidc: the service as an OAuth 2.0 resource server, against a real OpenID provider.

The provider is the certified `oidc-provider`, exactly as tests/oidc/package-lock.json locks
it (`npm ci` by harness/npm.py, once into the bakes' cache), on the machine's Node.js, run by
tests/oidc/provider.mjs. Its major is 8, not 9: 9 asks for Node.js 22 and calls URL.parse,
which Debian bookworm's nodejs (18.20, all a fresh machine's set-up gets) lacks. It issues JWT
access tokens by client credentials for one resource, rotates keys on request and counts each
path's requests. The service is the auth=oidc bake's whole stack (nginx -> unix socket ->
gunicorn), one worker, so the keys it caches are one worker's. auth=none bakes carry no trace
of the option. The bake's own tests/unit/test_auth.py covers the same refusals in process.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http.client
import json
import math
import os
import re
import shutil
import socket
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import harness.stack
from harness import procfs
from harness.clients import fetch, request
from harness.npm import install_locked
from harness.ports import free_port, wait_for
from harness.processes import Processes, wait_ready
from harness.stack import PATH, RunningStack

from .conftest import (
    CACHE_DIR,
    Bake,
    ProjectEnv,
    assert_lints_and_tests,
    assert_renders_cleanly,
    bake,
    install_env,
    run_captured,
    shared_bake,
)
from .selected_tests import generated_tests_for

PROVIDER_SCRIPT = Path(__file__).resolve().parent / "oidc" / "provider.mjs"
# provider.mjs mints tokens for this audience unless a client asks for another resource.
API = "https://api.test"
# Short, so rotation and the outage take seconds; the flood's bound is counted in it.
COOLDOWN_SECONDS = 2
# What auth=oidc adds; none of it may be in a bake without it.
AUTH_WORDS = re.compile(
    r"pyjwt|jwks|AUTH_ISSUER|require_scopes|bearer|token_issuer|dev_issuer", re.I
)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parts(token: str) -> tuple[dict[str, object], dict[str, object], str]:
    """A JWT's header and claims, decoded, and its signature as sent."""
    header, claims, signature = token.split(".")
    return json.loads(unb64(header)), json.loads(unb64(claims)), signature


def reassemble(header: dict[str, object], claims: dict[str, object], signature: str) -> str:
    encoded = [b64(json.dumps(part).encode()) for part in (header, claims)]
    return ".".join([*encoded, signature])


@dataclass
class Provider:
    """One provider.mjs process: its issuer URL, requests to it, tokens from it."""

    processes: Processes
    issuer: str

    def _call(self, method: str, path: str, body: str = "", **headers: str) -> bytes:
        url = urllib.parse.urlsplit(self.issuer)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        with contextlib.closing(connection):
            connection.request(method, path, body, headers)
            answer = connection.getresponse()
            data = answer.read()
        assert answer.status == 200, data
        return data

    def token(self, client: str = "writer", scope: str = "items:write", resource: str = API) -> str:
        """An access token by client credentials (client_secret_basic)."""
        form = urllib.parse.urlencode(
            {"grant_type": "client_credentials", "scope": scope, "resource": resource}
        )
        basic = base64.b64encode(f"{client}:{client}-secret".encode()).decode()
        headers = {
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
        }
        answer = json.loads(self._call("POST", "/token", form, **headers))
        token: str = answer["access_token"]
        return token

    def requests(self, path: str) -> int:
        """How many requests for ``path`` the provider has answered."""
        count: int = json.loads(self._call("GET", "/admin/stats")).get(path, 0)
        return count

    def rotate(self) -> str:
        """A new signing key; its kid."""
        kid: str = json.loads(self._call("POST", "/admin/rotate"))["kid"]
        return kid

    def public_pem(self) -> bytes:
        return self._call("GET", "/admin/pem")

    def stop(self) -> None:
        self.processes.stop_all()


@pytest.fixture(scope="module")
def provider_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """provider.mjs beside tests/oidc's locked node_modules (installed once, then cached)."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed (sudo apt-get install -y nodejs)")
    here = tmp_path_factory.mktemp("oidc")
    (here / "node_modules").symlink_to(install_locked(PROVIDER_SCRIPT.parent, CACHE_DIR))
    shutil.copy(PROVIDER_SCRIPT, here / "provider.mjs")
    return here / "provider.mjs"


def start_provider(script: Path, keys: Path) -> Provider:
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    processes = Processes()
    argv = ["node", str(script), str(port), issuer, str(keys)]
    log = script.parent / f"provider-{port}.log"
    process = processes.start("provider.mjs", argv, os.environ, script.parent, log)
    wait_ready(process, ("127.0.0.1", port), "/admin/stats", 30)
    return Provider(processes, issuer)


@pytest.fixture(scope="module")
def provider(provider_script: Path) -> Iterator[Provider]:
    started = start_provider(provider_script, provider_script.parent / "keys.json")
    yield started
    started.stop()


@pytest.fixture(scope="module")
def auth_bake(shared_tmp: Path) -> Bake:
    """The project rendered with auth=oidc, the other answers default (read only)."""
    return shared_bake(shared_tmp / "auth", auth="oidc")


@pytest.fixture(scope="module")
def auth_env(auth_bake: Bake, project_env: ProjectEnv) -> ProjectEnv:
    """The auth bake's dependencies (PyJWT, httpx on top of the default's), cached. mypy's
    cache is the option bakes': mypy checks each cached module against its source file, so
    bakes can share it (make lint's mypy: 11 s with a cache of its own, 3 s with this one)."""
    venv = install_env(auth_bake.project)
    return ProjectEnv(venv=venv, mypy_cache=project_env.mypy_cache)


def call(
    stack: RunningStack, method: str, path: str, token: str | None = None, body: object = None
) -> tuple[int, dict[str, str], dict[str, object]]:
    """Status, headers (lower case) and JSON body of one request through nginx."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    data = b"" if body is None else json.dumps(body).encode()
    status, fields, raw = request(stack.port, method, path, data, headers=headers, timeout=15)
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = {"raw": raw.decode("latin-1")}
    return status, fields, parsed


def write(stack: RunningStack, token: str | None) -> tuple[int, dict[str, str], dict[str, object]]:
    return call(stack, "POST", "/items", token, {"name": "lamp", "price_cents": 1999})


def access_lines(stack: RunningStack) -> list[dict[str, object]]:
    """The app's access lines (its logger is <package>.access; nginx's is nginx.access)."""
    return [
        line
        for line in stack.log_lines()
        if str(line.get("logger")).endswith(".access") and line.get("logger") != "nginx.access"
    ]


@pytest.fixture(scope="module")
def stack(
    auth_bake: Bake,
    auth_env: ProjectEnv,
    provider: Provider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningStack]:
    """The bake's production stack trusting ``provider``: one worker, its access line on."""
    if shutil.which("nginx", path=PATH) is None:
        pytest.skip("nginx is not installed (sudo apt-get install -y nginx-light)")
    prefix = auth_bake.package_name.upper()
    environment = auth_env.environ(auth_bake.project) | {
        "WEB_CONCURRENCY": "1",
        "NGINX_WORKER_PROCESSES": "1",
        "APP_MODULE": f"{auth_bake.package_name}.main:app",
        f"{prefix}_ACCESS_LOG": "true",
        f"{prefix}_AUTH_ISSUER": provider.issuer,
        f"{prefix}_AUTH_AUDIENCE": API,
        f"{prefix}_AUTH_LEEWAY_SECONDS": "0",
        f"{prefix}_AUTH_JWKS_COOLDOWN_SECONDS": str(COOLDOWN_SECONDS),
        **({"SERVE_AS_ROOT": "on"} if os.geteuid() == 0 else {}),
    }
    processes = Processes()
    try:
        served = harness.stack.start(
            processes,
            tmp_path_factory.mktemp("auth-stack"),
            environment,
            python=str(auth_env.venv / "bin" / "python"),
            cwd=auth_bake.project,
        )
        served.wait_ready("/readyz", 90)
        yield served
    finally:
        processes.stop_all()


def assert_refused(
    answer: tuple[int, dict[str, str], dict[str, object]], status: int, challenge: str
) -> None:
    """The app's JSON error with the request id, and the RFC 6750 challenge."""
    code, headers, body = answer
    assert code == status, body
    assert headers["www-authenticate"] == challenge
    assert body["request_id"] == headers["x-request-id"], body


def invalid(description: str) -> str:
    return f'Bearer error="invalid_token", error_description="{description}"'


@pytest.mark.slow
def test_a_valid_token_writes_and_reads_stay_open(stack: RunningStack, provider: Provider) -> None:
    """valid: a writer's token creates an item (its subject in the access line); reads,
    /livez and /readyz need none; no token at all is a 401 with the bare challenge."""
    status, headers, item = write(stack, provider.token())
    assert status == 201, item
    assert call(stack, "GET", f"/items/{item['id']}")[0] == 200
    assert call(stack, "GET", "/livez")[0] == 200
    assert call(stack, "GET", "/readyz")[0] == 200
    assert_refused(write(stack, None), 401, "Bearer")

    def written() -> list[dict[str, object]]:
        return [ln for ln in access_lines(stack) if ln["request_id"] == headers["x-request-id"]]

    wait_for(lambda: bool(written()), 10, "the write's access line")
    [line] = written()
    assert (line["status"], line["subject"]) == (201, "writer")


@pytest.mark.slow
def test_a_token_without_the_scope_is_a_403(stack: RunningStack, provider: Provider) -> None:
    """insufficient_scope: the reader client's token holds items:read only."""
    token = provider.token("reader", scope="items:read")
    assert parts(token)[1]["scope"] == "items:read"
    challenge = 'Bearer error="insufficient_scope", scope="items:write"'
    assert_refused(write(stack, token), 403, challenge)


@pytest.mark.slow
def test_an_expired_token_is_a_401(stack: RunningStack, provider: Provider) -> None:
    """expired: the "short" client's tokens live 1 s; the stack's leeway here is 0."""
    token = provider.token("short")
    time.sleep(2.1)
    assert_refused(write(stack, token), 401, invalid("the token has expired"))


@pytest.mark.slow
def test_a_token_for_another_audience_is_a_401(stack: RunningStack, provider: Provider) -> None:
    """wrong audience: minted by the same issuer and key for another resource."""
    token = provider.token(resource="https://other.test")
    assert parts(token)[1]["aud"] == "https://other.test"
    assert_refused(write(stack, token), 401, invalid("the token is invalid"))


@pytest.mark.slow
def test_a_token_from_another_issuer_is_a_401(
    stack: RunningStack, provider: Provider, provider_script: Path
) -> None:
    """wrong issuer: a second provider signing with the very same keys (the kid is known)."""
    other = start_provider(provider_script, provider_script.parent / "keys.json")
    try:
        token = other.token()
    finally:
        other.stop()
    assert parts(token)[0]["kid"] == parts(provider.token())[0]["kid"]
    assert_refused(write(stack, token), 401, invalid("the token is invalid"))


@pytest.mark.slow
def test_a_tampered_token_is_a_401(stack: RunningStack, provider: Provider) -> None:
    """tampered: the reader's token with items:write added after signing."""
    header, claims, signature = parts(provider.token("reader", scope="items:read"))
    forged = reassemble(header, {**claims, "scope": "items:write"}, signature)
    assert_refused(write(stack, forged), 401, invalid("the token is invalid"))


@pytest.mark.slow
def test_alg_none_and_hs256_with_the_public_key_are_401s(
    stack: RunningStack, provider: Provider
) -> None:
    """alg none, and HS256 keyed with the provider's published public key (key confusion)."""
    header, claims, _ = parts(provider.token())
    unsigned = reassemble({**header, "alg": "none"}, claims, "")
    assert_refused(write(stack, unsigned), 401, invalid("the token's algorithm is not allowed"))
    signing_input = ".".join(
        b64(json.dumps(p).encode()) for p in ({**header, "alg": "HS256"}, claims)
    )
    mac = hmac.new(provider.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    confused = f"{signing_input}.{b64(mac)}"
    assert_refused(write(stack, confused), 401, invalid("the token's algorithm is not allowed"))


@pytest.mark.slow
def test_a_token_naming_an_unknown_key_is_a_401(stack: RunningStack, provider: Provider) -> None:
    """unknown kid: a valid token's header pointing at a key the provider never published."""
    header, claims, signature = parts(provider.token())
    relabelled = reassemble({**header, "kid": uuid.uuid4().hex}, claims, signature)
    assert_refused(write(stack, relabelled), 401, invalid("the token's signing key is unknown"))


@pytest.mark.slow
def test_a_rotated_key_is_picked_up_without_a_restart(
    stack: RunningStack, provider: Provider
) -> None:
    """rotation: the provider's new key signs the next token; the same worker verifies it
    once the cooldown allows a refetch."""
    worker_pids, fetches = pids_of(stack), provider.requests("/jwks")
    new_kid = provider.rotate()
    token = provider.token()
    assert parts(token)[0]["kid"] == new_kid
    time.sleep(COOLDOWN_SECONDS + 0.1)
    assert write(stack, token)[0] == 201
    assert pids_of(stack) == worker_pids
    assert provider.requests("/jwks") == fetches + 1


def pids_of(stack: RunningStack) -> set[int]:
    """The stack's process tree below the supervisor (nginx, gunicorn, its worker)."""
    return {proc.pid for proc in procfs.tree(stack.process.pid)} - {stack.process.pid}


@pytest.mark.slow
def test_a_flood_of_random_kids_refetches_no_more_than_the_cooldown_allows(
    stack: RunningStack, provider: Provider
) -> None:
    """200 tokens naming random kids: every one a 401, never a 5xx; the JWKS fetched at most
    once per cooldown of the flood's duration (counted at the provider), plus one."""
    header, claims, signature = parts(provider.token())
    before, start = provider.requests("/jwks"), time.monotonic()
    statuses = [
        write(stack, reassemble({**header, "kid": uuid.uuid4().hex}, claims, signature))[0]
        for _ in range(200)
    ]
    elapsed = time.monotonic() - start
    fetches = provider.requests("/jwks") - before
    assert set(statuses) == {401}
    assert fetches <= math.ceil(elapsed / COOLDOWN_SECONDS) + 1, (fetches, elapsed)


@pytest.mark.slow
def test_a_16_kb_token_is_refused_by_nginx_before_the_app(
    stack: RunningStack, provider: Provider
) -> None:
    """A 16 KB Authorization header: nginx's 400 (its header buffers are 8 KB); no app line."""
    huge = provider.token() + "A" * (16 * 1024)
    status, refused, _ = write(stack, huge)
    assert status == 400
    status, answered, _ = call(stack, "GET", "/livez")
    assert status == 200

    # By request id: an earlier test's lines may still be on their way through the relay.
    def logged() -> set[object]:
        return {line.get("request_id") for line in access_lines(stack)}

    wait_for(lambda: answered["x-request-id"] in logged(), 10, "the /livez access line")
    assert refused["x-request-id"] not in logged()


@pytest.mark.slow
def test_no_token_reaches_the_logs(stack: RunningStack, provider: Provider) -> None:
    """Every line every process wrote so far: no token's signature in any of them."""
    token = provider.token()
    assert write(stack, token)[0] == 201
    time.sleep(0.5)
    text = stack.log_text()
    assert parts(token)[2] not in text
    assert "Bearer ey" not in text


@pytest.mark.slow
def test_the_provider_stopped_known_keys_verify_unknown_fail_closed(
    stack: RunningStack, provider: Provider
) -> None:
    """provider stopped (last: it stops the module's provider): a token from a key the worker
    knows still writes, one from a key it never saw is a 401 (never a 500), /readyz is 200."""
    known = provider.token()
    time.sleep(COOLDOWN_SECONDS + 0.1)
    assert write(stack, known)[0] == 201
    provider.rotate()
    unseen = provider.token()
    provider.stop()
    time.sleep(COOLDOWN_SECONDS + 0.1)
    assert_refused(write(stack, unseen), 401, invalid("the token's signing key is unknown"))
    assert write(stack, known)[0] == 201
    assert call(stack, "GET", "/readyz")[0] == 200
    warnings = [line for line in stack.log_text().splitlines() if "could not be fetched" in line]
    assert warnings, "the failed fetch is logged"


@pytest.mark.slow
def test_the_auth_bake_lints_and_passes_its_own_tests(
    auth_bake: Bake, auth_env: ProjectEnv, default_bake: Bake
) -> None:
    """make lint, and make test of the tests auth=oidc can change: every unit test (its own
    test_auth.py among them). The stack's tests and the live ones run the same bytes on the
    same package versions in the default bake's full suite; this module serves the auth
    bake's whole stack against a real provider."""
    assert_renders_cleanly(auth_bake)
    selected = generated_tests_for(auth_bake.project, default_bake.project)
    assert "tests/unit" in selected, selected
    assert_lints_and_tests(auth_env, auth_bake.project, *selected)


def documented(project: Path, heading: str, language: str) -> list[str]:
    """The ```language blocks of the bake's docs/auth.md section ``heading``, as copied."""
    page = (project / "docs" / "auth.md").read_text(encoding="utf-8")
    section = page.partition(f"\n## {heading}\n")[2].split("\n## ")[0]
    blocks = re.findall(rf"^```{language}\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert blocks, f"docs/auth.md: no {language} block under ## {heading}"
    return blocks


def write_on(port: int, token: str | None) -> int:
    """The status of POST /items to make run's server on ``port``, with ``token`` if any."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    item = json.dumps({"name": "lamp", "price_cents": 1999}).encode()
    return request(port, "POST", "/items", item, headers=headers)[0]


@pytest.mark.slow
def test_the_local_development_commands_write_with_the_issuers_token(
    auth_bake: Bake, auth_env: ProjectEnv, tmp_path: Path
) -> None:
    """docs/auth.md's Local development, its blocks run as written on free ports (ISSUER_PORT
    and PORT, which the page and the Makefile name): make issuer prints exactly the settings
    the page exports; make run with them takes the page's curl write (201), the token make
    issuer printed (201); no token is a 401, a token the issuer signs for another scope a 403."""
    serve, settings, write = documented(auth_bake.project, "Local development", "sh")
    issuer_port, app_port = free_port(), free_port()

    def ported(block: str) -> str:
        return block.replace(":8900", f":{issuer_port}").replace(":8000", f":{app_port}")

    environment = auth_env.environ(auth_bake.project) | {
        "VENV": str(auth_env.venv),
        "ISSUER_PORT": str(issuer_port),
        "PORT": str(app_port),
    }
    processes = Processes()
    try:
        issuer_log = tmp_path / "issuer.log"
        issuer = processes.start(
            "make issuer", ["bash", "-c", serve], environment, auth_bake.project, issuer_log
        )
        wait_ready(issuer, ("127.0.0.1", issuer_port), "/realms/service/certs", 30)
        printed = issuer_log.read_text(encoding="utf-8").splitlines()
        exports = [line for line in ported(settings).splitlines() if line.startswith("export ")]
        assert len(exports) == 2
        assert [line for line in printed if line.startswith("export ")][:2] == exports, printed
        [token] = [line.removeprefix("export TOKEN=") for line in printed if "TOKEN=" in line]
        run = processes.start(
            "make run", ["bash", "-c", ported(settings)], environment, auth_bake.project
        )
        wait_ready(run, ("127.0.0.1", app_port), "/livez", 60)
        curl = run_captured(["bash", "-euc", ported(write)], env=environment)
        assert curl.stdout.startswith("HTTP/1.1 201 Created"), curl.stdout + curl.stderr
        assert write_on(app_port, token) == 201
        assert write_on(app_port, None) == 401
        status, _, reader = fetch(f"http://127.0.0.1:{issuer_port}/token?scope=items:read")
        assert status == 200
        assert write_on(app_port, reader.decode()) == 403
    finally:
        processes.stop_all()


@pytest.mark.slow
def test_the_development_issuer_refuses_bad_flags_in_one_line(
    auth_bake: Bake, auth_env: ProjectEnv
) -> None:
    """An address off loopback (it signs for anyone who asks), a port out of range or not a
    number, a port already taken: each one line on stderr, a non-zero exit, nothing served."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    with taken:
        cases = {
            "--host=0.0.0.0": "'0.0.0.0' is not this machine's loopback",
            "--host=192.0.2.1": "'192.0.2.1' is not this machine's loopback",
            "--port=70000": "'70000' is not a port from 1 to 65535",
            "--port=http": "'http' is not a port from 1 to 65535",
            f"--port={taken.getsockname()[1]}": "cannot listen on 127.0.0.1:",
        }
        for flag, message in cases.items():
            python = str(auth_env.venv / "bin" / "python")
            done = run_captured(
                [python, "tests/dev_issuer.py", flag],
                cwd=auth_bake.project,
                env=auth_env.environ(auth_bake.project),
            )
            assert done.returncode != 0, flag
            assert len(done.stderr.splitlines()) == 1, done.stderr
            assert done.stderr.startswith("dev_issuer: error: "), done.stderr
            assert message in done.stderr, done.stderr


@pytest.mark.slow
def test_the_documented_protected_route_test_passes_in_a_team_s_project(
    auth_bake: Bake, auth_env: ProjectEnv, tmp_path: Path
) -> None:
    """docs/auth.md's first route example saved as api/account.py and included in
    create_app(), as the page says, and its Test a protected route example saved as
    tests/unit/test_account.py: make lint and make test pass with them (the page's example
    a team copies, its asserts on 200, 403 and 401 run)."""
    project = tmp_path / auth_bake.project.name
    shutil.copytree(
        auth_bake.project,
        project,
        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".ruff_cache", ".coverage"),
    )
    package = project / "src" / auth_bake.package_name
    route = documented(project, "Protecting a route", "python")[0]
    (package / "api" / "account.py").write_text(route, encoding="utf-8")
    main = (package / "main.py").read_text(encoding="utf-8")
    included = "    application.include_router(items.router)\n"
    assert main.count(included) == 1
    main = main.replace(included, included + "    application.include_router(account.router)\n")
    main = main.replace("from .api import health,", "from .api import account, health,")
    (package / "main.py").write_text(main, encoding="utf-8")
    [example] = documented(project, "Test a protected route", "python")
    (project / "tests" / "unit" / "test_account.py").write_text(example, encoding="utf-8")
    assert_lints_and_tests(auth_env, project, "tests/unit/test_account.py")


def test_none_bakes_carry_no_trace_of_auth(default_bake: Bake) -> None:
    """auth=none: no auth file, dependency, variable or word (docs/security.md aside)."""
    project = default_bake.project
    assert not (project / "src" / default_bake.package_name / "auth").exists()
    assert not (project / "tests" / "token_issuer.py").exists()
    assert not (project / "tests" / "dev_issuer.py").exists()
    assert not (project / "docs" / "auth.md").exists()
    found = [
        f"{path.relative_to(project)}: {match.group()}"
        for path in sorted(project.rglob("*"))
        if path.is_file() and path.suffix not in {".png", ".json"}
        for match in AUTH_WORDS.finditer(path.read_text(encoding="utf-8", errors="ignore"))
    ]
    assert found == []


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"auth": "oidc", "layout": "serving-only"}, "auth=oidc needs layout=service"),
        ({"auth": "oidc", "package_name": "jwt"}, "package_name 'jwt' would shadow auth=oidc's"),
    ],
)
def test_auth_answers_that_cannot_work_are_refused(
    tmp_path: Path, answers: dict[str, str], message: str
) -> None:
    """One line naming the answer; nothing is left behind."""
    result = bake(tmp_path, **answers)
    assert result.exit_code != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert message in errors[0]
    assert list(tmp_path.iterdir()) == []
