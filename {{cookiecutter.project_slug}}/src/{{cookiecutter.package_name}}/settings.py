"""The service's settings: one typed object, read at start from the environment and ``.env``
(the environment wins). Production refuses debug and any placeholder ``SecretStr`` (the ones
you add too), naming the variable to fix. Two variables are the serving stack's, read by its
names (REQUEST_TIMEOUT_SECONDS, CORS_ORIGINS: one definition each, in serving_stack)."""

{% if cookiecutter.auth == "oidc" or cookiecutter.jobs == "procrastinate" %}import ipaddress
{% endif %}import os
import re
from typing import {% if cookiecutter.auth == "oidc" %}Annotated, {% endif %}Any, Literal, Self
{%- if cookiecutter.database == "postgresql" %}
from urllib.parse import urlsplit, urlunsplit
{%- elif cookiecutter.auth == "oidc" %}
from urllib.parse import urlsplit
{%- endif %}
{%- if cookiecutter.database == "postgresql" or cookiecutter.auth == "oidc" %}

from pydantic import (
    AliasChoices,
{%- if cookiecutter.auth == "oidc" %}
    BeforeValidator,
{%- endif %}
    Field,
{%- if cookiecutter.jobs == "procrastinate" %}
    HttpUrl,
    IPvAnyAddress,
{%- endif %}
    SecretStr,
    ValidationError,
{%- if cookiecutter.database == "postgresql" %}
    field_validator,
{%- endif %}
    model_validator,
)
{%- else %}

from pydantic import AliasChoices, Field, SecretStr, ValidationError, model_validator
{%- endif %}
{%- if cookiecutter.auth == "oidc" %}
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
{%- else %}
from pydantic_settings import BaseSettings, SettingsConfigDict
{%- endif %}
from serving_stack import (
    APP_CORS_NAME,
    APP_DEADLINE_NAME,
    DEADLINE_DEFAULT,
    Deadline,
    LogLevel,
    Origins,
    misnamed,
    variable_names,
)
{%- if cookiecutter.jobs == "procrastinate" %}

# Seconds a stopping worker needs after its drain: cancel what runs, record each as retried.
JOBS_ABORT_MARGIN = 5.0
{%- endif %}

ENV_PREFIX = {{ (cookiecutter.package_name | upper ~ "_") | string_literal }}
# The serving stack's variables as .env's keys reach this model (lower case).
STACK_KEYS = frozenset(name.lower() for name in variable_names())

# Stand-ins people leave in .env files; compared lowercased, letters and digits only.
PLACEHOLDERS = frozenset(
    {
        "",
        "changeme",
        "changethis",
        "replaceme",
        "placeholder",
        "secret",
        "password",
        "default",
        "example",
        "dummy",
        "todo",
        "fixme",
        "xxx",
        "none",
        "null",
    }
)
_NOT_ALNUM = re.compile(r"[^a-z0-9]")
{%- if cookiecutter.auth == "oidc" %}

# Signature algorithms a token may use: asymmetric only. "none" and HS* (a shared secret,
# the key confusion of RFC 8725 section 2.1) are no choice at all.
Algorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
]
Algorithms = Annotated[
    tuple[Algorithm, ...],
    NoDecode,  # a comma-separated list, not JSON
    BeforeValidator(lambda v: tuple(re.split(r"[\s,]+", v.strip())) if isinstance(v, str) else v),
    Field(min_length=1),
]
# An issuer is an https URL (http for a provider on this machine), no query or fragment.
ISSUER_PATTERN = r"^(https?://[^\s?#]+)?$"


def is_loopback(host: str) -> bool:
    """Tell whether ``host`` names this machine (localhost, 127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: not this machine's, as far as settings can tell
        return False
{%- endif %}


def is_placeholder(value: str) -> bool:
    """Tell whether ``value`` is an obvious stand-in rather than a real secret."""
    return _NOT_ALNUM.sub("", value.lower()) in PLACEHOLDERS


class Settings(BaseSettings):
    """Everything the application reads from its environment."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        hide_input_in_errors=True,  # an error must never print a secret into the logs
        validate_by_name=True,  # tests pass fields by name; the environment, by their variable
        env_file=".env",  # for development (copy .env.example); the environment wins
        env_file_encoding="utf-8",
    )

    environment: Literal["development", "production"] = "production"
    debug: bool = False
    log_level: LogLevel = "info"  # LOG_LEVEL=INFO is what people type: lowercased
    # The stack's variable (it derives nginx's and gunicorn's timeouts from it), by its name.
    request_timeout_seconds: Deadline = Field(
        default=DEADLINE_DEFAULT, validation_alias=AliasChoices(APP_DEADLINE_NAME)
    )
    # A started response silent this long is cut; unset: the deadline, its maximum (nginx
    # would cut it first, silently: docs/streaming.md).
    stream_idle_timeout_seconds: float | None = Field(default=None, gt=0, le=3600)
    # A response still streaming this long after its request arrived is cut; unset: never.
    stream_max_seconds: float | None = Field(default=None, gt=0, le=86400)
    # Off: nginx's access line has the request id and timings already (docs/app.md, Logs).
    access_log: bool = False
    # Prometheus request metrics (docs/observability.md); off only to measure their cost.
    metrics: bool = True
    # /docs and /openapi.json; unset: on in development only (the schema maps the API).
    api_docs: bool = Field(default_factory=lambda data: data.get("environment") == "development")
    # CORS origins, comma-separated (empty: off); the stack's variable, as nginx reads it too.
    cors_origins: Origins = Field(default=(), validation_alias=AliasChoices(APP_CORS_NAME))
{%- if cookiecutter.auth == "oidc" %}
    # The OpenID provider whose access tokens the API accepts, exactly as its tokens' "iss"
    # and its discovery document say it (docs/auth.md); required in production.
    auth_issuer: str = Field(default="", pattern=ISSUER_PATTERN, max_length=2000)
    # The "aud" a token must hold: this API's identifier at the provider; required in production.
    auth_audience: str = Field(default="", max_length=2000)
    # Clock skew forgiven on exp, nbf and iat: a minute at most keeps an expired token expired.
    auth_leeway_seconds: float = Field(default=30.0, ge=0, le=60)
    # The algorithms the issuer signs with, comma-separated; asymmetric only.
    auth_algorithms: Algorithms = ("RS256", "PS256", "ES256", "EdDSA")
    # The claim holding a token's scopes: "scope" (RFC 9068), "scp" (Entra ID), "roles"...
    auth_scope_claim: str = Field(default="scope", pattern=r"^[A-Za-z0-9_.:/-]{1,100}$")
    # A token naming an unknown key refetches the JWKS at most once per this many seconds.
    auth_jwks_cooldown_seconds: float = Field(default=30.0, ge=1, le=3600)
{%- endif %}
{%- if cookiecutter.database == "postgresql" %}
    # Connections this server's workers may open together (docs/database.md, the budget).
    database_max_connections: int = Field(default=20, ge=1, le=10_000)
    # PostgreSQL cancels a longer statement; unset: 80 % of the deadline (the rest: pool,
    # network), so the app answers 503 before its 504.
    database_statement_timeout_seconds: float = Field(
        default_factory=lambda data: data.get("request_timeout_seconds", 0) * 0.8, gt=0
    )
    # Connecting, or waiting for a pooled connection, past this is a 503; unset: 5 s (a busy
    # network's; a server that is down refuses at once), within 80 % of a shorter deadline.
    database_connect_timeout_seconds: float = Field(
        default_factory=lambda data: min(5.0, data.get("request_timeout_seconds", 0) * 0.8), gt=0
    )
    # /readyz 503 while the database is away; off, it only reports it (docs/database.md).
    readiness_requires_database: bool = False
    # gunicorn's worker count (the stack's gunicorn config exports it), or WEB_CONCURRENCY; else 1.
    workers: int = Field(
        default=1,
        ge=1,
        le=1024,
        validation_alias=AliasChoices("GUNICORN_WORKERS", "WEB_CONCURRENCY"),
    )
{%- if cookiecutter.jobs == "procrastinate" %}
    # The job worker's (docs/jobs.md): jobs one worker process runs at once.
    jobs_concurrency: int = Field(default=8, ge=1, le=256)
    # Its pool's connections: the listener holds one, fetching and finishing jobs share the rest.
    jobs_max_connections: int = Field(default=4, ge=2, le=1000)
    # After SIGTERM, running jobs have this long to finish; then they are aborted and retried.
    jobs_drain_seconds: float = Field(default=20, gt=0, le=3600)
    # A worker beats this often; one silent for 3 beats is stalled and its jobs run again.
    jobs_heartbeat_seconds: float = Field(default=10, ge=0.1, le=300)
    # Every task without a retry policy of its own: this many runs in all, waits of
    # JOBS_RETRY_BASE_SECONDS ** attempt between them (2: 2, 4, 8, 16 s).
    jobs_max_attempts: int = Field(default=5, ge=1, le=100)
    jobs_retry_base_seconds: int = Field(default=2, ge=1, le=60)
    # Failed and aborted jobs are kept this long for a person to look at, then deleted.
    jobs_keep_failed_hours: int = Field(default=168, ge=1, le=87_600)
    # The worker's /livez and /metrics (loopback unless set; the image sets 0.0.0.0).
    jobs_health_host: IPvAnyAddress = ipaddress.IPv4Address("127.0.0.1")
    jobs_health_port: int = Field(default=9465, ge=1, le=65535)
    # Where the example job announces each new item (unset: the job only logs it).
    item_webhook_url: HttpUrl | None = None
    # Seconds the platform grants a stopping worker before SIGKILL (the stack's variable):
    # the drain plus its abort margin must fit.
    stop_grace_period: float | None = Field(
        default=None, gt=0, le=86_400, validation_alias=AliasChoices("STOP_GRACE_PERIOD")
    )
{%- endif %}
    # Unprefixed, as platforms and migrations/env.py name it; required (docs/database.md).
    # Last: pydantic calls no default factory above once a field before it failed, and a
    # missing URL would then be three errors instead of the one that says what to do.
    database_url: SecretStr = Field(
        default=SecretStr(""), validation_alias="DATABASE_URL", validate_default=True
    )
{%- endif %}

    @model_validator(mode="before")
    @classmethod
    def _leave_the_stack_its_variables(cls, data: Any) -> Any:
        # MY_SERVICE_REQUEST_TIMEOUT_SECONDS would be read here by field name, never by the
        # stack (nginx would keep its own timeout): refused on both sides, in one line; so is
        # a field read by another name (its validation alias) spelled under the prefix.
        aliased = {
            name.upper(): cls.env_var(name)
            for name, field in cls.model_fields.items()
            if field.validation_alias is not None
        }
        if wrong := misnamed(ENV_PREFIX, os.environ) or misnamed(ENV_PREFIX, os.environ, aliased):
            raise ValueError(wrong)
        # .env's stack variables (PORT, ...) are no misspellings for extra="forbid" to refuse.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k in cls.model_fields or k not in STACK_KEYS}
        return data
{%- if cookiecutter.database == "postgresql" %}

    @field_validator("database_url", mode="after")
    @classmethod
    def _asyncpg_url(cls, value: SecretStr) -> SecretStr:
        # The message never repeats the URL: it holds the password.
        example = "postgresql+asyncpg://user:password@host:5432/name"
        if not value.get_secret_value().strip():
            raise ValueError(f"DATABASE_URL is not set: give the PostgreSQL URL, {example}")
        parts = urlsplit(value.get_secret_value())
        if parts.scheme not in {"postgresql+asyncpg", "postgresql", "postgres"}:  # all asyncpg's
            scheme = f"{parts.scheme}://" if parts.scheme else "nothing"
            raise ValueError(f"DATABASE_URL must start with postgresql+asyncpg://, not {scheme}")
        try:  # else asyncpg fails at its first connection, in a traceback quoting the URL
            parts.port  # noqa: B018 (read for the ValueError it raises)
        except ValueError:
            message = f"DATABASE_URL has a port that is not a number from 0 to 65535: {example}"
            raise ValueError(message) from None
        return SecretStr(urlunsplit(parts._replace(scheme="postgresql+asyncpg")))
{%- endif %}

    @model_validator(mode="after")
    def _limits_fit(self) -> Self:
        deadline = f"{APP_DEADLINE_NAME}={self.request_timeout_seconds:g}"
{%- if cookiecutter.database == "postgresql" %}
        for name in ("database_statement_timeout_seconds", "database_connect_timeout_seconds"):
            value = getattr(self, name)
            if value >= self.request_timeout_seconds:
                late = "the request would be cut at its deadline before the database gave up"
                raise ValueError(f"{self.env_var(name)}={value:g} must be below {deadline}: {late}")
        if self.database_max_connections < self.workers:
            budget = f"{self.env_var('database_max_connections')}={self.database_max_connections}"
            need = f"below the worker count ({self.workers}): every worker needs a connection"
            raise ValueError(f"{budget} is {need}")
{%- endif %}
{%- if cookiecutter.jobs == "procrastinate" %}
        grace, stop = self.stop_grace_period, self.jobs_drain_seconds + JOBS_ABORT_MARGIN
        if grace is not None and grace < stop:
            drain = f"{self.env_var('jobs_drain_seconds')}={self.jobs_drain_seconds:g}"
            raise ValueError(
                f"STOP_GRACE_PERIOD={grace:g} is below the job worker's stop ({drain} plus"
                f" {JOBS_ABORT_MARGIN:g} s to abort what is left): the platform would kill it"
                " mid-drain and its jobs would wait to be found stalled; lower one, raise the other"
            )
{%- endif %}
        idle, longest = self.stream_idle_timeout_seconds, self.stream_max_seconds
        if idle is not None and idle > self.request_timeout_seconds:
            raise ValueError(
                f"{self.env_var('stream_idle_timeout_seconds')}={idle:g} is above {deadline}:"
                " nginx would cut a silent stream first, without a word; lower it, or raise"
                " the deadline"
            )
        if longest is not None and longest < self.request_timeout_seconds:
            raise ValueError(
                f"{self.env_var('stream_max_seconds')}={longest:g} is below {deadline}: no"
                " response is cut before the deadline; raise it, or unset it"
            )
        return self

    @model_validator(mode="after")
    def _refuse_unsafe_production(self) -> Self:
        if self.environment != "production":
            return self
        if self.debug:
            raise ValueError(
                f"{self.env_var('debug')} is true in production: debug puts tracebacks in "
                f"error responses; unset it or set {self.env_var('environment')}=development"
            )
{%- if cookiecutter.auth == "oidc" %}
        if not (self.auth_issuer and self.auth_audience):
            raise ValueError(
                f"{self.env_var('auth_issuer')} and {self.env_var('auth_audience')} must be set in "
                "production: without them no token can be verified (docs/auth.md)"
            )
        issuer = urlsplit(self.auth_issuer)
        if issuer.scheme == "http" and not is_loopback(issuer.hostname or ""):
            raise ValueError(
                f"{self.env_var('auth_issuer')} is http:// in production, off this machine: the "
                "keys that sign tokens would come unauthenticated; use its https:// URL"
            )
{%- endif %}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr) and is_placeholder(value.get_secret_value()):
                raise ValueError(
                    f"{self.env_var(name)} holds a placeholder in production: set a real secret"
                )
{%- if cookiecutter.database == "postgresql" %}
        url = urlsplit(self.database_url.get_secret_value())
        password = url.password  # None is allowed: asyncpg takes PGPASSWORD, ~/.pgpass, peer auth
        if password is not None and (is_placeholder(password) or password == url.username):
            raise ValueError(
                "DATABASE_URL has a placeholder password (or the user name as password) in "
                "production: set real credentials"
            )
{%- endif %}
        return self

    @classmethod
    def env_var(cls, field: str) -> str:
        """Name the environment variable that sets ``field``."""
        alias = cls.model_fields[field].validation_alias
        if isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str):
            return alias.choices[0].upper()
        if isinstance(alias, str):
            return alias.upper()
        return f"{ENV_PREFIX}{field}".upper()


def refusal(refused: ValidationError) -> str:
    """The first of ``refused``'s errors (the others follow from it) in one line, naming the
    variable; never its value, which may be a secret."""
    error = refused.errors(include_url=False)[0]
    reason = error["msg"].removeprefix("Value error, ")
    if not error["loc"]:  # a check across variables: its message names them
        return reason
    name = str(error["loc"][0])
    variable = Settings.env_var(name) if name in Settings.model_fields else name.upper()
    return reason if variable in reason else f"{variable} is refused: {reason}"
