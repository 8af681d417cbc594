"""Health endpoints: /livez touches nothing, /readyz runs the registered checks."""

from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.testclient import TestClient

if TYPE_CHECKING:
    from {{ cookiecutter.package_name }}.api.readiness import ReadinessChecks
{%- if cookiecutter.database == "postgresql" %}

# The check the app registers itself, in its lifespan, against the tests' PostgreSQL.
BUILT_IN = {"database": "ok"}
{%- else %}

BUILT_IN: dict[str, str] = {}
{%- endif %}


async def ready() -> bool:
    return True


async def not_ready() -> bool:
    return False


def test_livez_answers_ok(client: TestClient) -> None:
    """GET /livez answers 200 without touching any dependency."""
    response = client.get("/livez")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_livez_ignores_failing_readiness(app: FastAPI, client: TestClient) -> None:
    """A failing dependency never makes the process look dead (no restart loops)."""
    checks: ReadinessChecks = app.state.readiness
    checks.add("db", not_ready)
    assert client.get("/livez").status_code == 200


def test_readyz_is_ready_without_checks(client: TestClient) -> None:
    """With nothing but the built-in checks registered the service is ready."""
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "failing": [], "checks": BUILT_IN}


def test_readyz_reports_passing_checks(app: FastAPI, client: TestClient) -> None:
    """Each passing check is listed as ok."""
    app.state.readiness.add("db", ready)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {**BUILT_IN, "db": "ok"}


def test_readyz_answers_503_naming_the_failing_check(app: FastAPI, client: TestClient) -> None:
    """One failing check makes the whole service unready, and the body names it."""
    app.state.readiness.add("db", ready)
    app.state.readiness.add("cache", not_ready)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not ready",
        "failing": ["cache"],
        "checks": {**BUILT_IN, "db": "ok", "cache": "failed"},
    }


def test_openapi_documents_the_503(app: FastAPI) -> None:
    """Clients reading the schema learn that /readyz may answer 503 with the same model."""
    responses = app.openapi()["paths"]["/readyz"]["get"]["responses"]
    assert set(responses) >= {"200", "503"}
