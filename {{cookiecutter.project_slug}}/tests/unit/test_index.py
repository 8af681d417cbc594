"""GET /: the service's name and the paths that answer."""

from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.main import TITLE, create_app
from {{ cookiecutter.package_name }}.settings import Settings


def test_index_names_the_service_and_links_health(client: TestClient) -> None:
    """Production: name and health checks, and no docs link (they are off)."""
    response = client.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "name": TITLE,
        "health": ["/livez", "/readyz"],
        "docs": None,
        "openapi": None,
    }


def test_index_links_docs_that_answer_in_development() -> None:
    """Development: every link the index gives answers 200."""
    with TestClient(create_app(Settings(environment="development"))) as client:
        index = client.get("/").json()
        links = [*index["health"], index["docs"], index["openapi"]]
        for link in links:
            assert client.get(link).status_code == 200, link
