"""The lab's app variants serve the same endpoints; only their middleware differs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient

from lab import apps
from lab.experiments import access_log_variable

if TYPE_CHECKING:
    from lab.project import Project

VARIANTS = ["bare", "shipped"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    ("path", "size"),
    [("/bench/small", None), ("/bench/small-sync", None), ("/bench/1mb", 1024 * 1024)],
)
def test_every_variant_serves_every_endpoint(variant: str, path: str, size: int | None) -> None:
    """Small JSON and exactly 1 MiB, from each variant."""
    with TestClient(getattr(apps, variant)) as client:
        response = client.get(path)
    assert response.status_code == 200
    if size is None:
        assert response.json() == {"message": "hello", "count": 3}
    else:
        assert len(response.content) == size


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_streams_events_and_echoes_on_a_websocket(variant: str) -> None:
    """The held condition's routes: ``tokens`` server-sent events, and a WebSocket echo."""
    with TestClient(getattr(apps, variant)) as client:
        response = client.get("/bench/events", params={"tokens": 3, "interval": 0.01})
        with client.websocket_connect("/bench/ws") as session:
            session.send_text("ping")
            echoed = session.receive_text()
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert echoed == "ping"


def test_shipped_is_the_real_stack(
    project: Project, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the access log on, it echoes a request id and writes one contract access line."""
    monkeypatch.setenv(access_log_variable(project.package), "true")
    # Built afresh, not `apps.shipped`: the module caches the app built without the switch.
    with caplog.at_level("INFO"), TestClient(apps.build_shipped()) as client:
        response = client.get("/bench/small", headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    (line,) = [r for r in caplog.records if r.name.endswith(".access")]
    assert (line.method, line.path, line.status, line.request_id) == (  # type: ignore[attr-defined]
        "GET",
        "/bench/small",
        200,
        "abc-123",
    )


def test_bare_has_no_middleware() -> None:
    """The baseline answers without the stack's request id header."""
    with TestClient(apps.bare) as client:
        response = client.get("/bench/small", headers={"X-Request-ID": "abc-123"})
    assert "x-request-id" not in response.headers


def test_unknown_variant_is_an_attribute_error() -> None:
    """A typo in a server's `lab.apps:<name>` fails like any missing attribute."""
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        getattr(apps, "nope")  # noqa: B009 - the dynamic lookup is what is tested
