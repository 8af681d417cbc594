"""Host handling: unknown hosts refused by nginx, redirects keep the client's port and scheme.

Class 2 of docs/security.md. ALLOWED_HOSTS (serving_stack/settings.py) becomes nginx's
$host_allowed map: a Host outside it is a JSON 400 from nginx, before the app; /livez and
/readyz answer any Host (Kubernetes probes send the pod's IP). The app builds redirects and
request.url from the Host nginx sends: the validated name and the client's own port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harness.clients import exchange, get, parse_response

from .conftest import needs_the_example, never_reaches_app, parse_json

if TYPE_CHECKING:
    from harness.stack import RunningStack

    from .conftest import Stacks

pytestmark = [pytest.mark.live]
live = pytest.mark.live


def raw_get(port: int, path: str, host: str | None, version: str = "1.1") -> bytes:
    host_line = "" if host is None else f"Host: {host}\r\n"
    wire = f"GET {path} HTTP/{version}\r\n{host_line}Connection: close\r\n\r\n"
    return exchange(port, wire.encode("latin-1"))


@live
@needs_the_example()
@pytest.mark.parametrize(
    "host", ["evil.example", "localhost.evil.example", "127.0.0.2", "_", "[::2]:8080"]
)
def test_unknown_host_is_refused_before_the_app(shared_stack: RunningStack, host: str) -> None:
    """A Host outside ALLOWED_HOSTS (default: localhost, 127.0.0.1, ::1) is nginx's JSON 400."""
    answers: list[bytes] = []

    def send() -> bytes:
        answers.append(raw_get(shared_stack.port, "/items/", host))
        return answers[0]

    assert never_reaches_app(shared_stack, send) == 400
    _, headers, body = parse_response(answers[0])
    assert parse_json(body) == {"detail": "Bad Request", "request_id": headers["x-request-id"]}


@live
@needs_the_example()
def test_redirect_keeps_the_clients_port(shared_stack: RunningStack) -> None:
    """Starlette's trailing-slash redirect points at the host and port the client used."""
    port = shared_stack.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        status, headers, _ = parse_response(raw_get(port, "/items/", host))
        assert status == 307
        assert headers["location"] == f"http://{host}/items"


@live
@needs_the_example()
def test_request_url_has_the_clients_host_and_port(shared_stack: RunningStack) -> None:
    """request.url in the app is the URL the client asked for, not the socket's."""
    port = shared_stack.port
    status, _, body = parse_response(raw_get(port, "/fault/headers?a=1", f"localhost:{port}"))
    assert status == 200
    assert parse_json(body)["url"] == f"http://localhost:{port}/fault/headers?a=1"


@live
@needs_the_example()
@pytest.mark.parametrize(
    ("path", "host", "version"),
    [
        ("/items/", None, "1.0"),
        ("/livez/", None, "1.0"),
        ("/livez", None, "1.0"),
        ("/readyz", "", "1.1"),
        ("/items/", "localhost:99999999", "1.1"),
        ("/items/", "localhost:", "1.1"),
        ("http://localhost/items/", "evil.example", "1.1"),
    ],
)
def test_no_answer_contains_an_internal_path(
    shared_stack: RunningStack, path: str, host: str | None, version: str
) -> None:
    """No Host, an empty or odd one: no answer names the run directory or the socket."""
    raw = raw_get(shared_stack.port, path, host, version)
    assert raw.startswith(b"HTTP/1.1 ")
    assert str(shared_stack.run_dir).encode() not in raw
    assert b".sock" not in raw
    assert b"unix:" not in raw


@live
@pytest.mark.parametrize("path", ["/livez", "/readyz"])
def test_probes_answer_any_host(shared_stack: RunningStack, path: str) -> None:
    """Kubernetes probes send the pod's IP as Host: health answers it."""
    status, _, _ = parse_response(raw_get(shared_stack.port, path, "10.1.2.3:8080"))
    assert status == 200


@live
def test_allowed_hosts_with_a_domain_and_its_subdomains(stacks: Stacks) -> None:
    """ALLOWED_HOSTS=".example.com, API.test": the domain, subdomains, api.test; not localhost."""
    stack = stacks.start(ALLOWED_HOSTS=".example.com, API.test")
    port = stack.port
    statuses = {
        host: parse_response(raw_get(port, "/fault/pid", host))[0]
        for host in ("example.com", "a.b.example.com", "api.test:443", "localhost", "example.co")
    }
    assert statuses == {
        "example.com": 200,
        "a.b.example.com": 200,
        "api.test:443": 200,
        "localhost": 400,
        "example.co": 400,
    }
    assert get(port, "/livez")[0] == 200


@live
def test_any_host_when_asked(stacks: Stacks) -> None:
    """ALLOWED_HOSTS=*: every Host reaches the app (for a platform that checks Host itself)."""
    stack = stacks.start(ALLOWED_HOSTS="*")
    assert parse_response(raw_get(stack.port, "/fault/pid", "anything.example"))[0] == 200


@live
@pytest.mark.parametrize("value", ["exa_mple.com", "-bad.com", "a..b", "x/y"])
def test_a_wrong_allowed_hosts_stops_the_supervisor_in_one_line(stacks: Stacks, value: str) -> None:
    """A malformed ALLOWED_HOSTS: exit 1 and one line naming the variable, before serving."""
    stack = stacks.start(ready=False, ALLOWED_HOSTS=value)
    assert stack.wait_exit(30) == 1
    errors = [line for line in stack.log_lines() if line.get("level") == "error"]
    assert len(errors) == 1, stack.log_text()
    message = str(errors[0]["message"])
    assert "ALLOWED_HOSTS" in message
    assert value in message
    assert "\n" not in message
    assert "Traceback" not in stack.log_text()
