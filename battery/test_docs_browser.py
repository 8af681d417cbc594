"""The API docs in a real browser: headless Chromium renders /docs through the live stack.

Offline: the page's assets come from the service itself, so it renders on a machine without
internet, and under its Content-Security-Policy, whose violations Chromium reports on its
console (the harness proves it sees them). Inputs: Debian's ``chromium`` on PATH (skipped,
saying so, where it is missing) and nginx, as every live test.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

from .conftest import PACKAGE, run_python, service_openapi

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from harness.stack import RunningStack

pytestmark = pytest.mark.live

API_DOCS = f"{PACKAGE.upper()}_API_DOCS"
ENVIRONMENT = f"{PACKAGE.upper()}_ENVIRONMENT"
OPERATION = re.compile(r'class="opblock-summary-path" data-path="([^"]+)"')


@pytest.fixture(scope="module")
def docs_csp() -> str:
    """The policy the service's docs page declares (api/docs.py), read by its interpreter."""
    found = run_python("-c", f"from {PACKAGE}.api.docs import DOCS_CSP; print(DOCS_CSP)")
    assert found.returncode == 0, found.stderr
    return found.stdout.strip()


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (sudo apt-get install -y chromium)")
    return found


def render(chromium: str, url: str, profile: Path) -> tuple[str, list[str]]:
    """Chromium's DOM after the page's scripts ran, and the CSP violations it reported."""
    command = [
        chromium,
        "--headless",
        "--disable-gpu",
        "--virtual-time-budget=8000",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={profile}",
        "--dump-dom",
        url,
    ]
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")  # Chromium refuses to sandbox as root
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    violations = [line for line in result.stderr.splitlines() if "Content Security Policy" in line]
    return result.stdout, violations


def status_and_csp(url: str) -> tuple[int, list[str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - loopback
            return response.status, response.headers.get_all("Content-Security-Policy") or []
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get_all("Content-Security-Policy") or []


def test_docs_render_every_operation_offline_under_their_csp(
    start_stack: Callable[..., RunningStack], chromium: str, docs_csp: str, tmp_path: Path
) -> None:
    """Development: /docs lists each operation, and Chromium reports no CSP violation."""
    stack = start_stack(**{ENVIRONMENT: "development"})
    status, policies = status_and_csp(f"{stack.base}/docs")
    assert status == 200
    assert policies == [docs_csp], "nginx must pass the page's own policy, and only it"
    dom, violations = render(chromium, f"{stack.base}/docs", tmp_path)
    assert violations == []
    assert set(service_openapi()["paths"]) <= set(OPERATION.findall(dom))


def test_docs_are_off_in_production(start_stack: Callable[..., RunningStack]) -> None:
    """By default production answers 404 for the page and the schema, through nginx."""
    stack = start_stack()
    for path in ["/docs", "/openapi.json", "/docs/assets/swagger-ui-bundle.js"]:
        status, policies = status_and_csp(f"{stack.base}{path}")
        assert status == 404, path
        assert policies == ["frame-ancestors 'none'"], "nginx's minimal policy, once"


def test_docs_can_be_turned_on_in_production(
    start_stack: Callable[..., RunningStack], docs_csp: str
) -> None:
    """The one setting publishes them in production."""
    stack = start_stack(**{API_DOCS: "true"})
    assert status_and_csp(f"{stack.base}/docs") == (200, [docs_csp])
    assert status_and_csp(f"{stack.base}/openapi.json")[0] == 200


@pytest.fixture
def inline_script_page() -> Iterator[str]:
    """A page whose inline script its own CSP forbids, from a throwaway loopback server."""
    body = b"<!doctype html><title>t</title><script>document.title = 'ran'</script>"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Security-Policy", "script-src 'self'")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_the_harness_sees_a_csp_violation(
    chromium: str, inline_script_page: str, tmp_path: Path
) -> None:
    """Control: a violation is reported, so an empty list above means none happened."""
    dom, violations = render(chromium, inline_script_page, tmp_path)
    assert len(violations) == 1
    assert "<title>t</title>" in dom
