"""Settings (settings.py): prefixed variables and ``.env``, each field's values, unsafe
production refused, every setting documented. Needs settings.py (conftest.py's clean env)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings, is_placeholder


class WithSecret(Settings):
    """What a project adds later: a secret field, which the production check must cover."""

    api_key: SecretStr = SecretStr("")


def test_the_defaults_are_a_safe_production() -> None:
    """Nothing set: production, no debug, docs, CORS or app access log; metrics on; 30 s."""
    assert Settings.__module__.split(".")[0].upper() + "_" == ENV_PREFIX
    defaults = {
        "environment": "production",
        "debug": False,
        "log_level": "info",
        "request_timeout_seconds": 30.0,
        "access_log": False,
        "metrics": True,
        "api_docs": False,
        "cors_origins": (),
        "stream_idle_timeout_seconds": None,
        "stream_max_seconds": None,
    }
    assert Settings().model_dump(include=set(defaults)) == defaults


# (field, value of its variable, the value read): a non-default and the boundaries (those of
# the stack's types, the deadline's and the origins', in stack/tests/test_settings.py).
ACCEPTED = [
    ("environment", "development", "development"),
    ("log_level", "WARNING", "warning"),
    ("request_timeout_seconds", "2.5", 2.5),
    ("access_log", "true", True),
    ("metrics", "false", False),
    ("api_docs", "1", True),
    (
        "cors_origins",
        "https://app.example.com, http://localhost:5173",
        ("https://app.example.com", "http://localhost:5173"),
    ),
    ("cors_origins", " , ", ()),
    ("stream_idle_timeout_seconds", "5", 5.0),
    ("stream_idle_timeout_seconds", "30", 30.0),
    ("stream_max_seconds", "3600", 3600.0),
    ("stream_max_seconds", "30", 30.0),
{%- if cookiecutter.auth == "oidc" %}
    (
        "auth_issuer",
        "https://login.example.com/tenant/v2.0",
        "https://login.example.com/tenant/v2.0",
    ),
    ("auth_leeway_seconds", "0", 0.0),
    ("auth_leeway_seconds", "60", 60.0),
    ("auth_algorithms", "ES256, EdDSA", ("ES256", "EdDSA")),
    ("auth_algorithms", "PS512", ("PS512",)),
    ("auth_scope_claim", "scp", "scp"),
    ("auth_jwks_cooldown_seconds", "1", 1.0),
    ("auth_jwks_cooldown_seconds", "3600", 3600.0),
{%- endif %}
]
REFUSED = [
    ("environment", "staging"),
    ("debug", "true"),
    ("debug", "maybe"),
    ("log_level", "verbose"),
    ("request_timeout_seconds", "0"),
    ("request_timeout_seconds", "soon"),
    ("access_log", "maybe"),
    ("metrics", "maybe"),
    ("api_docs", "maybe"),
    # Above the deadline (30 s): nginx would cut the silent stream first, without a word.
    ("stream_idle_timeout_seconds", "30.5"),
    ("stream_idle_timeout_seconds", "0"),
    ("stream_idle_timeout_seconds", "soon"),
    # Below the deadline: a response is never cut before it; 86400.5: over a day.
    ("stream_max_seconds", "29"),
    ("stream_max_seconds", "86400.5"),
    ("cors_origins", "*"),
    ("cors_origins", "app.example.com"),
    ("cors_origins", "ftp://x.example"),
    ("cors_origins", "https://u:p@x.io"),
{%- if cookiecutter.auth == "oidc" %}
    ("auth_issuer", "issuer.example.com"),
    ("auth_issuer", "https://x.example/?realm=a"),
    ("auth_issuer", "ftp://x.example"),
    ("auth_leeway_seconds", "-1"),
    ("auth_leeway_seconds", "61"),
    ("auth_algorithms", "HS256"),
    ("auth_algorithms", "none"),
    ("auth_algorithms", "RS256,none"),
    ("auth_algorithms", ""),
    ("auth_algorithms", "rs256"),
    ("auth_scope_claim", ""),
    ("auth_scope_claim", "a claim"),
    ("auth_jwks_cooldown_seconds", "0.5"),
{%- endif %}
]


@pytest.mark.parametrize(("field", "value", "expected"), ACCEPTED)
def test_each_variable_sets_its_field(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str, expected: object
) -> None:
    """``<PREFIX><FIELD>`` sets the field, as people type it (upper-case levels, lists)."""
    monkeypatch.setenv(Settings.env_var(field), value)
    if Settings.env_var(field) != field.upper():  # the stack's variables are the bare names
        monkeypatch.setenv(field.upper(), "bare names are someone else's")
    assert getattr(Settings(), field) == expected


@pytest.mark.parametrize(("field", "value"), REFUSED)
def test_a_wrong_value_stops_the_start_naming_it(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    """A wrong value is refused, the error naming the field or its variable, in one line."""
    monkeypatch.setenv(Settings.env_var(field), value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    error = refused.value.errors()[0]  # the first; others follow from it (api_docs')
    assert field in f"{error['loc']} {error['msg']}".lower()
    assert "\n" not in error["msg"]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("LOG_LEVEL", "loud-secret", "LOG_LEVEL is refused: Input should be"),
        # A check across variables: its own message, which names both and shows their values.
        ("STREAM_IDLE_TIMEOUT_SECONDS", "31", "STREAM_IDLE_TIMEOUT_SECONDS=31 is above"),
        # The stack's variable under this prefix (its name before serving-stack 0.2): the app
        # would read it, the stack never (serving_stack.misnamed: both refuse it alike).
        ("REQUEST_TIMEOUT_SECONDS", "60", "REQUEST_TIMEOUT_SECONDS is not read: set REQUEST_"),
    ],
)
def test_a_refused_setting_stops_the_servers_import_in_one_line(
    tmp_path: Path, variable: str, value: str, said: str
) -> None:
    """Imported as uvicorn and gunicorn's workers import it, the app refuses a wrong value in
    one line naming the variable, its value nowhere the message does not show it (it may be a
    secret), and no traceback; status 3 makes gunicorn stop ("worker failed to boot") rather
    than start the next worker."""
    environ = {**os.environ, f"{ENV_PREFIX}{variable}": value}
    command = [sys.executable, "-c", "import {{ cookiecutter.package_name }}.main"]
    done = subprocess.run(
        command, check=False, cwd=tmp_path, env=environ, capture_output=True, text=True
    )

    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {ENV_PREFIX}{said}"), line
    assert value not in line.removeprefix(f"error: {ENV_PREFIX}{said}"), line


def test_dotenv_is_read_the_environment_wins_and_typos_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``.env`` sets values, the environment wins, and a misspelt key there is an error, and
    so is a stack variable under the app's prefix."""
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"{ENV_PREFIX}ENVIRONMENT=development\n{ENV_PREFIX}LOG_LEVEL=debug\n")
    monkeypatch.setenv(ENV_PREFIX + "LOG_LEVEL", "error")
    assert (Settings().environment, Settings().log_level) == ("development", "error")
    dotenv.write_text(f"{ENV_PREFIX}DEBGU=true\n")
    with pytest.raises(ValidationError, match="debgu"):
        Settings()
    with pytest.raises(ValidationError, match="extra_forbidden"):
        Settings(debgu=True)  # type: ignore[call-arg]
    dotenv.write_text(f"{ENV_PREFIX}CORS_ORIGINS=https://a.test\n")
    with pytest.raises(ValidationError, match=f"{ENV_PREFIX}CORS_ORIGINS is not read: set CORS_"):
        Settings()


@pytest.mark.parametrize(
    "value", ["", "changeme", "CHANGE_ME", "<change-me>", "Secret", "xxx", "Change Me", "TODO"]
)
def test_a_placeholder_secret_is_refused_in_production(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Any SecretStr field: a placeholder is refused in production, named, never echoed."""
    assert is_placeholder(value)
    assert not any(map(is_placeholder, ["s3cr3t-4f9a", "secretsauce"]))
    monkeypatch.setenv(ENV_PREFIX + "API_KEY", value)
    with pytest.raises(ValidationError, match=f"{ENV_PREFIX}API_KEY.*placeholder"):
        WithSecret()
    monkeypatch.setenv(ENV_PREFIX + "API_KEY", "hunter2-real-secret")
    assert WithSecret().api_key.get_secret_value() == "hunter2-real-secret"
    monkeypatch.setenv(ENV_PREFIX + "DEBUG", "true")  # refused in production, the key unsaid
    with pytest.raises(ValidationError) as refused:
        WithSecret()
    assert "hunter2" not in str(refused.value)
    relaxed = WithSecret(environment="development", api_key=SecretStr(value))  # DEBUG=true too
    assert (relaxed.api_key.get_secret_value(), relaxed.debug) == (value, True)


def test_every_setting_is_documented_with_an_accepted_example(
    project_root: Path, tmp_path: Path
) -> None:
    """README.md and .env.example name each variable; the example's values are accepted."""
    readme = (project_root / "README.md").read_text(encoding="utf-8")
{%- if cookiecutter.database == "postgresql" %}
    readme += (project_root / "docs" / "database.md").read_text(encoding="utf-8")
{%- endif %}
    example = (project_root / ".env.example").read_text(encoding="utf-8")
    variables = [Settings.env_var(name) for name in Settings.model_fields]
    undocumented = [name for name in variables if f"`{name}`" not in readme]
    assert undocumented == [], "add a row to README.md's Application settings table"
    assert [name for name in variables if name not in example] == [], "add to .env.example"
    lines = [line.lstrip("# ") for line in example.splitlines()]
    (tmp_path / ".env").write_text("\n".join(ln for ln in lines if ln.startswith(ENV_PREFIX)))
    assert Settings().environment == "development"
