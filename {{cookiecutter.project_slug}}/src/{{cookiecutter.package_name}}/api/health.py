"""Health endpoints for orchestrators and load balancers.

``GET /livez``: the process answers; it touches nothing else, so a slow database never gets
a healthy process restarted. ``GET /readyz``: the registered readiness checks
(readiness.py, found on ``app.state.readiness``) all pass; 503 names the failing ones, so
traffic is held back without a restart.
"""

from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from .readiness import Outcome, ReadinessChecks

router = APIRouter(tags=["health"])


class Liveness(BaseModel):
    """The process is up and its event loop answers."""

    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """Whether every dependency is ready, and each check's outcome."""

    status: Literal["ready", "not ready"]
    failing: list[str]
    checks: dict[str, Outcome]


_ALIVE = Liveness()


@router.get("/livez")
async def livez() -> Liveness:
    """Answer 200 while the process serves requests."""
    return _ALIVE


@router.get("/readyz", responses={503: {"model": Readiness, "description": "Not ready"}})
async def readyz(request: Request, response: Response) -> Readiness:
    """Run the readiness checks: 200 when all pass, else 503 naming the failing ones."""
    checks: ReadinessChecks = request.app.state.readiness
    outcomes = await checks.run()
    failing = [name for name, outcome in outcomes.items() if outcome != "ok"]
    if failing:
        response.status_code = 503
    return Readiness(status="not ready" if failing else "ready", failing=failing, checks=outcomes)
