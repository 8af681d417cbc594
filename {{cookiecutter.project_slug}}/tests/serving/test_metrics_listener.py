"""The metrics listener's pieces without a live stack: nginx's page, nginx down, refusals.

The live behaviour (scrapes across workers, the public port) is in test_observability.py;
METRICS_PORT's bounds and wrong values are tested with every variable (test_stack_settings.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from .conftest import DEPLOY, PROJECT, load_module

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

STUB_STATUS = """Active connections: 3
server accepts handled requests
 16 15 31
Reading: 0 Writing: 1 Waiting: 2
"""


@pytest.fixture(scope="module")
def metrics_module() -> ModuleType:
    """deploy/metrics.py imported as a module."""
    return load_module(DEPLOY / "metrics.py", "metrics_under_test")


def test_stub_status_becomes_numbers(metrics_module: ModuleType) -> None:
    """Every number of nginx's stub_status page is read, each under its own name."""
    assert metrics_module.parse_stub_status(STUB_STATUS) == {
        "active": 3,
        "accepted": 16,
        "handled": 15,
        "requests": 31,
        "reading": 0,
        "writing": 1,
        "waiting": 2,
    }


@pytest.mark.parametrize("page", ["", "<html>404</html>", STUB_STATUS.replace("16", "x")])
def test_a_page_that_is_not_stub_status_is_refused(metrics_module: ModuleType, page: str) -> None:
    with pytest.raises(ValueError, match=r"stub_status|invalid literal"):
        metrics_module.parse_stub_status(page)


def test_nginx_down_is_a_zero_not_a_failed_scrape(
    metrics_module: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without nginx's socket a scrape still answers, with nginx_up 0 and a warning line."""
    registry = metrics_module.build_registry(str(tmp_path), str(tmp_path / "missing.sock"))

    text = metrics_module.generate_latest(registry).decode()

    assert "nginx_up 0.0" in text
    assert "nginx_http_requests_total" not in text
    [line] = [json.loads(raw) for raw in capsys.readouterr().out.splitlines()]
    assert line["message"] == "nginx stub_status unavailable"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"METRICS_PORT": "99999"}, "METRICS_PORT='99999' is refused: a whole number from 1"),
        ({"METRICS_PORT": "8080"}, "METRICS_PORT=8080 is PORT too"),
        ({"LISTEN_ADDRESS": "not-an-ip"}, "LISTEN_ADDRESS='not-an-ip' is refused"),
        (
            {"PROMETHEUS_MULTIPROC_DIR": "/nonexistent/metrics"},
            "PROMETHEUS_MULTIPROC_DIR=/nonexistent/metrics is not a directory",
        ),
    ],
)
def test_the_listener_refuses_wrong_values_in_one_line(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    """Started alone with a wrong value, deploy/metrics.py exits 1 with one JSON line."""
    environment = {"PATH": os.defpath, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), **env}
    result = subprocess.run(
        [sys.executable, DEPLOY / "metrics.py"],
        capture_output=True,
        text=True,
        check=False,
        env=environment,
        timeout=60,
    )

    assert result.returncode == 1
    assert result.stderr == ""
    [line] = [json.loads(raw) for raw in result.stdout.splitlines()]
    assert line["message"].startswith(message)


def test_compose_publishes_the_metrics_port_on_loopback_only() -> None:
    """compose.yaml maps METRICS_PORT's default to 127.0.0.1, as it does every port."""
    compose = (PROJECT / "compose.yaml").read_text(encoding="utf-8")
    mappings = re.findall(r'^\s*- "([^"]*:\d+:\d+)"', compose, re.MULTILINE)

    assert "127.0.0.1:9464:9464" in mappings
    assert all(mapping.startswith("127.0.0.1:") for mapping in mappings), mappings
{%- if cookiecutter.kubernetes and cookiecutter.layout == "service" %}


def test_the_pod_names_its_metrics_port_and_says_where_to_scrape() -> None:
    """The container's `metrics` port, METRICS_PORT, the annotations and the PodMonitor agree."""
    pod = (PROJECT / "k8s" / "base" / "deployment.yaml").read_text(encoding="utf-8")
    monitor = (PROJECT / "k8s" / "examples" / "podmonitor.yaml").read_text(encoding="utf-8")
    service = (PROJECT / "k8s" / "base" / "service.yaml").read_text(encoding="utf-8")

    assert re.search(r"- name: metrics\n\s+containerPort: 9464\n", pod)
    assert re.search(r'- name: METRICS_PORT\n\s+value: "9464"\n', pod)
    assert 'prometheus.io/scrape: "true"' in pod
    assert 'prometheus.io/port: "9464"' in pod
    assert "prometheus.io/path: /metrics" in pod
    assert re.search(r"- port: metrics\n\s+path: /metrics\n", monitor)
    # The Service carries client traffic only: the metrics port is scraped per pod.
    assert "metrics" not in service
{%- endif %}
