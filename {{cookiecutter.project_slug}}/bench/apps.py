"""The app variants the benchmark serves, as `bench.apps:<variant>`.

- shipped: the real application from `{{ cookiecutter.package_name }}.main.create_app()`, with its
  middleware stack, plus the benchmark's endpoints.
- bare: the same app with no middleware at all: the baseline.
- basehttp: bare plus the shipped middlewares rewritten as BaseHTTPMiddleware
  (bench/basehttp.py), the anti-pattern, to show its cost.
- asgi_passthrough, basehttp_passthrough: bare plus ONE middleware that does nothing, pure
  ASGI or BaseHTTPMiddleware: the seed's own experiment, to compare with its figures.

Each variant is built only when a server imports it (module `__getattr__`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI, Response

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

ONE_MIB = 1024 * 1024
# Built once: the 1 MiB experiment measures moving bytes through the stack, not encoding JSON.
_LARGE_BODY = b'{"data":"' + b"x" * (ONE_MIB - len(b'{"data":""}')) + b'"}'

router = APIRouter(prefix="/bench")


@router.get("/small")
async def small() -> dict[str, str | int]:
    return {"message": "hello", "count": 3}


@router.get("/small-sync")
def small_sync() -> dict[str, str | int]:
    return {"message": "hello", "count": 3}


@router.get("/1mb")
async def large() -> Response:
    return Response(_LARGE_BODY, media_type="application/json")


@router.get("/1mb-sync")
def large_sync() -> Response:
    return Response(_LARGE_BODY, media_type="application/json")


def build_shipped() -> FastAPI:
    """The real app (its middlewares, settings, routes and logging) with the endpoints added."""
    from {{ cookiecutter.package_name }}.main import create_app  # noqa: PLC0415 - see module docstring

    application = create_app()
    application.include_router(router)
    return application


def build_bare() -> FastAPI:
    """The shipped app with its middleware list emptied: same routes, settings and start-up,
    so against `shipped` only the middleware differs. Starlette builds the middleware stack
    from `user_middleware` at the first request, so clearing it here removes them all."""
    application = build_shipped()
    application.user_middleware.clear()
    return application


def build_basehttp() -> FastAPI:
    """The endpoints behind the shipped middlewares' BaseHTTPMiddleware twins."""
    from bench.basehttp import add_twins  # noqa: PLC0415 - see module docstring

    application = build_bare()
    add_twins(application)
    return application


class _Passthrough:
    """A pure-ASGI middleware that does nothing: the cost of one layer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def build_asgi_passthrough() -> FastAPI:
    application = build_bare()
    application.add_middleware(_Passthrough)
    return application


def build_basehttp_passthrough() -> FastAPI:
    from bench.basehttp import add_passthrough  # noqa: PLC0415 - see module docstring

    application = build_bare()
    add_passthrough(application)
    return application


_BUILDERS = {
    "bare": build_bare,
    "shipped": build_shipped,
    "basehttp": build_basehttp,
    "asgi_passthrough": build_asgi_passthrough,
    "basehttp_passthrough": build_basehttp_passthrough,
}


def __getattr__(name: str) -> FastAPI:
    # Servers import "bench.apps:<variant>" with getattr, which lands here (PEP 562).
    if name not in _BUILDERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    application = _BUILDERS[name]()
    globals()[name] = application
    return application
