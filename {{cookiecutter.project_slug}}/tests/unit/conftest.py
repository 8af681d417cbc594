{% if cookiecutter.layout == "serving-only" -%}
"""Unit-test fixtures: the root logger restored after each test, JSON log capture.
No network and no server: apps run in process through Starlette's TestClient."""
{%- else -%}
"""Unit-test fixtures: each test in an empty directory without the shell's ``<PACKAGE>_*`` and
``OTEL_*`` variables, its root logger restored after; the app and its clients, in process."""
{%- endif %}

import logging
{%- if cookiecutter.layout == "service" %}
import os
{%- endif %}
from collections.abc import Iterator
{%- if cookiecutter.layout == "service" %}
from pathlib import Path
{%- endif %}

import pytest
{%- if cookiecutter.layout == "service" %}
from fastapi import FastAPI
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings

from .asgi import ClientFor, JsonLines
{%- else %}

from .asgi import JsonLines
{%- endif %}

{%- if cookiecutter.layout == "service" %}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Settings also read .env from the working directory: a developer's own must not count.
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        # OTEL_*: an exporter endpoint in the shell would make every test app export spans.
        if name.upper().startswith((ENV_PREFIX, "OTEL_")):
            monkeypatch.delenv(name)
{%- endif %}


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


{%- if cookiecutter.layout == "service" %}


@pytest.fixture
def app() -> FastAPI:
    """The application as production builds it, from default settings."""
    return create_app(Settings())


@pytest.fixture
def client(app: FastAPI, client_for: ClientFor) -> TestClient:
    """A running client of ``app``."""
    return client_for(app)
{%- endif %}


@pytest.fixture
def json_lines() -> JsonLines:
    """Every record from now on, as the JSON the service would write (request id included);
    _restore_logging removes the handler after the test."""
    handler = JsonLines()
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    return handler
