"""Settings: read from prefixed environment variables, and refuse unsafe production."""

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from {{ cookiecutter.package_name }} import settings as settings_module
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings, is_placeholder


class WithSecret(Settings):
    """What a project adds later: a secret field, which the production check must cover."""

    api_key: SecretStr = SecretStr("")


def test_prefix_is_the_package_name_in_upper_case() -> None:
    """The variables are named after the package, so two services never share one."""
    package = settings_module.__name__.split(".")[0]
    assert package.upper() + "_" == ENV_PREFIX
    assert Settings.env_var("debug") == package.upper() + "_DEBUG"


def test_defaults_are_production_without_debug() -> None:
    """With nothing set, the service runs as production with a 30 s request deadline."""
    settings = Settings()
    assert settings.environment == "production"
    assert settings.debug is False
    assert settings.log_level == "info"
    assert settings.request_timeout_seconds == 30.0


def test_values_come_from_prefixed_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each field reads ``<PREFIX><FIELD>``."""
    monkeypatch.setenv(ENV_PREFIX + "ENVIRONMENT", "development")
    monkeypatch.setenv(ENV_PREFIX + "REQUEST_TIMEOUT_SECONDS", "2.5")
    settings = Settings()
    assert settings.environment == "development"
    assert settings.request_timeout_seconds == 2.5


def test_unprefixed_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare ``DEBUG`` from some other tool does not switch this service to debug."""
    monkeypatch.setenv("DEBUG", "true")
    monkeypatch.setenv("ENVIRONMENT", "development")
    assert Settings().environment == "production"


def test_log_level_accepts_upper_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LOG_LEVEL=WARNING`` works as people type it."""
    monkeypatch.setenv(ENV_PREFIX + "LOG_LEVEL", "WARNING")
    assert Settings().log_level == "warning"


def test_unknown_log_level_is_refused() -> None:
    """A typo in the level stops the start instead of logging at a default."""
    with pytest.raises(ValidationError, match="log_level"):
        Settings(log_level="verbose")  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [0, -1])
def test_request_timeout_must_be_positive(timeout: float) -> None:
    """A zero or negative deadline would time out every request."""
    with pytest.raises(ValidationError, match="request_timeout_seconds"):
        Settings(request_timeout_seconds=timeout)


def test_unknown_fields_are_refused() -> None:
    """A misspelt setting is an error, not silently ignored."""
    with pytest.raises(ValidationError, match="extra_forbidden"):
        Settings(debgu=True)  # type: ignore[call-arg]


def test_debug_is_refused_in_production() -> None:
    """Production with debug on does not start, and the error names the variable."""
    with pytest.raises(ValidationError, match=ENV_PREFIX + "DEBUG"):
        Settings(debug=True)


def test_debug_is_allowed_in_development() -> None:
    """Developers may turn debug on."""
    assert Settings(environment="development", debug=True).debug is True


def test_debug_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check applies to values from variables, which is how production sets them."""
    monkeypatch.setenv(ENV_PREFIX + "DEBUG", "1")
    with pytest.raises(ValidationError, match=ENV_PREFIX + "DEBUG"):
        Settings()


@pytest.mark.parametrize("value", ["", "changeme", "CHANGE_ME", "<change-me>", "secret", "xxx"])
def test_placeholder_secrets_are_refused_in_production(value: str) -> None:
    """Any SecretStr field, including ones added later, must hold a real secret."""
    with pytest.raises(ValidationError, match=ENV_PREFIX + "API_KEY") as error:
        WithSecret(api_key=SecretStr(value))
    assert "placeholder" in str(error.value)


def test_placeholder_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret set to a placeholder through its variable is refused, naming that variable."""
    monkeypatch.setenv(ENV_PREFIX + "API_KEY", "change-me")
    with pytest.raises(ValidationError, match=ENV_PREFIX + "API_KEY"):
        WithSecret()


def test_the_refusal_never_shows_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation errors hide their input, so a secret never reaches the logs."""
    monkeypatch.setenv(ENV_PREFIX + "API_KEY", "hunter2-real-secret")
    monkeypatch.setenv(ENV_PREFIX + "DEBUG", "true")
    with pytest.raises(ValidationError) as error:
        WithSecret()
    assert "hunter2" not in str(error.value)


def test_real_secret_is_accepted_in_production() -> None:
    """A secret that is not a placeholder passes."""
    settings = WithSecret(api_key=SecretStr("e3b0c44298fc1c149afbf4c8996fb924"))
    assert settings.api_key.get_secret_value() == "e3b0c44298fc1c149afbf4c8996fb924"


def test_placeholder_is_allowed_in_development() -> None:
    """Local runs need not invent secrets."""
    assert WithSecret(environment="development").api_key.get_secret_value() == ""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("changeme", True),
        ("Change Me", True),
        ("TODO", True),
        ("s3cr3t-4f9a", False),
        ("secretsauce", False),
    ],
)
def test_is_placeholder(value: str, expected: bool) -> None:  # noqa: FBT001
    """Placeholders match whole words after normalising case and punctuation."""
    assert is_placeholder(value) is expected


def test_every_setting_is_documented(project_root: Path) -> None:
    """README.md names each setting's variable, so none is discovered by reading code."""
    readme = (project_root / "README.md").read_text(encoding="utf-8")
{%- if cookiecutter.database == "postgresql" %}
    readme += (project_root / "docs" / "database.md").read_text(encoding="utf-8")
{%- endif %}
    missing = [
        Settings.env_var(name)
        for name in Settings.model_fields
        if f"`{Settings.env_var(name)}`" not in readme
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("environment", "expected"), [("production", False), ("development", True)]
)
def test_api_docs_default_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch,
    environment: str,
    expected: bool,  # noqa: FBT001 - parametrized
) -> None:
    """Unset, the API docs are on in development and off in production."""
    monkeypatch.setenv(ENV_PREFIX + "ENVIRONMENT", environment)
    assert Settings().api_docs is expected


def test_api_docs_can_be_turned_on_in_production(monkeypatch: pytest.MonkeyPatch) -> None:
    """One variable publishes them where that is wanted."""
    monkeypatch.setenv(ENV_PREFIX + "API_DOCS", "true")
    assert Settings().api_docs is True


def test_a_wrong_api_docs_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only booleans: "maybe" stops the start, naming the field."""
    monkeypatch.setenv(ENV_PREFIX + "API_DOCS", "maybe")
    with pytest.raises(ValidationError, match="api_docs"):
        Settings()


def test_cors_is_off_by_default() -> None:
    """No origin is allowed unless listed."""
    assert Settings().cors_origins == []


def test_cors_origins_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list as people write it in an environment variable, spaces tolerated."""
    monkeypatch.setenv(
        ENV_PREFIX + "CORS_ORIGINS", "https://app.example.com, http://localhost:5173"
    )
    assert Settings().cors_origins == ["https://app.example.com", "http://localhost:5173"]


def test_an_empty_cors_variable_means_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The boundary: set but empty (or only commas) allows nothing."""
    monkeypatch.setenv(ENV_PREFIX + "CORS_ORIGINS", " , ")
    assert Settings().cors_origins == []


@pytest.mark.parametrize(
    "origin",
    ["*", "https://app.example.com/", "app.example.com", "ftp://x.example", "https://u:p@x.io"],
)
def test_a_wrong_cors_origin_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, origin: str
) -> None:
    """A wildcard, a path or a missing scheme stops the start with one line that says why."""
    monkeypatch.setenv(ENV_PREFIX + "CORS_ORIGINS", origin)
    with pytest.raises(ValidationError) as refused:
        Settings()
    message = refused.value.errors()[0]["msg"]
    assert ENV_PREFIX + "CORS_ORIGINS" in message
    assert "scheme://host[:port]" in message
    assert "\n" not in message


def test_a_dotenv_file_is_read_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``.env`` in the working directory sets values; a real variable overrides it."""
    (tmp_path / ".env").write_text(
        f"{ENV_PREFIX}ENVIRONMENT=development\n{ENV_PREFIX}LOG_LEVEL=debug\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_PREFIX + "LOG_LEVEL", "error")
    settings = Settings()
    assert settings.environment == "development"
    assert settings.log_level == "error"


def test_a_typo_in_dotenv_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A misspelt prefixed key in ``.env`` is an error, not silently ignored."""
    (tmp_path / ".env").write_text(f"{ENV_PREFIX}DEBGU=true\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValidationError, match="debgu"):
        Settings()


def test_env_example_documents_every_setting(
    project_root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """.env.example names each field's variable, and its values, uncommented, are accepted."""
    example = (project_root / ".env.example").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert Settings.env_var(name) in example, name
    lines = [line.lstrip("# ") for line in example.splitlines()]
    (tmp_path / ".env").write_text(
        "\n".join(line for line in lines if line.startswith(ENV_PREFIX)), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert Settings().environment == "development"
