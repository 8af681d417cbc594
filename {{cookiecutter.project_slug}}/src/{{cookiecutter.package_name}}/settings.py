"""The service's settings: one typed object, read from the environment once at start.

Inputs: environment variables prefixed ``{{ cookiecutter.package_name | upper }}_`` (for example
``{{ cookiecutter.package_name | upper }}_ENVIRONMENT=development``). Depends on pydantic-settings only.

A ``.env`` file in the working directory is read too (``.env.example`` documents every
variable); real environment variables win over it, and the image never contains one.

Production refuses to start with ``debug`` on or with any secret left at a placeholder, and
the error names the environment variable to fix. The secret check covers every ``SecretStr``
field, including the ones you add later.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

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


def _origin(value: str, variable: str) -> str:
    """Check one CORS origin: a scheme, a host and maybe a port, as browsers send it."""
    parts = urlsplit(value)
    if (
        parts.scheme not in {"http", "https"}
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username is not None
        or parts.password is not None
    ):
        # Browsers send "https://app.example.com" exactly: a trailing slash or a path never
        # matches, and "*" would let every site read the answers with the user's cookies.
        raise ValueError(
            f"{variable}: {value!r} is not an origin; write scheme://host[:port], "
            "for example https://app.example.com"
        )
    return value


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
        # Development convenience (copy .env.example); variables set in the environment win.
        env_file=".env",
        env_file_encoding="utf-8",
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
    # /docs, /redoc and /openapi.json. Unset: on in development, off in production, where the
    # schema would hand every caller a map of the API. The field order matters: the default
    # reads ``environment``, validated above.
    api_docs: bool = Field(default_factory=lambda data: data.get("environment") == "development")
    # Browser origins allowed to call the API from their pages (CORS), comma-separated:
    # https://app.example.com,https://admin.example.com. Empty (the default): CORS is off,
    # no Access-Control-* header is ever sent, and browsers keep other sites out.
    cors_origins: Annotated[list[str], NoDecode] = []

    @field_validator("log_level", mode="before")
    @classmethod
    def _lowercase_level(cls, value: Any) -> Any:
        # LOG_LEVEL=INFO is what people type; the logging module's names are the same words.
        return value.lower() if isinstance(value, str) else value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [item.strip() for item in value.split(",") if item.strip()]
        if isinstance(value, list):
            variable = cls.env_var("cors_origins")
            return [_origin(item, variable) if isinstance(item, str) else item for item in value]
        return value

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
