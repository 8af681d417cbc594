"""Pool sizing (db/pool.py): each worker's share of the connection budget, never more.

Needs db/pool.py only.
"""

import pytest

from {{ cookiecutter.package_name }}.db.pool import PoolSize, pool_size


@pytest.mark.parametrize(
    ("budget", "workers", "size"),
    [(20, 1, 20), (20, 2, 10), (20, 3, 6), (7, 2, 3), (3, 3, 1), (1, 1, 1)],
)
def test_each_worker_gets_its_whole_share_without_overflow(
    budget: int, workers: int, size: int
) -> None:
    """budget // workers connections, kept once opened (no overflow to open and close)."""
    assert pool_size(budget, workers) == PoolSize(pool_size=size, max_overflow=0)


def test_workers_together_never_exceed_the_budget() -> None:
    """Whatever the worker count, every worker's most connections together fit the budget;
    a budget below the worker count (or no worker) is refused, naming the numbers."""
    for budget in (32, 50, 97, 100):
        for workers in range(1, 33):
            assert 1 <= workers * pool_size(budget, workers).most <= budget, (budget, workers)
    with pytest.raises(ValueError, match="a budget of 3 connections cannot give each of 4"):
        pool_size(3, 4)
    with pytest.raises(ValueError, match="at least 1, not 0"):
        pool_size(10, 0)
