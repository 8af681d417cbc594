"""The app variants only the template's experiments serve, as `experiments.apps:<variant>`.

- basehttp: the bake's bare app (bench/apps.py) plus its middleware rewritten as
  BaseHTTPMiddleware (experiments/basehttp.py): the anti-pattern, to show its cost.
- asgi_passthrough, basehttp_passthrough: bare plus ONE middleware that does nothing, pure
  ASGI or BaseHTTPMiddleware: the seed's own experiment, to compare with its figures.

Each is built only when a server imports it (module `__getattr__`). Depends on the bake's
`bench` package being importable (its directory on PYTHONPATH).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.apps import build_bare

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Receive, Scope, Send


class _Passthrough:
    """A pure-ASGI middleware that does nothing: the cost of one layer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def build_basehttp() -> FastAPI:
    """The endpoints behind the shipped middlewares' BaseHTTPMiddleware twins."""
    from experiments.basehttp import add_twins  # imports the bake's package

    application = build_bare()
    add_twins(application)
    return application


def build_asgi_passthrough() -> FastAPI:
    application = build_bare()
    application.add_middleware(_Passthrough)
    return application


def build_basehttp_passthrough() -> FastAPI:
    from experiments.basehttp import add_passthrough  # imports the bake's package

    application = build_bare()
    add_passthrough(application)
    return application


_BUILDERS = {
    "basehttp": build_basehttp,
    "asgi_passthrough": build_asgi_passthrough,
    "basehttp_passthrough": build_basehttp_passthrough,
}


def __getattr__(name: str) -> FastAPI:
    # Servers import "experiments.apps:<variant>" with getattr, which lands here (PEP 562).
    if name not in _BUILDERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    application = _BUILDERS[name]()
    globals()[name] = application
    return application
