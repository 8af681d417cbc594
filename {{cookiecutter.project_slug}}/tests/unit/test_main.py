"""The application factory (main.py): settings, lifespan, request ids, CORS. Needs the app and
its settings, run in process; the middleware order, live: tests/live/test_contract.py."""

from collections.abc import AsyncIterator

import pytest
from fastapi import APIRouter, WebSocket
from fastapi.responses import StreamingResponse
from fastapi.testclient import TestClient

import live.live_app
from {{ cookiecutter.package_name }} import main
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings

from .conftest import ClientFor, JsonLines


def test_main_app_is_built_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``main:app`` is titled; the factory reads the variables (their checks: test_settings.py):
    <PREFIX>_ENVIRONMENT=development makes it log text."""
    assert main.app.openapi()["info"]["title"] == main.TITLE
    monkeypatch.setenv(ENV_PREFIX + "ENVIRONMENT", "development")
    with TestClient(main.create_app()):
        pass
    out = capsys.readouterr().out
    assert "application starting" in out
    assert not any(line.startswith("{") for line in out.splitlines())


def test_every_answer_and_handler_log_carries_the_request_id(json_lines: JsonLines) -> None:
    """Every answer echoes an id its handler's log names; no access line without ACCESS_LOG."""
    app = main.create_app(Settings())

    @app.get("/_tests/hello")
    async def hello() -> None:
        main.logger.info("inside the handler")

    with TestClient(app) as client:  # stopped here: the lifespan's last line is read below
        answers = [client.get(path) for path in ("/livez", "/nope", "/items/%00", "/_tests/hello")]
    assert [len(answer.headers["x-request-id"]) for answer in answers] == [32] * 4
    lines = json_lines.from_logger(main.__name__)
    messages = [line["message"] for line in lines]
    assert messages == ["application starting", "inside the handler", "application stopped"]
    assert lines[1]["request_id"] == answers[-1].headers["x-request-id"]
    assert json_lines.from_logger(main.ACCESS_LOGGER) == []


def test_a_browser_app_can_read_the_request_id_and_retry_after(client_for: ClientFor) -> None:
    """An allowed CORS origin's answers expose X-Request-ID and Retry-After to browser code."""
    origin = "https://app.example.com"
    app = main.create_app(Settings(cors_origins=(origin,)))
    response = client_for(app).get("/livez", headers={"origin": origin})
    assert response.headers["access-control-allow-origin"] == origin
    exposed = response.headers["access-control-expose-headers"].lower().split(", ")
    assert {"x-request-id", "retry-after"} <= set(exposed)


def test_event_streams_and_only_they_tell_nginx_not_to_buffer(client_for: ClientFor) -> None:
    """An event stream answers X-Accel-Buffering: no; JSON and a plain text stream do not."""
    app = main.create_app(Settings())

    async def two_events() -> AsyncIterator[str]:
        yield "data: 1\n\n"
        yield "data: 2\n\n"

    @app.get("/_tests/events")
    async def events() -> StreamingResponse:
        return StreamingResponse(two_events(), media_type="text/event-stream")

    @app.get("/_tests/text")
    async def text() -> StreamingResponse:
        return StreamingResponse(two_events(), media_type="text/plain")

    client = client_for(app)
    answers = [client.get(path) for path in ("/_tests/events", "/_tests/text", "/livez")]
    assert answers[0].text == "data: 1\n\ndata: 2\n\n"
    buffering = [answer.headers.get("x-accel-buffering") for answer in answers]
    assert buffering == ["no", None, None]
    assert [len(answer.headers["x-request-id"]) for answer in answers] == [32] * 3


def test_a_teams_own_ws_and_events_leave_the_tests_routes_answering(
    client_for: ClientFor,
) -> None:
    """The routes tests add to the app (live_app.py's, these tests') are under /_tests/: a
    team's own /ws and /events, included in create_app() before them, leave the tests'
    answering. Theirs are not asked: a bake's own /ws may come first."""
    team = APIRouter()

    @team.websocket("/ws")
    async def team_socket(websocket: WebSocket) -> None:
        await websocket.close()

    @team.get("/events")
    async def team_events() -> StreamingResponse:
        return StreamingResponse(iter(["data: the team's\n\n"]), media_type="text/event-stream")

    app = main.create_app(Settings())
    app.include_router(team)  # as create_app() would: before the tests' routes
    app.include_router(live.live_app.router)
    client = client_for(app)
    with client.websocket_connect("/_tests/ws") as session:
        session.send_text("hello")
        assert session.receive_text() == "hello"
    events = client.get("/_tests/events", params={"tokens": 2, "interval": 0}).text
    assert [line.split()[1] for line in events.splitlines() if line] == ["0", "1"]
