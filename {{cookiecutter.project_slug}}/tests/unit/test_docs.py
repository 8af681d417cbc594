"""GET / and the API docs: an index of the links that answer; the docs served from local
assets under a CSP, on in development, off in production, and the setting overriding both.

Needs the app (conftest.py's clients); the Swagger UI bundle from fastapi-offline.
"""

import re

import pytest

from {{ cookiecutter.package_name }}.api.docs import DOCS_CSP, _swagger_page
from {{ cookiecutter.package_name }}.main import TITLE, create_app
from {{ cookiecutter.package_name }}.settings import Settings

from .asgi import ClientFor

DOC_PATHS = ["/docs", "/openapi.json", "/docs/assets/swagger-ui-bundle.js", "/docs/swagger-init.js"]


@pytest.mark.parametrize(
    ("environment", "api_docs", "on"),
    [("production", None, False), ("development", None, True),
     ("production", True, True), ("development", False, False)],
)  # fmt: skip
def test_the_docs_follow_the_environment_unless_set_and_the_index_links_what_answers(
    client_for: ClientFor, environment: str, *, api_docs: bool | None, on: bool
) -> None:
    """Pages, schema and assets answer only where on; GET / names the service and links the
    health checks and, where on, the docs: every link it gives answers 200."""
    chosen: dict[str, object] = {"environment": environment}
    if api_docs is not None:
        chosen["api_docs"] = api_docs
    client = client_for(create_app(Settings.model_validate(chosen)))
    assert [client.get(path).status_code for path in DOC_PATHS] == [200 if on else 404] * 4
    index = client.get("/").json()
    assert (index["name"], index["health"]) == (TITLE, ["/livez", "/readyz"])
    assert (index["docs"], index["openapi"]) == (("/docs", "/openapi.json") if on else (None, None))
    for link in [*index["health"], *filter(None, [index["docs"], index["openapi"]])]:
        assert client.get(link).status_code == 200, link


def test_the_page_loads_nothing_from_elsewhere_under_a_csp(client_for: ClientFor) -> None:
    """Scripts, styles and icon from this origin, no inline script, types a browser runs
    under nosniff; no ReDoc (it needs a CDN); the mount serves nothing outside its folder."""
    client = client_for(create_app(Settings(environment="development")))
    page = client.get("/docs")
    assert page.headers["content-security-policy"] == DOCS_CSP
    for directive in ["script-src 'self';", "style-src 'self';", "frame-ancestors 'none'"]:
        assert directive in DOCS_CSP
    assert "unsafe" not in DOCS_CSP
    assert ("http" in page.text, "<script>" in page.text) == (False, False)
    urls = re.findall(r'(?:src|href|data-openapi-url)="([^"]+)"', page.text)
    assert len(urls) == 5
    assert all(url.startswith("/") for url in urls), urls
    for path, kind in [("/docs/assets/swagger-ui-bundle.js", "javascript"),
                       ("/docs/assets/swagger-ui.css", "text/css"),
                       ("/docs/swagger-init.js", "javascript")]:  # fmt: skip
        assert kind in client.get(path).headers["content-type"], path
    for path in ["/redoc", "/docs/assets/../../settings.py", "/docs/assets/%2e%2e/core.py"]:
        assert client.get(path).status_code == 404, path


def test_the_title_is_escaped() -> None:
    """A project name with markup cannot inject into the page."""
    page = _swagger_page('<script>alert("x")</script>', "", "/openapi.json")
    assert "<script>alert" not in page
    assert "&lt;script&gt;" in page
