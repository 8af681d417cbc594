"""The timeout chain: client -> nginx -> gunicorn -> app -> stop, derived from the app deadline.

deploy/stack_settings.py computes every link from the app's request deadline; these tests
check the order holds for the default and for non-default, fractional deadlines, that a
chain broken on purpose is refused naming the pair, that the rendered nginx.conf and
gunicorn's settings carry the derived values, and that the platform grace periods shipped in
compose.yaml and the Kubernetes Deployment cover the default chain (docs/settings.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from {{ cookiecutter.package_name }}_stack import runner as serve
from {{ cookiecutter.package_name }}_stack import settings as stack_settings
from {{ cookiecutter.package_name }}_stack.settings import APP_DEADLINE_NAME, SettingError, TimeoutChain

from {{ cookiecutter.package_name }}.settings import Settings

from .conftest import DEPLOY, PROJECT, run_runner

if TYPE_CHECKING:
    from pathlib import Path

# The default, a longer one, a fractional one and a very short one.
DEADLINES = ["30", "60", "12.25", "0.5"]


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(ms|s|m)?", value)
    assert match, f"not a duration: {value}"
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"ms": 0.001, "s": 1, "m": 60}[unit]


def rendered_directive(text: str, name: str, block: str | None = None) -> float:
    """A duration directive of a rendered nginx.conf, optionally inside `block { ... }`."""
    text = re.sub(r"#[^\n]*", "", text)
    if block is not None:
        found = re.search(block + r"\s*\{(.*?)\}", text, re.DOTALL)
        assert found, f"no {block} block in the rendered nginx.conf"
        text = found.group(1)
    else:  # outside the upstream block: the client-side directive of the same name
        text = re.sub(r"upstream\s+\w+\s*\{.*?\}", "", text, flags=re.DOTALL)
    values = re.findall(rf"^\s*{name}\s+(\S+);", text, re.MULTILINE)
    assert len(values) == 1, f"expected one {name} in the rendered nginx.conf, found {values}"
    return _seconds(values[0])


def render(tmp_path: Path, **env: str) -> str:
    settings = stack_settings.load({"RUN_DIR": str(tmp_path), **env})
    conf = serve.write_nginx_conf(settings, settings.socket_path(0))
    return conf.read_text(encoding="utf-8")


def test_the_stack_and_the_app_share_the_default_deadline() -> None:
    """The stack derives from the same default deadline the app enforces (settings.py)."""
    default = Settings.model_fields["request_timeout_seconds"].default
    assert default == stack_settings.APP_DEADLINE.default
    assert Settings.env_var("request_timeout_seconds") == APP_DEADLINE_NAME


@pytest.mark.parametrize("deadline", DEADLINES)
def test_rendered_nginx_follows_the_app_deadline(tmp_path: Path, deadline: str) -> None:
    """nginx waits longer than the app's deadline, and drains longer than it waits."""
    text = render(tmp_path, **{APP_DEADLINE_NAME: deadline})
    app = float(deadline)
    proxy = rendered_directive(text, "proxy_read_timeout", "location /")

    assert proxy > app, "nginx would answer 504 before the app, without the request id"
    assert rendered_directive(text, "proxy_send_timeout", "location /") == proxy
    assert rendered_directive(text, "worker_shutdown_timeout") > proxy, (
        "a graceful nginx stop would cut a response it is still allowed to wait for"
    )


@pytest.mark.parametrize("deadline", DEADLINES)
def test_the_chain_keeps_its_order(deadline: str) -> None:
    """Every link of the derived chain is in order, whatever the deadline."""
    chain = stack_settings.load({APP_DEADLINE_NAME: deadline}).chain
    app = float(deadline)

    assert chain.app_deadline == app
    assert chain.proxy > app
    assert chain.nginx_drain > chain.proxy
    assert chain.graceful >= app, "gunicorn's drain must let a request the app allows finish"
    assert chain.watchdog >= app, "the watchdog must not kill a worker before the deadline"
    assert chain.stop_budget > chain.nginx_drain + chain.graceful


def test_nginx_reads_fractional_timeouts_in_milliseconds(tmp_path: Path) -> None:
    """A fractional deadline is rendered exactly (nginx takes no fractional seconds)."""
    text = render(tmp_path, **{APP_DEADLINE_NAME: "12.25"})
    assert re.search(r"^\s*proxy_read_timeout 17250ms;", text, re.MULTILINE)
    assert re.search(r"^worker_shutdown_timeout 22250ms;", text, re.MULTILINE)


def test_upstream_keepalive_stays_below_gunicorn_keepalive(tmp_path: Path) -> None:
    """gunicorn must never close an idle upstream connection before nginx does (502s)."""
    for keepalive in ("75", "2", "16", "3600"):
        text = render(tmp_path, KEEPALIVE=keepalive)
        assert rendered_directive(text, "keepalive_timeout", r"upstream\s+app") < int(keepalive)


@pytest.mark.parametrize(
    ("env", "pair"),
    [
        ({"GRACEFUL_TIMEOUT": "29.9"}, ("GRACEFUL_TIMEOUT=29.9", f"{APP_DEADLINE_NAME}=30")),
        ({APP_DEADLINE_NAME: "90", "GRACEFUL_TIMEOUT": "60"}, ("GRACEFUL_TIMEOUT=60", "=90")),
        ({"GUNICORN_TIMEOUT": "10"}, ("GUNICORN_TIMEOUT=10", f"{APP_DEADLINE_NAME}=30")),
        ({"STOP_GRACE_PERIOD": "79.5"}, ("STOP_GRACE_PERIOD=79.5", "GRACEFUL_TIMEOUT=30")),
        ({APP_DEADLINE_NAME: "60", "STOP_GRACE_PERIOD": "90"}, ("STOP_GRACE_PERIOD=90", "=60")),
    ],
)
def test_a_broken_chain_is_refused_naming_the_pair(
    env: dict[str, str], pair: tuple[str, str]
) -> None:
    """A value that breaks the chain is refused in one line naming both ends of the pair."""
    with pytest.raises(SettingError) as refused:
        stack_settings.load(env)
    message = str(refused.value)
    assert "\n" not in message
    for part in pair:
        assert part in message, message


def test_non_default_chain_is_accepted_at_its_boundaries() -> None:
    """Equal values are allowed: a drain exactly as long as the deadline still lets it finish."""
    settings = stack_settings.load(
        {
            APP_DEADLINE_NAME: "45.5",
            "GRACEFUL_TIMEOUT": "45.5",
            "GUNICORN_TIMEOUT": "45.5",
            "STOP_GRACE_PERIOD": str(TimeoutChain(45.5, 45.5, 45.5).stop_budget),
        }
    )
    assert settings.chain == TimeoutChain(app_deadline=45.5, graceful=45.5, watchdog=45.5)


def _gunicorn_print_config(env: dict[str, str]) -> dict[str, str]:
    """gunicorn's own view of deploy/gunicorn.conf.py under env (--print-config)."""
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", DEPLOY / "gunicorn.conf.py", "--print-config"],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(PROJECT / "src"), str(DEPLOY)]),
            "RUN_DIR": "/tmp/unused",  # noqa: S108 - never created: --print-config binds nothing
            **env,
        },
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(re.findall(r"^(\w+)\s+= (.*)$", result.stdout, re.MULTILINE))


def test_gunicorn_takes_a_fractional_drain() -> None:
    """GRACEFUL_TIMEOUT=30.5 starts: gunicorn gets whole seconds rounded up, never less."""
    printed = _gunicorn_print_config({"GRACEFUL_TIMEOUT": "30.5"})
    assert printed["graceful_timeout"] == "31"
    assert printed["timeout"] == "60"


def test_gunicorn_follows_a_longer_deadline() -> None:
    """Unset, gunicorn's drain and watchdog follow the app deadline up."""
    printed = _gunicorn_print_config({APP_DEADLINE_NAME: "90.2"})
    assert printed["graceful_timeout"] == "91"
    assert printed["timeout"] == "91"


def test_gunicorn_refuses_a_broken_chain_in_one_line() -> None:
    """gunicorn started alone refuses a broken chain with the same one line, no traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", DEPLOY / "gunicorn.conf.py", "--check-config"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(PROJECT / "src"), "GRACEFUL_TIMEOUT": "3"},
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"GRACEFUL_TIMEOUT=3 is below {APP_DEADLINE_NAME}=30" in result.stderr


def test_runner_refuses_a_broken_chain_in_one_json_line(tmp_path: Path) -> None:
    """The runner refuses before starting anything: exit 1, one JSON line naming the pair."""
    result = run_runner({"PATH": os.defpath, "RUN_DIR": str(tmp_path), "GUNICORN_TIMEOUT": "5"})
    assert result.returncode == 1
    assert result.stderr == ""
    (line,) = [json.loads(raw) for raw in result.stdout.splitlines()]
    assert line["level"] == "error"
    assert f"GUNICORN_TIMEOUT=5 is below {APP_DEADLINE_NAME}=30" in line["message"]


def _compose_stop_grace_period() -> float:
    text = (PROJECT / "compose.yaml").read_text(encoding="utf-8")
    found = re.search(r"^\s*stop_grace_period:\s*(\S+)", text, re.MULTILINE)
    assert found, "compose.yaml has no stop_grace_period"
    return _seconds(found.group(1))


def test_compose_grace_period_covers_the_default_stop() -> None:
    """compose's stop_grace_period outlasts the runner's worst case, and tells the runner."""
    chain = stack_settings.load({}).chain
    grace = _compose_stop_grace_period()
    text = (PROJECT / "compose.yaml").read_text(encoding="utf-8")

    assert grace > chain.stop_budget, (
        f"compose.yaml stop_grace_period ({grace:g} s) must exceed the runner's worst-case stop "
        f"({chain.stop_budget:g} s), or Docker kills the stack mid-drain"
    )
    assert re.search(rf'^\s*STOP_GRACE_PERIOD: "{grace:g}"', text, re.MULTILINE), (
        "compose.yaml must pass its stop_grace_period as STOP_GRACE_PERIOD, so a longer"
        " deadline set there is refused at start instead of cut at stop"
    )


def test_the_docs_refusal_example_is_what_the_runner_prints() -> None:
    """docs/settings.md's console example, run: the same one line (its time aside)."""
    text = (PROJECT / "docs" / "settings.md").read_text(encoding="utf-8")
    found = re.search(r"```console\n\$ (\S+)=(\S+) python deploy/serve.py\n(.*)\n```", text)
    assert found, "docs/settings.md lost its console example"
    name, value, shown = found.groups()
    result = run_runner({"PATH": os.defpath, name: value})
    printed = json.loads(result.stdout)
    expected = json.loads(shown)
    assert result.returncode == 1
    assert {**printed, "time": "..."} == expected
