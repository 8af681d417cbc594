"""The ASGI app: ``create_app()`` builds it from settings.py, ``app`` is what servers import.
The middleware order and why: docs/app.md."""

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.telemetry import TelemetryConfig
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

{% if cookiecutter.database == "postgresql" -%}
from .api import channels, health, index, items_db
{%- else -%}
from .api import health, index, items
{%- endif %}
from .api.docs import add_api_docs
from .api.health import ReadinessChecks
{%- if cookiecutter.auth == "oidc" %}
from .auth.verifier import TokenVerifier
{%- endif %}
{%- if cookiecutter.database == "postgresql" %}
from .db.channels import ChannelHub
from .db.engine import UNAVAILABLE_ERRORS, database_unavailable, open_database
{%- endif %}
from .errors import http_error_handler, validation_error_handler
from .logs import configure_logging
from .middleware.access_log import AccessLogMiddleware
from .middleware.deadline import DeadlineMiddleware
from .middleware.error_guard import ErrorGuardMiddleware
from .middleware.metrics import MetricsMiddleware, RequestMetrics
from .middleware.request_id import RequestIdMiddleware
from .settings import Settings, refusal
from .tracing import telemetry_config

TITLE = {{ cookiecutter.project_name | python_string(before="TITLE = ") }}
ACCESS_LOGGER = {{ (cookiecutter.package_name ~ ".access") | string_literal }}

logger = logging.getLogger(__name__)


def middleware_stack(settings: Settings, metrics: RequestMetrics) -> list[Middleware]:
    """The pure-ASGI middleware, outermost first (docs/app.md); those off are left out."""
    # Outside the error guard and the deadline, so their 500s and 504s carry its headers.
    cors = Middleware(
        CORSMiddleware,
        allow_origins=settings.cors_origins,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
        expose_headers=["X-Request-ID", "Retry-After"],
        max_age=600,
    )
    return [
        Middleware(RequestIdMiddleware),
        *([Middleware(MetricsMiddleware, metrics=metrics)] if settings.metrics else []),
        *([cors] if settings.cors_origins else []),
        *([Middleware(AccessLogMiddleware, logger=ACCESS_LOGGER)] if settings.access_log else []),
        Middleware(
            DeadlineMiddleware,
            timeout_seconds=settings.request_timeout_seconds,
            stream_idle_seconds=settings.stream_idle_timeout_seconds,
            stream_max_seconds=settings.stream_max_seconds,
        ),
        Middleware(ErrorGuardMiddleware, debug=settings.debug),
    ]


def create_app(
    settings: Settings | None = None, *, telemetry: TelemetryConfig | None = None
) -> FastAPI:
    """Build the app from ``settings`` (default: the environment); ``telemetry`` overrides
    tracing.py's options (tests pass their own tracer provider)."""
    settings = settings or Settings()
    metrics = RequestMetrics(deadline_seconds=settings.request_timeout_seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Not at import: importing the module (tests, tools) must not reconfigure logging.
        configure_logging(settings.log_level, human=settings.environment == "development")
        extra = {"environment": settings.environment, "title": app.title}
        logger.info("application starting", extra=extra)
{%- if cookiecutter.database == "postgresql" %}
        async with open_database(settings) as database:
            app.state.database = database
            # Its LISTEN connection opens at the first subscriber (docs/streaming.md).
            app.state.channels = ChannelHub(database.engine, settings)
            # Reported, not required, unless the settings say so (docs/database.md).
            required = settings.readiness_requires_database
            app.state.readiness.add("database", database.ping, required=required)
            yield
            app.state.readiness.remove("database")
            await app.state.channels.aclose()
{%- else %}
        yield
{%- endif %}
{%- if cookiecutter.auth == "oidc" %}
        await app.state.token_verifier.aclose()
{%- endif %}
        logger.info("application stopped")

    application = FastAPI(
        title=TITLE,
        description={{ cookiecutter.description | python_string(8, "description=", ",") }},
        debug=settings.debug,
        lifespan=lifespan,
        middleware=middleware_stack(settings, metrics),
        telemetry={**telemetry_config(), **(telemetry or {})},
        # api/docs.py's page replaces FastAPI's, which loads from a CDN (settings.api_docs).
        openapi_url="/openapi.json" if settings.api_docs else None,
        docs_url=None,
        redoc_url=None,
        # JSON with the request id; a bounded 400/422 (FastAPI's own echoes the whole input).
        exception_handlers={
            RequestValidationError: validation_error_handler,
            HTTPException: http_error_handler,
        },
    )
    application.state.settings = settings
    # Read by tests; under gunicorn the stack's metrics listener serves every worker's values.
    application.state.metrics = metrics
    application.state.readiness = ReadinessChecks(on_outcome=metrics.readiness_outcome)
{%- if cookiecutter.auth == "oidc" %}
    # Keys are fetched at the first token, never here: start-up does not need the provider.
    application.state.token_verifier = TokenVerifier(settings)
{%- endif %}
    application.include_router(index.router)
    application.include_router(health.router)
{%- if cookiecutter.database == "postgresql" %}
    application.include_router(items_db.router)
    application.include_router(channels.router)
    for error in UNAVAILABLE_ERRORS:
        application.add_exception_handler(error, database_unavailable)
{%- else %}
    application.include_router(items.router)
{%- endif %}
    if settings.api_docs:
        add_api_docs(application)
    return application


try:
    app = create_app()
except ValidationError as refused:
    # A refused setting in one line, not a traceback from every worker. Status 3 is gunicorn's
    # "worker failed to boot": it stops, where another status would start the next worker.
    sys.stderr.write(f"error: {refusal(refused)}\n")
    raise SystemExit(3) from None
