"""``GET /livez``: the process answers, touching nothing else. ``GET /readyz``: the checks on
``app.state.readiness`` (ReadinessChecks), 503 only when a required one fails (docs/app.md)."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

Check = Callable[[], Awaitable[bool]]
Outcome = Literal["ok", "failed", "timed out", "error"]
OutcomeHook = Callable[[str, Outcome], None]
_MAX_REASON = 200

# A logger of its own: operators (and the battery) filter the checks' lines by its name.
logger = logging.getLogger(f"{__name__}.readiness")
router = APIRouter(tags=["health"])


class ReadinessChecks:
    """Named async checks, run concurrently; True is ready, False, a raise or a timeout fails.
    Logged once per change of outcome; a repeated failure at debug, with its traceback."""

    def __init__(
        self,
        *,
        timeout_seconds: float = 2.0,
        on_outcome: OutcomeHook | None = None,
        cache_seconds: float = 1.0,
    ) -> None:
        # Below a readiness probe's timeout (5 s in the manifests kubernetes=true renders), so
        # /readyz names the slow check.
        self.timeout_seconds = timeout_seconds
        # /readyz reuses a run this recent: a flood runs the checks once a second per worker
        # (a database ping per request drained the pool, measured; docs/app.md, Readiness).
        self.cache_seconds = cache_seconds
        self._latest: tuple[float, dict[str, Outcome]] | None = None
        self._running: asyncio.Future[dict[str, Outcome]] | None = None
        self.on_outcome = on_outcome
        self._checks: dict[str, tuple[Check, bool]] = {}  # name -> (check, required)
        self._last: dict[str, Outcome] = {}

    def add(self, name: str, check: Check, *, required: bool = True) -> None:
        """Register ``check`` under a new ``name``; ``required=False``: reported, never a 503."""
        if name in self._checks:
            raise ValueError(f"a readiness check named {name!r} is already registered")
        self._checks[name] = (check, required)
        self._latest = None

    def remove(self, name: str) -> None:
        del self._checks[name]
        self._last.pop(name, None)
        self._latest = None

    async def latest(self) -> dict[str, Outcome]:
        """The outcomes of a run at most ``cache_seconds`` old, in progress, or new."""
        if self._latest is not None and time.monotonic() - self._latest[0] < self.cache_seconds:
            return self._latest[1]
        if self._running is None:
            self._running = asyncio.ensure_future(self._run_and_keep())
        # Shielded: a caller that gives up (its client left) does not cancel the others' run.
        return await asyncio.shield(self._running)

    async def _run_and_keep(self) -> dict[str, Outcome]:
        try:
            outcomes = await self.run()
            self._latest = (time.monotonic(), outcomes)
            return outcomes
        finally:
            self._running = None

    @property
    def required(self) -> list[str]:
        """The checks whose failure makes /readyz 503, in registration order."""
        return [name for name, (_, required) in self._checks.items() if required]

    async def run(self) -> dict[str, Outcome]:
        """Run every check at once and return each one's outcome, in registration order."""
        runs = (self._run_one(name, *entry) for name, entry in self._checks.items())
        return dict(zip(self._checks, await asyncio.gather(*runs), strict=True))

    async def _run_one(self, name: str, check: Check, required: bool) -> Outcome:  # noqa: FBT001 (the registry unpacks into it)
        outcome: Outcome
        reason = ""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                outcome = "ok" if await check() else "failed"
        except TimeoutError:
            outcome, reason = "timed out", f"no answer within {self.timeout_seconds:g} s"
        except Exception as exc:
            outcome, reason = "error", " ".join(f"{type(exc).__name__}: {exc}".split())
            if len(reason) > _MAX_REASON:
                reason = reason[: _MAX_REASON - 3] + "..."
            logger.debug("readiness check raised", exc_info=True, extra={"check": name})
        previous = self._last.get(name, "ok")
        self._last[name] = outcome
        if self.on_outcome is not None:
            self.on_outcome(name, outcome)
        extra = {"check": name, "outcome": outcome, "required": required}
        if outcome == previous:
            if outcome != "ok":
                logger.debug("readiness check still failing", extra={**extra, "reason": reason})
        elif outcome == "ok":
            logger.info("readiness check recovered", extra={**extra, "was": previous})
        else:
            logger.warning("readiness check failing", extra={**extra, "reason": reason})
        return outcome


class Liveness(BaseModel):
    """The process is up and its event loop answers."""

    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """Whether this worker takes traffic, and each check's outcome."""

    status: Literal["ready", "not ready"]
    failing: list[str]  # every check that did not pass, required or not
    checks: dict[str, Outcome]
    required: list[str]  # the checks whose failure makes the status "not ready" (503)


@router.get("/livez")
async def livez() -> Liveness:
    """Answer 200 while the process serves requests."""
    return Liveness()


@router.get("/readyz", responses={503: {"model": Readiness, "description": "Not ready"}})
async def readyz(request: Request, response: Response) -> Readiness:
    """Every check's outcome (run at most once a second); 503 when a required one fails."""
    checks: ReadinessChecks = request.app.state.readiness
    outcomes = await checks.latest()
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
