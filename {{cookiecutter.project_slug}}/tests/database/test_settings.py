"""The database settings: DATABASE_URL and its checks, the connection budget the workers share
(db/engine.py), timeouts below the deadline. Needs settings.py."""

import pytest
from pydantic import SecretStr, ValidationError

from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings

REAL = "postgresql+asyncpg://svc:Zt8-kq2V93xLm0@db.internal:5432/items"
DEADLINE = "REQUEST_TIMEOUT_SECONDS=30"  # the stack's variable, which the app reads
BUDGET = f"{ENV_PREFIX}DATABASE_MAX_CONNECTIONS"
TIMEOUTS = [f"{ENV_PREFIX}DATABASE_{kind}_TIMEOUT_SECONDS" for kind in ("STATEMENT", "CONNECT")]
BAD_PORT = "has a port that is not"
PLACEHOLDER = "has a placeholder password"


@pytest.mark.parametrize(
    "url",
    [
        REAL,
        REAL.replace("postgresql+asyncpg", "postgres"),
        REAL.replace("+asyncpg", ""),
        "postgresql://app@db/app",  # no password: asyncpg takes PGPASSWORD, ~/.pgpass, peer
        "postgresql+asyncpg://svc:Zt8-kq2V93xLm0@db.internal:65535/items",
    ],
)
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
    ("variable", "value", "message"),
    [
        ("DATABASE_URL", "", "DATABASE_URL is not set"),
        ("DATABASE_URL", "  ", "is not set"),
        ("DATABASE_URL", "mysql://u:p@h/d", "DATABASE_URL must start with postgresql"),
        ("DATABASE_URL", "postgresql://app:s3cret-9f3@db:no-port/items", BAD_PORT),
        ("DATABASE_URL", "postgresql://app:s3cret-9f3@db:99999/items", BAD_PORT),
        ("DATABASE_URL", "postgresql://app:changeme@db:5432/app", PLACEHOLDER),
        ("DATABASE_URL", "postgresql://postgres:postgres@db:5432/app", PLACEHOLDER),
        ("DATABASE_URL", "postgresql://app:@db:5432/app", PLACEHOLDER),
        # At or past the deadline, a timeout would come after the app's own 504.
        *((name, "30", f"{name}=30 must be below {DEADLINE}") for name in TIMEOUTS),
        *((name, "45.5", f"{name}=45.5 must be below {DEADLINE}") for name in TIMEOUTS),
        *((name, bad, "Input should be") for name in TIMEOUTS for bad in ["0", "-1", "soon"]),
        (BUDGET, "3", f"{BUDGET}=3 is below the worker count (4)"),
        *((BUDGET, bad, "Input should be") for bad in ["0", "10001", "many"]),
    ],
)
def test_a_wrong_database_setting_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    """A wrong URL, timeout or budget (four workers) is refused, named, never echoing a URL."""
    monkeypatch.setenv("GUNICORN_WORKERS", "4")
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    refused = str(caught.value.errors()[0]["msg"])
    assert message in refused
    # The URL's error alone (it comes last): pydantic skips the timeouts' default factories.
    assert variable != "DATABASE_URL" or len(caught.value.errors()) == 1
    assert "s3cret-9f3" not in refused
    assert variable != "DATABASE_URL" or value.strip() == "" or value not in refused


def test_database_timeouts_follow_the_request_deadline() -> None:
    """Unset: statements get 80 % of the deadline, connects 5 s or 80 % of it; else as set."""

    def timeouts(chosen: Settings) -> tuple[float, float]:
        return chosen.database_statement_timeout_seconds, chosen.database_connect_timeout_seconds

    assert timeouts(Settings()) == (24, 5)
    assert timeouts(Settings(request_timeout_seconds=2)) == (1.6, 1.6)
    explicit = Settings(database_statement_timeout_seconds=29.5, database_connect_timeout_seconds=1)
    assert timeouts(explicit) == (29.5, 1)


def test_the_worker_count_gunicorn_decides_sizes_the_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack exports the worker count it decided as GUNICORN_WORKERS, which the app reads
    to size each worker's pool (1 when unset: `make run`), a budget of as many fits; under the
    app's prefix it is refused, not a second answer."""
    assert Settings().workers == 1
    for name in ("GUNICORN_WORKERS", BUDGET):
        monkeypatch.setenv(name, "5")
    assert (Settings().workers, Settings().database_max_connections) == (5, 5)
    monkeypatch.setenv(f"{ENV_PREFIX}WORKERS", "7")
    with pytest.raises(ValidationError, match=f"{ENV_PREFIX}WORKERS is not read: set GUNICORN_"):
        Settings()
