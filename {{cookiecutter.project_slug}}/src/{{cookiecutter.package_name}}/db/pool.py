"""Each worker's connection pool: N // W of a budget of N connections over W workers, so
workers x pool never exceeds the budget. Standard library only.
"""

from __future__ import annotations


def pool_size(budget: int, workers: int) -> int:
    """Split ``budget`` connections over ``workers``; ValueError when a worker would get none.

    The whole share is the pool, with no overflow, opened only as needed: overflow
    connections close at every return to a full pool, a new backend per request or so. The
    template's lab measured half the share as overflow: 290-340 sessions per quick run
    instead of 42, 1.4-1.7 x fewer requests per second on the items endpoints.
    """
    if workers < 1:
        raise ValueError(f"the worker count must be at least 1, not {workers}")
    share = budget // workers
    if share < 1:
        raise ValueError(
            f"a budget of {budget} connections cannot give each of {workers} workers one"
        )
    return share
