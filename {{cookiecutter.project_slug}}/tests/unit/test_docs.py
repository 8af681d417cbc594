"""The API docs: served from local assets, with a CSP, on in development, off in production."""

import re

import pytest
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.api.docs import DOCS_CSP, _swagger_page
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import Settings

DOC_PATHS = ["/docs", "/openapi.json", "/docs/assets/swagger-ui-bundle.js", "/docs/swagger-init.js"]


def client_for(**settings: object) -> TestClient:
    return TestClient(create_app(Settings(**settings)))  # type: ignore[arg-type]


def test_docs_are_off_by_default_in_production() -> None:
    """With nothing set, production publishes neither the pages nor the schema."""
    with client_for() as client:
        for path in DOC_PATHS:
            assert client.get(path).status_code == 404, path
        assert client.get("/").json()["docs"] is None


def test_docs_are_on_by_default_in_development() -> None:
    """Development serves the pages, the schema and the assets."""
    with client_for(environment="development") as client:
        for path in DOC_PATHS:
            assert client.get(path).status_code == 200, path
        assert client.get("/").json()["docs"] == "/docs"


@pytest.mark.parametrize(
    ("environment", "api_docs"), [("production", True), ("development", False)]
)
def test_the_setting_overrides_the_environment(
    environment: str,
    api_docs: bool,  # noqa: FBT001 - a parameter, not a flag
) -> None:
    """``api_docs`` turns them on in production, or off in development."""
    with client_for(environment=environment, api_docs=api_docs) as client:
        for path in DOC_PATHS:
            assert (client.get(path).status_code == 200) is api_docs, path


def test_the_page_loads_nothing_from_elsewhere_and_carries_a_csp() -> None:
    """The page's scripts, styles and icon come from this origin; no inline script."""
    with client_for(environment="development") as client:
        page = client.get("/docs")
    assert page.headers["content-security-policy"] == DOCS_CSP
    for directive in ["script-src 'self';", "style-src 'self';", "frame-ancestors 'none'"]:
        assert directive in DOCS_CSP
    assert "unsafe" not in DOCS_CSP
    assert "http" not in page.text
    assert "<script>" not in page.text
    urls = re.findall(r'(?:src|href|data-openapi-url)="([^"]+)"', page.text)
    assert len(urls) == 5
    for url in urls:
        assert url.startswith("/"), url


def test_there_is_no_redoc_page() -> None:
    """ReDoc's bundle fetches from its CDN and needs inline styles: not served, even in dev."""
    with client_for(environment="development") as client:
        assert client.get("/redoc").status_code == 404


def test_the_assets_are_javascript_and_css() -> None:
    """The bundles are served with types a browser runs under nosniff."""
    with client_for(environment="development") as client:
        for name, kind in [
            ("swagger-ui-bundle.js", "javascript"),
            ("swagger-ui.css", "text/css"),
        ]:
            response = client.get(f"/docs/assets/{name}")
            assert kind in response.headers["content-type"], name
        assert "javascript" in client.get("/docs/swagger-init.js").headers["content-type"]


def test_the_title_is_escaped() -> None:
    """A project name with markup cannot inject into the page."""
    page = _swagger_page('<script>alert("x")</script>', "", "/openapi.json")
    assert "<script>alert" not in page
    assert "&lt;script&gt;" in page


def test_the_asset_mount_does_not_serve_outside_its_directory() -> None:
    """Path traversal through the asset mount finds nothing."""
    with client_for(environment="development") as client:
        for path in ["/docs/assets/../../settings.py", "/docs/assets/%2e%2e/core.py"]:
            assert client.get(path).status_code == 404, path
