"""Each worker's connection pool, sized from the server's total connection budget.

Standard library only. Every gunicorn worker is its own process with its own pool, so a
budget of N connections split over W workers gives each at most N // W: workers x pool
never exceeds the budget, whatever the worker count gunicorn chose.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PoolSize:
    """SQLAlchemy's two numbers: connections kept open, and extra ones opened under load."""

    pool_size: int
    max_overflow: int

    @property
    def most(self) -> int:
        """The most connections one worker can hold at once."""
        return self.pool_size + self.max_overflow


def pool_size(budget: int, workers: int) -> PoolSize:
    """Split ``budget`` connections over ``workers``; ValueError when a worker would get none.

    Half of each worker's share stays open (rounded up, at least one), the other half is
    opened only under bursts and closed again, so an idle service holds half its budget.
    """
    if workers < 1:
        raise ValueError(f"the worker count must be at least 1, not {workers}")
    share = budget // workers
    if share < 1:
        raise ValueError(
            f"a budget of {budget} connections cannot give each of {workers} workers one"
        )
    steady = (share + 1) // 2
    return PoolSize(pool_size=steady, max_overflow=share - steady)
