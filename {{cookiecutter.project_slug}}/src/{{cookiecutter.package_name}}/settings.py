"""The service's settings: one typed object, read from the environment once at start.

Inputs: environment variables prefixed ``{{ cookiecutter.package_name | upper }}_`` (for example
``{{ cookiecutter.package_name | upper }}_ENVIRONMENT=development``). Depends on pydantic-settings only.

Production refuses to start with ``debug`` on or with any secret left at a placeholder, and
the error names the environment variable to fix. The secret check covers every ``SecretStr``
field, including the ones you add later.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = {{ (cookiecutter.package_name | upper ~ "_") | string_literal }}

# Values people leave in templates and .env examples. Compared after lowercasing and dropping
# everything but letters and digits, so "change-me", "CHANGE_ME" and "<changeme>" all match.
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


def is_placeholder(value: str) -> bool:
    """Tell whether ``value`` is an obvious stand-in rather than a real secret."""
    return _NOT_ALNUM.sub("", value.lower()) in PLACEHOLDERS


class Settings(BaseSettings):
    """Everything the application reads from its environment."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        # A validation error must never print a secret's value into the logs.
        hide_input_in_errors=True,
    )

    environment: Literal["development", "production"] = "production"
    debug: bool = False
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    # The app's own request deadline (middleware/deadline.py). nginx's proxy_read_timeout must
    # stay above it, or nginx answers 504 before the app can, without the request id.
    request_timeout_seconds: float = Field(default=30.0, gt=0)
    # The app's own access line per request. Off by default: behind nginx, nginx's JSON access
    # log already records every request with the same request id and its timings, and the
    # app's line costs about 15 % of a small request's throughput (`make bench`). On for
    # `make run`, or when serving without nginx.
    access_log: bool = False
    # Prometheus request metrics (middleware/metrics.py, docs/observability.md). Off only to
    # measure what they cost, or when something else already counts requests.
    metrics: bool = True

    @field_validator("log_level", mode="before")
    @classmethod
    def _lowercase_level(cls, value: Any) -> Any:
        # LOG_LEVEL=INFO is what people type; the logging module's names are the same words.
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _refuse_unsafe_production(self) -> Self:
        if self.environment != "production":
            return self
        if self.debug:
            raise ValueError(
                f"{self.env_var('debug')} is true in production: debug puts tracebacks in "
                f"error responses; unset it or set {self.env_var('environment')}=development"
            )
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr) and is_placeholder(value.get_secret_value()):
                raise ValueError(
                    f"{self.env_var(name)} holds a placeholder in production: set a real secret"
                )
        return self

    @classmethod
    def env_var(cls, field: str) -> str:
        """Name the environment variable that sets ``field``."""
        alias = cls.model_fields[field].validation_alias
        if isinstance(alias, str):
            return alias.upper()
        return f"{cls.model_config.get('env_prefix', '')}{field}".upper()
