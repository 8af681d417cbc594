"""Live tests: client -> nginx (TCP) -> unix socket -> gunicorn -> app, started by the supervisor.

Each starts the supervisor (`python -m serving_stack`) as the container does, on this host,
as a non-root user, with real nginx and gunicorn processes. Skipped, with the reason,
where nginx is missing.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import stat
import subprocess
from typing import TYPE_CHECKING

import pytest

from harness import procfs
from harness.clients import fetch
from harness.ports import wait_for
from harness.stack import RunningStack

from .conftest import DEADLINE_VARIABLE, OUTSIDER_UID, PACKAGE, setpriv

if TYPE_CHECKING:
    from collections.abc import Callable

    from .conftest import Identity

pytestmark = pytest.mark.live

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
REQUEST_ID = re.compile(r"^[0-9a-f]{32}$")


def test_nginx_and_gunicorn_count_the_same_cpus(start_stack: Callable[..., RunningStack]) -> None:
    """NGINX_WORKER_PROCESSES=auto: nginx runs one worker per 4 CPUs this cgroup and affinity
    allow, at least one (cpus.py, supervisor.py), the supervisor logs that decision once, and
    gunicorn counted the same CPUs."""
    stack = start_stack(NGINX_WORKER_PROCESSES="auto")
    lines = stack.log_lines()
    decided = [line for line in lines if "worker count decided" in str(line["message"])]
    (nginx,) = [line for line in decided if line["logger"] == "supervisor"]
    (gunicorn,) = [line for line in decided if line["logger"] != "supervisor"]

    # The stack's own count, read from its log (its command line is all the battery uses):
    # this process's affinity, lowered by a cgroup quota where there is one.
    affinity = len(os.sched_getaffinity(0))
    assert nginx["cpu_affinity"] == affinity, nginx
    limit = nginx["cgroup_cpu_limit"]
    usable = affinity if limit is None else max(1, min(affinity, math.ceil(float(limit))))
    workers = -(-usable // 4)
    assert nginx == nginx | {"workers": workers, "source": "cpus", "cpus": usable}
    assert gunicorn["cpus"] == nginx["cpus"], (gunicorn, nginx)
    master = stack.child_pid("nginx")
    wait_for(
        lambda: len(procfs.children(master)) == workers,
        10,
        f"{workers} nginx workers under {master}",
    )


def _count(stack: RunningStack, logger: str) -> int:
    return sum(line.get("logger") == logger for line in stack.log_lines())


def _app_lines(stack: RunningStack) -> list[dict[str, object]]:
    return [line for line in stack.log_lines() if str(line.get("logger", "")).startswith(PACKAGE)]


def test_socket_is_0660_and_refuses_outsiders(
    start_stack: Callable[..., RunningStack], identity: Identity
) -> None:
    """The socket is 0660, owned by the stack's user; another user gets EACCES."""
    stack = start_stack()
    info = stack.socket_path.stat()

    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o660, f"socket mode {stat.S_IMODE(info.st_mode):04o}"
    assert (info.st_uid, info.st_gid) == (identity.uid, identity.gid)
    if os.geteuid() != 0:
        pytest.skip("connecting as another user needs root (to switch users); mode checked")
    connect = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except PermissionError:\n"
        "    print('EACCES')\n"
        "else:\n"
        "    print('connected')\n"
    )
    results = {}
    for name, prefix in (("stack user", identity.drop), ("outsider", setpriv(OUTSIDER_UID))):
        done = subprocess.run(
            [*prefix, identity.python, "-c", connect, str(stack.socket_path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        results[name] = done.stdout.strip() or done.stderr
    # The stack's own user connecting proves the outsider's refusal is the socket's mode.
    assert results == {"stack user": "connected", "outsider": "EACCES"}


@pytest.mark.parametrize("victim", ["nginx", "gunicorn"])
def test_supervisor_exits_non_zero_when_a_process_dies(
    start_stack: Callable[..., RunningStack], victim: str
) -> None:
    """Killing nginx or gunicorn stops the other and makes the supervisor exit non-zero."""
    stack = start_stack()
    survivor = "gunicorn" if victim == "nginx" else "nginx"
    survivor_pid = stack.child_pid(survivor)
    victim_pid = stack.child_pid(victim)
    wait_for(lambda: len(set(procfs.group_members(victim_pid))) > 1, 30, f"{victim}'s workers")
    workers = set(procfs.group_members(victim_pid)) - {victim_pid}

    os.kill(victim_pid, signal.SIGKILL)

    assert stack.wait_exit(90) != 0, stack.log_text()
    assert f"{victim} (exit status -9) exited unexpectedly" in stack.log_text()
    with pytest.raises(ProcessLookupError):
        os.kill(survivor_pid, 0)  # the survivor was stopped and reaped, not left behind
    # The dead master's workers would serve on, orphaned: the supervisor stopped them too.
    assert not set(procfs.group_members(victim_pid)) & workers, (
        f"{victim}'s workers were left running"
    )


# --- the settings and the log lines, live -----------------------------------------------------


def raw_request(port: int, request: bytes) -> bytes:
    """Send request bytes as they are (what urllib would refuse to send); return the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(request)
        chunks = []
        while chunk := client.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_longer_fractional_deadline_gets_the_apps_504(
    start_stack: Callable[..., RunningStack],
) -> None:
    """A fractional deadline above nginx's old fixed 35 s: nginx's timeouts follow it, and the
    slow request ends in the app's JSON 504 with its request id, not nginx's."""
    stack = start_stack(
        app_module="slow_app:app",
        **{
            DEADLINE_VARIABLE: "36.5",
            "GRACEFUL_TIMEOUT": "40.5",
            "GUNICORN_TIMEOUT": "45.25",
            "KEEPALIVE": "80",
        },
    )
    conf = (stack.run_dir / "nginx.conf").read_text(encoding="utf-8")
    assert "proxy_read_timeout 41500ms;" in conf
    assert "worker_shutdown_timeout 46500ms;" in conf
    (rendered,) = [line for line in stack.log_lines() if line["message"] == "rendered nginx config"]
    assert (rendered["nginx_proxy_timeout"], rendered["graceful_timeout"]) == (41.5, 40.5)

    status, headers, body = fetch(f"{stack.base}/app-slow?seconds=60", timeout=90)

    assert status == 504, body
    answer = json.loads(body)
    assert answer["detail"] == "Gateway Timeout: request deadline exceeded"
    assert answer["request_id"] == headers["X-Request-ID"], "the app's 504 carries the id"
    assert headers["Content-Type"] == "application/json"
    stack.process.send_signal(signal.SIGTERM)
    assert stack.wait_exit(90) == 0, stack.log_text()


CONTRACT = ["time", "level", "logger", "message"]


def test_every_line_of_a_live_run_is_utf8_json(start_stack: Callable[..., RunningStack]) -> None:
    """After a 413, a 404, an oversized header and non-UTF-8 bytes, every line is JSON."""
    stack = start_stack()
    too_large, _, _ = fetch(f"{stack.base}/livez", data=b"x" * (2 * 1024 * 1024))
    missing, _, _ = fetch(f"{stack.base}/nope")
    # Above client_body_buffer_size: nginx warns in its error log (buffered to a temp file).
    buffered, _, _ = fetch(f"{stack.base}/nope", data=b"y" * (64 * 1024))
    oversized = raw_request(
        stack.port, b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n"
    )
    # A Latin-1 User-Agent, and a path nginx percent-decodes into a non-UTF-8 $uri.
    latin1 = raw_request(
        stack.port,
        b"GET /nope HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla \xff\xfe\xe9\r\n"
        b"Connection: close\r\n\r\n",
    )
    decoded = fetch(f"{stack.base}/caf%e9/%ff")[0]
    assert (too_large, missing, buffered, decoded) == (413, 404, 404, 404)
    assert oversized.startswith(b"HTTP/1.1 400 "), oversized[:80]
    assert latin1.startswith(b"HTTP/1.1 404 "), latin1[:80]
    wait_for(
        lambda: (
            sum('"logger":"nginx.access"' in line for line in stack.log_text().splitlines()) >= 6
        ),
        10,
        "nginx's access lines of the six requests",
    )
    stack.process.send_signal(signal.SIGTERM)
    assert stack.wait_exit(60) == 0, stack.log_text()

    raw = stack.log_path.read_bytes()
    lines = [json.loads(line.decode("utf-8")) for line in raw.splitlines()]
    for line in lines:
        assert list(line)[:4] == CONTRACT, line
    loggers = {line["logger"] for line in lines}
    assert {
        "supervisor",
        "gunicorn.error",
        "uvicorn.error",
        "nginx.access",
        "nginx.error",
    } <= loggers
    agents = [line.get("user_agent") for line in lines if line["logger"] == "nginx.access"]
    # The client's bytes survive, as the characters \xff (never lone surrogates, which
    # strict JSON readers refuse): nothing is dropped or invented.
    assert "Mozilla \\xff\\xfe\\xe9" in agents, agents
    paths = [line.get("path") for line in lines if line["logger"] == "nginx.access"]
    assert "/caf\\xe9/\\xff" in paths, paths


def test_a_clean_start_and_stop_says_only_what_an_operator_needs(
    start_stack: Callable[..., RunningStack],
) -> None:
    """At info level, no gunicorn chatter (worker class, closing a closed socket)."""
    stack = start_stack()
    stack.process.send_signal(signal.SIGTERM)
    assert stack.wait_exit(60) == 0, stack.log_text()
    text = stack.log_text()

    assert "Using worker" not in text
    assert "Error while closing socket" not in text
    assert "Traceback" not in text
    levels = {json.loads(line)["level"] for line in text.splitlines()}
    assert levels == {"info"}, text
