"""GET / and the API docs (api/docs.py); needs the app (conftest.py's clients). In a real
browser, offline: the template's battery (test_docs_browser.py)."""

import re

import pytest
from fastapi import FastAPI

from {{ cookiecutter.package_name }}.api.docs import DOCS_CSP, add_api_docs
from {{ cookiecutter.package_name }}.main import TITLE, create_app
from {{ cookiecutter.package_name }}.settings import Settings

from .conftest import ClientFor


@pytest.mark.parametrize(
    ("chosen", "on"),
    [
        ({}, False),
        ({"environment": "development"}, True),
        ({"api_docs": True}, True),
        ({"environment": "development", "api_docs": False}, False),
    ],
)
def test_the_docs_follow_the_environment_and_the_index_links_what_answers(
    client_for: ClientFor, chosen: dict[str, object], *, on: bool
) -> None:
    """Docs answer only where on; every link GET / gives (health, and docs if on) answers."""
    client = client_for(create_app(Settings.model_validate(chosen)))
    paths = ["/docs", "/openapi.json", "/docs/assets/swagger-ui.css", "/docs/swagger-init.js"]
    assert [client.get(path).status_code for path in paths] == [200 if on else 404] * 4
    index = client.get("/").json()
    assert (index["name"], index["docs"] is not None) == (TITLE, on)
    for link in [*index["health"], index["docs"], index["openapi"]]:
        assert link is None or client.get(link).status_code == 200, link


def test_the_page_loads_nothing_from_elsewhere_under_a_csp(client_for: ClientFor) -> None:
    """Only this origin's assets, no inline script, no path outside them, the title escaped."""
    client = client_for(create_app(Settings(environment="development")))
    page = client.get("/docs")
    assert page.headers["content-security-policy"] == DOCS_CSP
    assert "unsafe" not in DOCS_CSP
    assert ("http" in page.text, "<script>" in page.text) == (False, False)
    urls = re.findall(r'(?:src|href|data-openapi-url)="([^"]+)"', page.text)
    assert (len(urls), [url for url in urls if not url.startswith("/")]) == (5, [])
    for path in ["/redoc", "/docs/assets/../../settings.py", "/docs/assets/%2e%2e/core.py"]:
        assert client.get(path).status_code == 404, path
    hostile = FastAPI(title="<script>alert(1)</script>", docs_url=None, redoc_url=None)
    add_api_docs(hostile)
    titled = client_for(hostile).get("/docs").text
    assert ("<script>alert" in titled, "&lt;script&gt;" in titled) == (False, True)
