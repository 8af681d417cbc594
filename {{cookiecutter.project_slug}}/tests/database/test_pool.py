"""Pool sizing: each worker's share of the connection budget, never more than the budget."""

import pytest

from {{ cookiecutter.package_name }}.db.pool import PoolSize, pool_size


@pytest.mark.parametrize(
    ("budget", "workers", "expected"),
    [
        (20, 1, PoolSize(pool_size=20, max_overflow=0)),
        (20, 2, PoolSize(pool_size=10, max_overflow=0)),
        (20, 3, PoolSize(pool_size=6, max_overflow=0)),  # 18 of 20: shares are whole
        (7, 2, PoolSize(pool_size=3, max_overflow=0)),
        (3, 3, PoolSize(pool_size=1, max_overflow=0)),  # the boundary: one each
        (1, 1, PoolSize(pool_size=1, max_overflow=0)),
    ],
)
def test_shares_split_the_budget(budget: int, workers: int, expected: PoolSize) -> None:
    """Each worker's pool is budget // workers connections, kept once opened (no overflow)."""
    assert pool_size(budget, workers) == expected


@pytest.mark.parametrize("workers", range(1, 33))
@pytest.mark.parametrize("budget", [32, 50, 97, 100])
def test_workers_times_pool_never_exceeds_the_budget(budget: int, workers: int) -> None:
    """Whatever the worker count, every worker's most connections together fit the budget."""
    size = pool_size(budget, workers)
    assert size.pool_size >= 1
    assert size.max_overflow >= 0
    assert workers * size.most <= budget


def test_a_budget_below_the_worker_count_is_refused() -> None:
    """A worker without a connection could serve nothing: refused, naming both numbers."""
    with pytest.raises(ValueError, match="a budget of 3 connections cannot give each of 4"):
        pool_size(3, 4)


def test_zero_workers_is_refused() -> None:
    """A worker count below one is a bug in the caller, not a pool of zero."""
    with pytest.raises(ValueError, match="at least 1, not 0"):
        pool_size(10, 0)
