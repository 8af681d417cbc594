{% if cookiecutter.layout == "serving-only" -%}
"""Unit-test fixtures: each test gets the root logger it started with back.

The middleware modules log through the root logger; a test that configures it must not
leak handlers or levels into the next one.
"""
{%- else -%}
"""Unit-test fixtures: a clean environment and logging state for each test, and an app.

The settings read ``<PACKAGE>_*`` variables (and tracing ``OTEL_*``) and ``.env``, so any set
in the developer's shell are removed and each test runs in its own empty directory; the
application configures the root logger at start, so each test gets the root logger it
started with back.
"""
{%- endif %}

{% if cookiecutter.layout == "serving-only" -%}
import logging
from collections.abc import Iterator

import pytest

from .logcapture import JsonLines
{%- else -%}
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from {{ cookiecutter.package_name }}.main import create_app
from {{ cookiecutter.package_name }}.settings import ENV_PREFIX, Settings

from .logcapture import JsonLines


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
def client(app: FastAPI) -> Iterator[TestClient]:
    """A client for ``app`` with its lifespan running; server errors come back as responses."""
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client
{%- endif %}


@pytest.fixture
def json_lines() -> Iterator[JsonLines]:
    """Every record from now on, as the JSON the service would write (request id included)."""
    handler = JsonLines()
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)
