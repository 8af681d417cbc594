"""Smoke test of the application factory."""

from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.main import create_app


def test_livez_answers_ok() -> None:
    """GET /livez answers 200 without touching any dependency."""
    with TestClient(create_app()) as client:
        response = client.get("/livez")
    assert response.status_code == 200
