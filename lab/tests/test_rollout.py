"""The pure parts of the rollout rehearsal: the HAProxy block read from the docs and changed
only where the rehearsal must, and the tally's figures. The live run is the template's rollout
suite (tests/test_rollout.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from lab.haproxy import HAProxyError, documented, rehearsal
from lab.rollout_load import Tally
from lab.rollout_report import figures

if TYPE_CHECKING:
    from pathlib import Path

BLOCK = """defaults
    timeout server 40s

frontend web
    bind :80
    default_backend app

backend app
    option httpchk GET /readyz
    retries 2
    server app1 10.0.0.11:8080 check
    server app2 10.0.0.12:8080 check
"""
PAGE = f"""# Deploying

```haproxy
# an example elsewhere on the page
```

## HAProxy

```haproxy
{BLOCK}```

## The drain phase
"""


def test_the_documented_block_is_the_haproxy_sections_one(tmp_path: Path) -> None:
    """The block under "## HAProxy" is read, not another haproxy block of the page."""
    page = tmp_path / "deploy.md"
    page.write_text(PAGE, encoding="utf-8")
    assert documented(page) == BLOCK


def test_a_section_without_its_one_block_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "deploy.md"
    page.write_text(PAGE.replace("## HAProxy", "## Other"), encoding="utf-8")
    with pytest.raises(HAProxyError, match="0 haproxy blocks"):
        documented(page)


def test_the_rehearsal_changes_the_bind_the_servers_and_the_retries_only() -> None:
    """One server line per slot with the documented options, bound to loopback, retries as
    asked; every other line as documented."""
    changed = rehearsal(BLOCK, port=8000, slots=[9001, 9002, 9003], retries=0).splitlines()
    assert [line for line in changed if "bind" in line] == ["    bind 127.0.0.1:8000"]
    assert not [line for line in changed if "10.0.0." in line]  # the documented servers
    assert [line for line in changed if "server slot" in line] == [
        "    server slot1 127.0.0.1:9001 check",
        "    server slot2 127.0.0.1:9002 check",
        "    server slot3 127.0.0.1:9003 check",
    ]

    def others(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.lstrip().startswith(("bind ", "server "))]

    assert others(changed) == others(BLOCK.replace("retries 2", "retries 0").splitlines())


def test_the_documented_retries_stay_unless_asked() -> None:
    assert "    retries 2" in rehearsal(BLOCK, port=1, slots=[2], retries=None).splitlines()


def test_figures_count_each_kind_in_all_and_during_the_rollout() -> None:
    """Outcomes by kind, those started during the rollout apart; the GETs' latency per phase
    from their 200s only."""
    tally = Tally(
        requests=[
            ("GET", 1.0, 0.010, "200"),
            ("GET", 1.5, 0.020, "200"),
            ("GET", 2.5, 0.030, "200"),
            ("GET", 2.6, 0.001, "503"),
            ("POST", 2.7, 0.010, "reset"),
            ("upload", 0.5, 0.100, "200"),
        ]
    )
    tally.streams["whole"] += 2
    tally.sessions["1012 reconnected"] += 1
    found = figures(tally, {"before": (0.0, 2.0), "during": (2.0, 3.0)})
    assert found["requests"] == {
        "GET": {"200": 3, "503": 1},
        "POST": {"reset": 1},
        "upload": {"200": 1},
    }
    assert found["requests_during"] == {
        "GET": {"200": 1, "503": 1},
        "POST": {"reset": 1},
        "upload": {},
    }
    assert found["get_latency"]["before"]["count"] == 2
    assert found["get_latency"]["during"] == {"count": 1, "p50_ms": None, "p99_ms": None}
    assert found["streams"] == {"whole": 2}
    assert found["websocket_closes"] == {"1012 reconnected": 1}
