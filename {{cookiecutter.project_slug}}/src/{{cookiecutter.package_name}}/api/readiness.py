"""The readiness checks ``GET /readyz`` runs: one named async check per dependency.

Depends on the standard library only. Register a check where the dependency is created,
usually in the application's lifespan, for example::

    checks.add("database", lambda: pool.ping())

A check returns True when ready. False, an exception or running past ``timeout_seconds``
marks it failing; the exception goes to the log, never into the response.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Literal

Check = Callable[[], Awaitable[bool]]
Outcome = Literal["ok", "failed", "timed out", "error"]

logger = logging.getLogger(__name__)


class ReadinessChecks:
    """A registry of named checks, run concurrently so one slow check bounds the whole."""

    def __init__(self, *, timeout_seconds: float = 2.0) -> None:
        # Below the probe's own timeout (Kubernetes: 1 s by default, usually raised to a few),
        # so /readyz answers 503 naming the slow check instead of the probe timing out.
        self.timeout_seconds = timeout_seconds
        self._checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        """Register ``check`` under ``name``; a second check with the same name is an error."""
        if name in self._checks:
            raise ValueError(f"a readiness check named {name!r} is already registered")
        self._checks[name] = check

    def remove(self, name: str) -> None:
        """Forget the check ``name`` (on shutdown, say)."""
        del self._checks[name]

    @property
    def names(self) -> list[str]:
        """The registered checks' names, in registration order."""
        return list(self._checks)

    async def run(self) -> dict[str, Outcome]:
        """Run every check at once and return each one's outcome, in registration order."""
        outcomes = await asyncio.gather(*(self._run_one(n, c) for n, c in self._checks.items()))
        return dict(zip(self._checks, outcomes, strict=True))

    async def _run_one(self, name: str, check: Check) -> Outcome:
        try:
            async with asyncio.timeout(self.timeout_seconds):
                ready = await check()
        except TimeoutError:
            logger.warning(
                "readiness check timed out",
                extra={"check": name, "timeout_seconds": self.timeout_seconds},
            )
            return "timed out"
        except Exception:
            logger.exception("readiness check raised", extra={"check": name})
            return "error"
        if not ready:
            logger.warning("readiness check failed", extra={"check": name})
            return "failed"
        return "ok"
