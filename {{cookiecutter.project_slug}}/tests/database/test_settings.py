"""The database settings: DATABASE_URL and its checks, the connection budget and each worker's
share of it (db/pool.py), timeouts below the deadline. Needs settings.py, gunicorn_config.py.
"""

import pytest
from pydantic import SecretStr, ValidationError

from {{ cookiecutter.package_name }}.db.pool import PoolSize, pool_size
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings
from {{ cookiecutter.package_name }}_stack import gunicorn_config

REAL = "postgresql+asyncpg://svc:Zt8-kq2V93xLm0@db.internal:5432/items"


def refusal(**values: object) -> str:
    """The first error message Settings gives for ``values``."""
    with pytest.raises(ValidationError) as caught:
        Settings(**values)  # type: ignore[arg-type]
    return str(caught.value.errors()[0]["msg"])


@pytest.mark.parametrize(
    "url",
    [REAL, REAL.replace("postgresql+asyncpg", "postgres"), REAL.replace("+asyncpg", ""),
     "postgresql://app@db/app",  # no password: asyncpg takes PGPASSWORD, ~/.pgpass, peer
     "postgresql+asyncpg://svc:Zt8-kq2V93xLm0@db.internal:65535/items"],
)  # fmt: skip
def test_a_postgresql_url_is_read_as_a_secret_for_asyncpg(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """Unprefixed DATABASE_URL in any scheme platforms hand out, for asyncpg, never in a repr;
    a laptop's postgres:postgres is fine outside production."""
    monkeypatch.setenv("DATABASE_URL", url)
    settings = Settings()
    assert settings.database_url.get_secret_value().startswith("postgresql+asyncpg://")
    assert "Zt8-kq2V93xLm0" not in repr(settings)
    laptop = SecretStr("postgresql+asyncpg://postgres:postgres@db/app")
    local = Settings(database_url=laptop, environment="development")
    assert local.database_url.get_secret_value() == laptop.get_secret_value()


@pytest.mark.parametrize(
    ("url", "message"),
    [("", "DATABASE_URL is not set"), ("  ", "DATABASE_URL is not set"),
     ("mysql://u:p@h/d", "DATABASE_URL must start with postgresql"),
     ("sqlite:///items.db", "DATABASE_URL must start with postgresql"),
     *((f"postgresql://app:s3cret-9f3@db:{port}/items", "DATABASE_URL has a port that is not")
       for port in ["no-port", "99999", "-1"]),
     *((f"postgresql://{credentials}@db:5432/app", "DATABASE_URL has a placeholder password")
       for credentials in ["app:changeme", "postgres:postgres", "app:", "u:CHANGE_ME"])],
)  # fmt: skip
def test_a_wrong_url_is_refused_without_echoing_it(url: str, message: str) -> None:
    """Missing, not PostgreSQL, a bad port or a placeholder password: named, never echoed."""
    refused = refusal(database_url=url)
    assert message in refused
    assert url.strip() == "" or url not in refused
    assert "s3cret-9f3" not in refused


def test_database_timeouts_follow_the_request_deadline() -> None:
    """Unset: statements get 80 % of the deadline, connects 5 s or 80 % of it; else as set."""
    assert (Settings().statement_timeout_seconds, Settings().connect_timeout_seconds) == (24, 5)
    short = Settings(request_timeout_seconds=2)
    assert (short.statement_timeout_seconds, short.connect_timeout_seconds) == (1.6, 1.6)
    explicit = Settings(database_statement_timeout_seconds=2.5)
    assert explicit.statement_timeout_seconds == 2.5


@pytest.mark.parametrize("field", ["statement", "connect"])
@pytest.mark.parametrize("value", ["30", "45.5", "0", "-1", "soon"])
def test_a_wrong_database_timeout_is_refused(field: str, value: str) -> None:
    """At or past the deadline (after the app's 504), zero or not a number: refused, named."""
    refused = refusal(**{f"database_{field}_timeout_seconds": value})
    variable = f"{ENV_PREFIX}DATABASE_{field.upper()}_TIMEOUT_SECONDS"
    if value in {"30", "45.5"}:
        deadline = f"{ENV_PREFIX}REQUEST_TIMEOUT_SECONDS=30"
        assert f"{variable}={float(value):g} must be below {deadline}" in refused
    else:
        assert refused.startswith("Input should be")


def test_the_worker_count_gunicorn_decides_sizes_the_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    """gunicorn's configuration exports the count it decided as GUNICORN_WORKERS, which the
    app reads to size each worker's pool (1 when unset: `make run`)."""
    assert Settings().workers == 1
    monkeypatch.setenv("GUNICORN_WORKERS", "not yet")  # so that monkeypatch restores it
    monkeypatch.setenv("MIN_WORKERS", "5")
    monkeypatch.setenv("MAX_WORKERS", "5")
    gunicorn_config.settings.cache_clear()
    try:
        assert gunicorn_config.workers.__wrapped__().number == 5
    finally:
        gunicorn_config.settings.cache_clear()
    assert Settings().workers == 5


@pytest.mark.parametrize(("budget", "accepted"), [("4", True), ("3", False), ("0", False),
                                                  ("10001", False), ("many", False)])  # fmt: skip
def test_the_connection_budget_must_cover_every_worker(
    monkeypatch: pytest.MonkeyPatch, budget: str, *, accepted: bool
) -> None:
    """1..10000 connections, at least one per worker: else refused, naming the variable."""
    monkeypatch.setenv("GUNICORN_WORKERS", "4")
    monkeypatch.setenv(ENV_PREFIX + "DATABASE_MAX_CONNECTIONS", budget)
    if accepted:
        assert Settings().database_max_connections == int(budget)
        return
    refused = refusal()
    if budget == "3":
        assert f"{ENV_PREFIX}DATABASE_MAX_CONNECTIONS=3 is below the worker count (4)" in refused
    else:
        assert refused.startswith("Input should be")


@pytest.mark.parametrize(
    ("budget", "workers", "size"),
    [(20, 1, 20), (20, 2, 10), (20, 3, 6), (7, 2, 3), (3, 3, 1), (1, 1, 1)],
)
def test_each_worker_gets_its_whole_share_without_overflow(
    budget: int, workers: int, size: int
) -> None:
    """budget // workers connections, kept once opened (no overflow to open and close)."""
    assert pool_size(budget, workers) == PoolSize(pool_size=size, max_overflow=0)


def test_workers_together_never_exceed_the_budget() -> None:
    """Whatever the worker count, every worker's most connections together fit the budget;
    a budget below the worker count (or no worker) is refused, naming the numbers."""
    for budget in (32, 50, 97, 100):
        for workers in range(1, 33):
            assert 1 <= workers * pool_size(budget, workers).most <= budget, (budget, workers)
    with pytest.raises(ValueError, match="a budget of 3 connections cannot give each of 4"):
        pool_size(3, 4)
    with pytest.raises(ValueError, match="at least 1, not 0"):
        pool_size(10, 0)
