"""Alembic migrations against a real PostgreSQL: up, down, up again, and run concurrently."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from .tables import fetch, tables

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    # tests/conftest.py's `alembic` fixture: alembic(url, *arguments).
    Alembic = Callable[..., subprocess.CompletedProcess[str]]


def test_upgrade_creates_the_items_table(
    new_database: Callable[..., str], alembic: Alembic
) -> None:
    """`alembic upgrade head` on an empty database creates items, and records the revision."""
    url = new_database(migrated=False)
    assert tables(url) == set()
    result = alembic(url, "upgrade", "head")
    assert result.returncode == 0, result.stderr
    assert tables(url) == {"items", "alembic_version"}
    assert fetch(url, "SELECT version_num FROM alembic_version") == [("0001",)]


def test_the_models_match_the_migrations(
    new_database: Callable[..., str], alembic: Alembic
) -> None:
    """`alembic check` finds nothing to autogenerate: db/models.py and migrations/ agree."""
    result = alembic(new_database(), "check")
    assert result.returncode == 0, result.stderr
    assert "No new upgrade operations detected" in result.stdout + result.stderr


def test_downgrade_then_upgrade_round_trips(
    new_database: Callable[..., str], alembic: Alembic
) -> None:
    """Every migration can be undone, and applied again after (no half-dropped leftovers)."""
    url = new_database()
    down = alembic(url, "downgrade", "base")
    assert down.returncode == 0, down.stderr
    assert tables(url) == {"alembic_version"}
    assert fetch(url, "SELECT count(*) FROM alembic_version") == [(0,)]
    up = alembic(url, "upgrade", "head")
    assert up.returncode == 0, up.stderr
    assert tables(url) == {"items", "alembic_version"}


def test_concurrent_runs_apply_each_migration_once(
    new_database: Callable[..., str], alembic: Alembic
) -> None:
    """Pods starting together (init containers) take turns on the advisory lock: all succeed."""
    url = new_database(migrated=False)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: alembic(url, "upgrade", "head"), range(4)))
    assert [r.returncode for r in results] == [0] * 4, [r.stderr[-500:] for r in results]
    assert fetch(url, "SELECT version_num FROM alembic_version") == [("0001",)]


def test_offline_mode_prints_the_sql(
    alembic: Alembic,
) -> None:
    """`alembic upgrade head --sql` writes the DDL for review, touching no database."""
    result = alembic("postgresql://nobody@127.0.0.1:1/none", "upgrade", "head", "--sql")
    assert result.returncode == 0, result.stderr
    assert "CREATE TABLE items" in result.stdout


def test_migrating_without_a_url_is_refused_in_one_line(project_root: Path) -> None:
    """With no DATABASE_URL, alembic stops with one line saying what to set."""
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=project_root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: DATABASE_URL is not set: export the database's URL to migrate it"
    ]


def test_make_migrate_applies_the_migrations(
    new_database: Callable[..., str], project_root: Path
) -> None:
    """`make migrate`, as docs/database.md shows it, migrates the database DATABASE_URL names."""
    url = new_database(migrated=False)
    result = subprocess.run(
        ["make", "--no-print-directory", "migrate", f"VENV={sys.prefix}"],
        cwd=project_root,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert tables(url) == {"items", "alembic_version"}
