"""The ASGI application: ``create_app()`` builds it, ``app`` is what servers import.

Inputs: the environment variables settings.py reads (``{{ cookiecutter.package_name | upper }}_*``). Servers
load ``{{ cookiecutter.package_name }}.main:app``; tests call ``create_app(Settings(...))``.

Middleware order, outermost first, and why:
request id (so everything inside, the 500 and the 504 included, carries it) -> CORS (only
when origins are set: its headers then reach every answer, errors included) -> access log
(when on: so every answer, errors included, is logged once) -> deadline (cancels everything inside,
the error guard too) -> error guard (turns exceptions into a JSON 500 before Starlette's own
handler, which sits outside all of these, could answer without the request id).
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from .api import health, index, items
from .api.docs import add_api_docs
from .api.readiness import ReadinessChecks
from .logs import configure_logging
from .middleware.access_log import AccessLogMiddleware
from .middleware.deadline import DeadlineMiddleware
from .middleware.error_guard import ErrorGuardMiddleware
from .middleware.request_id import RequestIdMiddleware
from .settings import Settings
from .validation import validation_error_handler

TITLE = {{ cookiecutter.project_name | string_literal }}
DESCRIPTION = {{ cookiecutter.description | string_literal }}
ACCESS_LOGGER = {{ (cookiecutter.package_name ~ ".access") | string_literal }}

logger = logging.getLogger(__name__)


def middleware_stack(settings: Settings) -> list[Middleware]:
    """The pure-ASGI middleware, outermost first (see the module docstring for the order).

    The access log is left out entirely when off, rather than muted, so it costs nothing.
    """
    access_log = [Middleware(AccessLogMiddleware, logger=ACCESS_LOGGER)]
    # CORS only when origins are listed; outside the error guard and the deadline, so their
    # 500s and 504s carry the CORS headers too and a browser can read them.
    cors = [
        Middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
            expose_headers=["X-Request-ID"],
            max_age=600,
        )
    ]
    return [
        Middleware(RequestIdMiddleware),
        *(cors if settings.cors_origins else []),
        *(access_log if settings.access_log else []),
        Middleware(DeadlineMiddleware, timeout_seconds=settings.request_timeout_seconds),
        Middleware(ErrorGuardMiddleware, debug=settings.debug),
    ]


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application from ``settings`` (by default, from the environment)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Here rather than at import: the server has set up its own logging by now, and
        # importing the module (tests, tools) must not reconfigure the process.
        configure_logging(settings.log_level, human=settings.environment == "development")
        logger.info(
            "application starting",
            extra={"environment": settings.environment, "title": app.title},
        )
        yield
        logger.info("application stopped")

    application = FastAPI(
        title=TITLE,
        description=DESCRIPTION,
        debug=settings.debug,
        lifespan=lifespan,
        middleware=middleware_stack(settings),
        # Our own docs pages (api/docs.py) replace FastAPI's, which load from a CDN; off in
        # production by default, with the schema itself (settings.api_docs).
        openapi_url="/openapi.json" if settings.api_docs else None,
        docs_url=None,
        redoc_url=None,
        # Bounded 400/422 (validation.py): FastAPI's own echoes the whole input.
        exception_handlers={RequestValidationError: validation_error_handler},
    )
    application.state.settings = settings
    application.state.readiness = ReadinessChecks()
    application.include_router(index.router)
    application.include_router(health.router)
    application.include_router(items.router)
    if settings.api_docs:
        add_api_docs(application)
    return application


app = create_app()
