"""The app variants the benchmark serves, as `bench.apps:<variant>`.

- shipped: the real application from `{{ cookiecutter.package_name }}.main.create_app()`, with its
  middleware stack, plus the benchmark's endpoints.
- bare: the same app with no middleware at all: the baseline.

The template's experiments (scripts/experiments in the template repository) build their
variants, such as BaseHTTPMiddleware twins, on `build_bare()`.

Each variant is built only when a server imports it (module `__getattr__`).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Response

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


_BUILDERS = {"bare": build_bare, "shipped": build_shipped}


def __getattr__(name: str) -> FastAPI:
    # Servers import "bench.apps:<variant>" with getattr, which lands here (PEP 562).
    if name not in _BUILDERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    application = _BUILDERS[name]()
    globals()[name] = application
    return application
