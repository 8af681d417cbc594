"""The readiness checks ``GET /readyz`` runs: one named async check per dependency, registered
where it is created (main.py's lifespan). A check returns True when ready; False, an exception
or a timeout fails it. Only a required one makes /readyz 503 (docs/app.md, Readiness).
Logged once per change of outcome; a repeated failure at debug, with its traceback."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Literal

Check = Callable[[], Awaitable[bool]]
Outcome = Literal["ok", "failed", "timed out", "error"]
# Told each check's outcome after every run (middleware/metrics.py's gauge).
OutcomeHook = Callable[[str, Outcome], None]
# An exception's message in the log line is cut here: one line, whatever it said.
_MAX_REASON = 200

logger = logging.getLogger(__name__)


class ReadinessChecks:
    """A registry of named checks, run concurrently so one slow check bounds the whole."""

    def __init__(
        self, *, timeout_seconds: float = 2.0, on_outcome: OutcomeHook | None = None
    ) -> None:
        # Below the probe's timeout (k8s/base/deployment.yaml), so /readyz names the slow check.
        self.timeout_seconds = timeout_seconds
        self.on_outcome = on_outcome
        self._checks: dict[str, tuple[Check, bool]] = {}  # name -> (check, required)
        # Each check's last outcome in this worker: a change is logged once.
        self._last: dict[str, Outcome] = {}

    def add(self, name: str, check: Check, *, required: bool = True) -> None:
        """Register ``check`` under a new ``name``; ``required=False``: reported, never a 503."""
        if name in self._checks:
            raise ValueError(f"a readiness check named {name!r} is already registered")
        self._checks[name] = (check, required)

    def remove(self, name: str) -> None:
        del self._checks[name]
        self._last.pop(name, None)

    @property
    def names(self) -> list[str]:
        return list(self._checks)

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
