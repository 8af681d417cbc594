"""The worker's /livez and /metrics, on a port of its own (JOBS_HEALTH_PORT): a small
Starlette app served by uvicorn inside the worker's event loop."""

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def health_app(heartbeat_age: Callable[[], float], stalled_after: float) -> Starlette:
    """/livez: 200 while the worker's heartbeat is younger than ``stalled_after`` (past it, the
    other workers run its jobs: restart it), else 503; /metrics: Prometheus' text format."""

    async def livez(_: Request) -> Response:
        age = heartbeat_age()
        alive = age < stalled_after
        body = {"status": "ok" if alive else "stalled", "heartbeat_age_seconds": round(age, 3)}
        return JSONResponse(body, status_code=200 if alive else 503)

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    routes = [Route("/livez", livez), Route("/metrics", metrics)]
    return Starlette(routes=routes)
