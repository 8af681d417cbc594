"""The database settings: DATABASE_URL as a secret, its checks, timeouts within the deadline."""

import pytest
from pydantic import SecretStr, ValidationError

from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings

REAL = "postgresql+asyncpg://svc:Zt8-kq2V93xLm0@db.internal:5432/items"


def one_error(**values: object) -> str:
    """The single error message Settings gives for ``values``."""
    with pytest.raises(ValidationError) as caught:
        Settings(**values)  # type: ignore[arg-type]
    (error,) = caught.value.errors()
    return str(error["msg"])


def test_url_comes_from_the_unprefixed_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """DATABASE_URL, the name compose, platforms and alembic use, sets the URL."""
    monkeypatch.setenv("DATABASE_URL", REAL)
    settings = Settings()
    assert settings.database_url.get_secret_value() == REAL
    assert Settings.env_var("database_url") == "DATABASE_URL"


def test_url_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The password never appears in the settings' repr (logs, tracebacks)."""
    monkeypatch.setenv("DATABASE_URL", REAL)
    assert "Zt8-kq2V93xLm0" not in repr(Settings())


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_plain_schemes_are_driven_by_asyncpg(scheme: str) -> None:
    """postgres:// and postgresql:// (what platforms hand out) become postgresql+asyncpg://."""
    url = REAL.replace("postgresql+asyncpg", scheme)
    assert Settings(database_url=SecretStr(url)).database_url.get_secret_value() == REAL


def test_a_missing_url_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without DATABASE_URL the service does not start, and says what to set."""
    monkeypatch.delenv("DATABASE_URL")
    assert "DATABASE_URL is not set" in one_error()


@pytest.mark.parametrize(
    "url", ["mysql://u:p@h/d", "sqlite:///items.db", "db.internal:5432/items", "  "]
)
def test_a_wrong_scheme_is_refused_without_echoing_the_url(url: str) -> None:
    """Anything but PostgreSQL is refused in one message that never repeats the URL."""
    message = one_error(database_url=url)
    assert message.startswith("Value error, DATABASE_URL ")
    assert url.strip() == "" or url not in message


@pytest.mark.parametrize("port", ["no-port", "99999", "-1", "54 32"])
def test_a_port_that_is_not_a_port_is_refused_without_echoing_the_url(port: str) -> None:
    """A port asyncpg could never dial is refused at start, in one message without the URL;
    the boundary 65535 is accepted."""
    url = f"postgresql+asyncpg://app:s3cret-9f3@db.internal:{port}/items"
    message = one_error(database_url=url)
    assert message.startswith("Value error, DATABASE_URL has a port that is not a number")
    assert "s3cret-9f3" not in message
    assert Settings(database_url=SecretStr("postgresql://app:s3cret-9f3@db:65535/items"))


@pytest.mark.parametrize(
    "credentials", ["app:changeme", "postgres:postgres", "app:password", "app:", "u:CHANGE_ME"]
)
def test_placeholder_credentials_are_refused_in_production(credentials: str) -> None:
    """A placeholder password, or the user name as password, stops production."""
    url = f"postgresql://{credentials}@db:5432/app"
    message = one_error(database_url=url)
    assert "DATABASE_URL has a placeholder password" in message
    assert url not in message


def test_placeholder_credentials_are_allowed_in_development() -> None:
    """A laptop's postgres:postgres is fine outside production."""
    url = "postgresql://postgres:postgres@localhost/app"
    assert Settings(database_url=SecretStr(url), environment="development").database_url


def test_a_url_without_a_password_is_allowed() -> None:
    """No password in the URL: asyncpg takes PGPASSWORD, ~/.pgpass or peer authentication."""
    assert Settings(database_url=SecretStr("postgresql://app@db/app")).database_url


def test_statement_timeout_defaults_below_the_request_deadline() -> None:
    """Unset, the statement timeout is 80 % of the deadline: PostgreSQL gives up first."""
    assert Settings(request_timeout_seconds=10).statement_timeout_seconds == 8.0
    assert Settings().statement_timeout_seconds == 24.0


def test_an_explicit_statement_timeout_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """<PREFIX>_DATABASE_STATEMENT_TIMEOUT_SECONDS sets it, fractions included."""
    monkeypatch.setenv(ENV_PREFIX + "DATABASE_STATEMENT_TIMEOUT_SECONDS", "2.5")
    assert Settings().statement_timeout_seconds == 2.5


@pytest.mark.parametrize("field", ["statement", "connect"])
@pytest.mark.parametrize("value", [30, 45.5])
def test_a_database_timeout_at_or_past_the_deadline_is_refused(field: str, value: float) -> None:
    """A timeout the request deadline would cut first is refused, naming both variables."""
    message = one_error(**{f"database_{field}_timeout_seconds": value})
    variable = f"{ENV_PREFIX}DATABASE_{field.upper()}_TIMEOUT_SECONDS"
    assert f"{variable}={value:g} must be below {ENV_PREFIX}REQUEST_TIMEOUT_SECONDS=30" in message


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_non_positive_or_non_numeric_timeout_is_refused(value: str) -> None:
    """Zero would disable the timeout in PostgreSQL; it is refused like any non-number."""
    with pytest.raises(ValidationError, match="database_statement_timeout_seconds"):
        Settings(database_statement_timeout_seconds=value)  # type: ignore[arg-type]


def test_connect_timeout_shrinks_with_a_short_deadline() -> None:
    """5 s by default, but never past 80 % of a shorter request deadline."""
    assert Settings().connect_timeout_seconds == 5.0
    assert Settings(request_timeout_seconds=2).connect_timeout_seconds == 1.6


def test_workers_come_from_gunicorn_or_web_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    """GUNICORN_WORKERS (gunicorn.conf.py exports it) wins over WEB_CONCURRENCY; default 1."""
    assert Settings().workers == 1
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    assert Settings().workers == 3
    monkeypatch.setenv("GUNICORN_WORKERS", "4")
    assert Settings().workers == 4


def test_a_budget_below_the_worker_count_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer connections than workers is refused at start, naming the variable and both numbers."""
    monkeypatch.setenv("GUNICORN_WORKERS", "4")
    message = one_error(database_max_connections=3)
    assert f"{ENV_PREFIX}DATABASE_MAX_CONNECTIONS=3 is below the worker count (4)" in message
    assert Settings(database_max_connections=4).database_max_connections == 4


@pytest.mark.parametrize("value", ["0", "10001", "many"])
def test_a_budget_out_of_range_is_refused(value: str) -> None:
    """The budget is 1..10000 connections."""
    with pytest.raises(ValidationError, match="database_max_connections"):
        Settings(database_max_connections=value)  # type: ignore[arg-type]
