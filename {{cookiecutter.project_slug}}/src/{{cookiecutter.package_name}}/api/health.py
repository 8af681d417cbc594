"""Health endpoints: ``GET /livez``, the process answers (touching nothing else), and
``GET /readyz``, this worker can serve: readiness.py's checks, every outcome reported, 503 only
when a required one fails (a shared dependency is not, by default: docs/app.md, Readiness)."""

from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from .readiness import Outcome, ReadinessChecks

router = APIRouter(tags=["health"])


class Liveness(BaseModel):
    """The process is up and its event loop answers."""

    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """Whether this worker takes traffic, and each check's outcome."""

    status: Literal["ready", "not ready"]
    failing: list[str]  # every check that did not pass, required or not
    checks: dict[str, Outcome]
    required: list[str]  # the checks whose failure makes the status "not ready" (503)


_ALIVE = Liveness()


@router.get("/livez")
async def livez() -> Liveness:
    """Answer 200 while the process serves requests."""
    return _ALIVE


@router.get("/readyz", responses={503: {"model": Readiness, "description": "Not ready"}})
async def readyz(request: Request, response: Response) -> Readiness:
    """Run the readiness checks: 503 when a required one fails; every outcome in the body."""
    checks: ReadinessChecks = request.app.state.readiness
    outcomes = await checks.run()
    failing = [name for name, outcome in outcomes.items() if outcome != "ok"]
    required = checks.required
    ready = not set(failing) & set(required)
    if not ready:
        response.status_code = 503
    return Readiness(
        status="ready" if ready else "not ready",
        failing=failing,
        checks=outcomes,
        required=required,
    )
