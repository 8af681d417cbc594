"""The stack's contract, live: started with its own config and a project's locations around a
plain ASGI app, it serves through nginx, refuses what nginx refuses (JSON with the request id, never
reaching the app), writes only JSON lines, and on SIGTERM drains, then stops cleanly. Needs
nginx."""

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import NGINX, SYSTEM_PATH, ask, free_port

# Any ASGI app: the stack never imports one of its own.
PLAIN_APP = """\
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    scope["client"][0]  # every request has a client address, the supervisor's probe too
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"plain " + scope["path"].encode()})
"""


def _get(port: int, path: str) -> tuple[str | None, bytes]:
    """The Connection header and the body of the answer to a GET on a new connection."""
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        client.request("GET", path, headers={"Host": "localhost"})
        answer = client.getresponse()
        return answer.getheader("Connection"), answer.read()
    finally:
        client.close()


@pytest.mark.skipif(NGINX is None, reason="no nginx")
def test_start_serve_refuse_log_and_stop(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text(PLAIN_APP, encoding="utf-8")
    (tmp_path / "locations.conf").write_text("location = /team { return 204; }\n")
    port = free_port()
    env = {
        "PATH": SYSTEM_PATH,
        "APP_MODULE": "plain:app",
        "NGINX_LOCATIONS": str(tmp_path / "locations.conf"),
        "RUN_DIR": str(tmp_path / "run"),
        "PORT": str(port),
        "METRICS_PORT": str(free_port()),
        "LISTEN_ADDRESS": "127.0.0.1",
        "WEB_CONCURRENCY": "1",
        "NGINX_WORKER_PROCESSES": "1",
        "GUNICORN_CMD_ARGS": "--access-logfile=-",  # gunicorn's own: its access line, too
        "DRAIN_SECONDS": "2",
        "PYTHONPATH": os.pathsep.join(sys.path),
        **({"SERVE_AS_ROOT": "on"} if os.geteuid() == 0 else {}),
    }
    log, check = tmp_path / "stack.log", [sys.executable, "-m", "serving_stack", "check"]
    with log.open("wb") as out:
        stack = subprocess.Popen(
            [sys.executable, "-m", "serving_stack"], cwd=tmp_path, env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 60
        while '"message":"ready"' not in log.read_text(errors="replace"):
            assert stack.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)

        assert ask(port, "/hello")[::2] == (200, b"plain /hello")
        assert ask(port, "/team")[0] == 204  # the project's location, inside the stack's server
        assert subprocess.run(check, cwd=tmp_path, env=env, check=False).returncode == 0
        status, request_id, body = ask(port, "/hello", host="elsewhere.example")
        assert status == 400
        assert json.loads(body) == {"detail": "Bad Request", "request_id": request_id}
        assert ask(port, "/readyz")[0] == 200

        stack.send_signal(signal.SIGTERM)
        # The drain: /readyz says 503 at once; halfway, each answer closes its connection.
        while '"message":"draining for 2 s' not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        assert ask(port, "/readyz")[0] == 503
        assert _get(port, "/hello") == ("keep-alive", b"plain /hello")
        while (answer := _get(port, "/hello"))[0] != "close":
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        assert answer == ("close", b"plain /hello")
    finally:
        stack.send_signal(signal.SIGTERM)
        code = stack.wait(timeout=60)

    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert code == 0
    assert lines[-1]["message"] == "stopped cleanly"
    assert [line for line in lines if line["level"] == "error"] == []
    assert subprocess.run(check, cwd=tmp_path, env=env, check=False).returncode == 1
    refused = [line for line in lines if line.get("request_id") == request_id]
    assert [line["status"] for line in refused] == [400]
    assert refused[0]["upstream_response_time"] in {"", "-"}, "it never reached the app"
    assert "/hello" in [line["path"] for line in lines if line["logger"] == "uvicorn.access"]
