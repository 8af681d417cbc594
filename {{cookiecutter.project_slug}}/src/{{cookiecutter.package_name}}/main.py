"""The ASGI application: ``create_app()`` builds it, ``app`` is what servers import.

Inputs: the environment variables settings.py reads (``{{ cookiecutter.package_name | upper }}_*``). Servers
load ``{{ cookiecutter.package_name }}.main:app``; tests call ``create_app(Settings(...))``.

Middleware order, outermost first, and why: request id (so every answer inside, the 500 and
the 504 included, carries it) -> metrics, CORS, access log (each when on, so every answer,
errors included, is counted with the status the client got, gets CORS headers, is logged
once) -> deadline (cancels everything inside, the error guard too) -> error guard (turns
exceptions into a JSON 500 before Starlette's own handler, outside all of these, could
answer without the request id).
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.telemetry import TelemetryConfig
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

{% if cookiecutter.database == "postgresql" -%}
from .api import health, index, items_db
from .api.docs import add_api_docs
from .api.errors import http_error_handler
from .api.readiness import ReadinessChecks
from .db.engine import UNAVAILABLE_ERRORS, database_unavailable, open_database
{%- else -%}
from .api import health, index, items
from .api.docs import add_api_docs
from .api.errors import http_error_handler
from .api.readiness import ReadinessChecks
{%- endif %}
from .logs import configure_logging
from .middleware.access_log import AccessLogMiddleware
from .middleware.deadline import DeadlineMiddleware
from .middleware.error_guard import ErrorGuardMiddleware
from .middleware.metrics import MetricsMiddleware, RequestMetrics
from .middleware.request_id import RequestIdMiddleware
from .settings import Settings
from .tracing import telemetry_config
from .validation import validation_error_handler

TITLE = {{ cookiecutter.project_name | string_literal }}
DESCRIPTION = {{ cookiecutter.description | string_literal }}
ACCESS_LOGGER = {{ (cookiecutter.package_name ~ ".access") | string_literal }}

logger = logging.getLogger(__name__)


def middleware_stack(settings: Settings, metrics: RequestMetrics | None = None) -> list[Middleware]:
    """The pure-ASGI middleware, outermost first (the module docstring says why); those off are
    left out entirely, rather than muted, so they cost nothing."""
    access_log = [Middleware(AccessLogMiddleware, logger=ACCESS_LOGGER)]
    metrics = metrics or RequestMetrics(deadline_seconds=settings.request_timeout_seconds)
    measured = [Middleware(MetricsMiddleware, metrics=metrics)]
    # CORS only when origins are listed; outside the error guard and the deadline, so their
    # 500s and 504s carry the CORS headers too and a browser can read them.
    cors = [
        Middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
            # Retry-After: a browser app reads when to retry the database's JSON 503 (as it
            # can on nginx's own 429 and 503, whose CORS headers nginx.conf adds).
            expose_headers=["X-Request-ID", "Retry-After"],
            max_age=600,
        )
    ]
    return [
        Middleware(RequestIdMiddleware),
        *(measured if settings.metrics else []),
        *(cors if settings.cors_origins else []),
        *(access_log if settings.access_log else []),
        Middleware(DeadlineMiddleware, timeout_seconds=settings.request_timeout_seconds),
        Middleware(ErrorGuardMiddleware, debug=settings.debug),
    ]


def create_app(
    settings: Settings | None = None, *, telemetry: TelemetryConfig | None = None
) -> FastAPI:
    """Build the application from ``settings`` (by default, from the environment).

    ``telemetry`` overrides FastAPI's OpenTelemetry options (tracing.py sets the defaults);
    tests pass their own tracer provider there.
    """
    settings = settings or Settings()
    metrics = RequestMetrics(deadline_seconds=settings.request_timeout_seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Here rather than at import: the server has set up its own logging by now, and
        # importing the module (tests, tools) must not reconfigure the process.
        configure_logging(settings.log_level, human=settings.environment == "development")
        logger.info(
            "application starting", extra={"environment": settings.environment, "title": app.title}
        )
{%- if cookiecutter.database == "postgresql" %}
        # One engine per worker, opened here (after gunicorn forked), closed at shutdown.
        async with open_database(settings) as database:
            app.state.database = database
            # Reported, not required, unless the settings say so: settings.py says why.
            required = settings.readiness_requires_database
            app.state.readiness.add("database", database.ping, required=required)
            yield
            app.state.readiness.remove("database")
{%- else %}
        yield
{%- endif %}
        logger.info("application stopped")

    application = FastAPI(
        title=TITLE,
        description=DESCRIPTION,
        debug=settings.debug,
        lifespan=lifespan,
        middleware=middleware_stack(settings, metrics),
        telemetry={**telemetry_config(), **(telemetry or {})},
        # Our own docs pages (api/docs.py) replace FastAPI's, which load from a CDN; off in
        # production by default, with the schema itself (settings.api_docs).
        openapi_url="/openapi.json" if settings.api_docs else None,
        docs_url=None,
        redoc_url=None,
        # Bounded 400/422 (validation.py): FastAPI's own echoes the whole input. 404, 405 and
        # an endpoint's HTTPException: JSON with the request id (api/errors.py).
        exception_handlers={
            RequestValidationError: validation_error_handler,
            HTTPException: http_error_handler,
        },
    )
    application.state.settings = settings
    # The instruments, readable in this process (tests); under gunicorn, the stack's metrics
    # listener ({{ cookiecutter.package_name }}_stack.metrics_listener) serves every worker's values.
    application.state.metrics = metrics
    application.state.readiness = ReadinessChecks(on_outcome=metrics.readiness_outcome)
{%- if cookiecutter.database == "postgresql" %}
    for error in UNAVAILABLE_ERRORS:
        application.add_exception_handler(error, database_unavailable)
    application.include_router(index.router)
    application.include_router(health.router)
    application.include_router(items_db.router)
{%- else %}
    application.include_router(index.router)
    application.include_router(health.router)
    application.include_router(items.router)
{%- endif %}
    if settings.api_docs:
        add_api_docs(application)
    return application


app = create_app()
