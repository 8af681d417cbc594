"""The application factory: settings, lifespan, and the middleware working together."""

import asyncio

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }} import main
from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings

from .logcapture import JsonLines


def add_failing_routes(app: FastAPI) -> None:
    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    @app.get("/slow")
    async def slow() -> None:
        await asyncio.sleep(5)


def test_the_module_exposes_an_app_for_servers() -> None:
    """``main:app`` is what gunicorn and uvicorn import."""
    assert isinstance(main.app, FastAPI)


def test_the_openapi_title_is_the_project_name(app: FastAPI) -> None:
    """The schema's title and description come from the project's answers."""
    info = app.openapi()["info"]
    assert info["title"] == main.TITLE
    assert info["description"] == main.DESCRIPTION
    assert info["title"]


def test_settings_default_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an argument the factory reads the prefixed variables."""
    monkeypatch.setenv(ENV_PREFIX + "REQUEST_TIMEOUT_SECONDS", "7")
    assert create_app().state.settings.request_timeout_seconds == 7


def test_unsafe_production_settings_stop_the_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Debug in production fails at import time, before a worker serves anything."""
    monkeypatch.setenv(ENV_PREFIX + "DEBUG", "true")
    with pytest.raises(ValueError, match=ENV_PREFIX + "DEBUG"):
        create_app()


def test_lifespan_logs_start_and_stop(json_lines: JsonLines) -> None:
    """Start and stop each leave one line from the application's logger."""
    with TestClient(create_app(Settings())):
        pass
    messages = [line["message"] for line in json_lines.from_logger(main.__name__)]
    assert messages == ["application starting", "application stopped"]


def test_every_response_carries_a_request_id(client: TestClient) -> None:
    """Successful, missing and invalid requests all echo an id."""
    for response in [client.get("/livez"), client.get("/nope"), client.get("/items/x")]:
        assert len(response.headers["x-request-id"]) == 32


def test_the_500_carries_the_request_id_and_is_access_logged(json_lines: JsonLines) -> None:
    """The error guard sits inside the request id and access log middleware."""
    app = create_app(Settings(access_log=True))
    add_failing_routes(app)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom", headers={"x-request-id": "trace-500"})
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "trace-500"
    assert response.json()["request_id"] == "trace-500"
    [access] = [
        line for line in json_lines.from_logger(main.ACCESS_LOGGER) if line["status"] == 500
    ]
    assert access["request_id"] == "trace-500"


def test_the_504_carries_the_request_id_and_is_access_logged(json_lines: JsonLines) -> None:
    """The deadline sits inside the request id and access log middleware."""
    app = create_app(Settings(request_timeout_seconds=0.1, access_log=True))
    add_failing_routes(app)
    with TestClient(app) as client:
        response = client.get("/slow", headers={"x-request-id": "trace-504"})
    assert response.status_code == 504
    assert response.headers["x-request-id"] == "trace-504"
    assert response.json()["request_id"] == "trace-504"
    [access] = [
        line for line in json_lines.from_logger(main.ACCESS_LOGGER) if line["status"] == 504
    ]
    assert access["request_id"] == "trace-504"
    assert access["duration_ms"] >= 100


def test_handler_logs_carry_the_request_id(json_lines: JsonLines) -> None:
    """A log line written inside an endpoint names the request it served."""
    app = create_app(Settings())

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        main.logger.info("inside the handler")
        return {}

    with TestClient(app) as client:
        response = client.get("/hello")
    [line] = [line for line in json_lines.lines if line["message"] == "inside the handler"]
    assert line["request_id"] == response.headers["x-request-id"]


def test_development_logs_are_human_readable(capsys: pytest.CaptureFixture[str]) -> None:
    """In development the lifespan configures text lines instead of JSON."""
    with TestClient(create_app(Settings(environment="development"))) as client:
        client.get("/livez")
    out = capsys.readouterr().out
    assert "application starting" in out
    assert not any(line.startswith("{") for line in out.splitlines())


def test_access_log_is_off_by_default_and_on_when_asked(json_lines: JsonLines) -> None:
    """By default only nginx logs requests; ACCESS_LOG=true adds the app's own line."""
    for setting, expected in [(False, 0), (True, 1)]:
        before = len(json_lines.from_logger(main.ACCESS_LOGGER))
        with TestClient(create_app(Settings(access_log=setting))) as client:
            client.get("/livez")
        assert len(json_lines.from_logger(main.ACCESS_LOGGER)) - before == expected
    assert Settings().access_log is False
