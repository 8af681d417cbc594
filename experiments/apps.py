"""The app variants only the template's experiments serve, as gunicorn app factories.

- `experiments.apps:basehttp()`: the bake's bare app (lab/apps.py) plus its middleware
  rewritten as BaseHTTPMiddleware (experiments/basehttp.py): the anti-pattern, to show its cost.
- `experiments.apps:asgi_passthrough()`, `experiments.apps:basehttp_passthrough()`: bare plus
  ONE middleware that does nothing, pure ASGI or BaseHTTPMiddleware: the seed's own
  experiment, to compare with its figures.

gunicorn calls the factory in each worker (its `module:function()` form, which APP_MODULE
accepts), so importing this module builds nothing. Only the gunicorn servers load factories:
lab/servers.py starts `uvicorn` without `--factory`, and the grid never runs these under it.
Depends on the template's lab (lab/apps.py: $LAB_FACTORY names the bake's app factory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lab.apps import build_bare

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Receive, Scope, Send


class _Passthrough:
    """A pure-ASGI middleware that does nothing: the cost of one layer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def basehttp() -> FastAPI:
    """The endpoints behind the shipped middlewares' BaseHTTPMiddleware twins."""
    from experiments.basehttp import add_twins  # imports the bake's package

    application = build_bare()
    add_twins(application)
    return application


def asgi_passthrough() -> FastAPI:
    application = build_bare()
    application.add_middleware(_Passthrough)
    return application


def basehttp_passthrough() -> FastAPI:
    from experiments.basehttp import add_passthrough  # imports the bake's package

    application = build_bare()
    add_passthrough(application)
    return application
