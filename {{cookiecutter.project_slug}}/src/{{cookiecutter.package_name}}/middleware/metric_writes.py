"""Cheaper per-request writes to prometheus_client values: what the metrics middleware calls.

Depends on prometheus_client (>= 0.21, the version pyproject.toml asks for): its public
metric objects and, under its multiprocess mode, what its memory-mapped values keep
(``_value``, ``_file``, ``_key``; the file's ``_m`` and ``_positions``, each value stored
as two doubles, value then timestamp; a histogram child's ``_sum``, ``_buckets``,
``_upper_bounds``). tests/unit/test_metric_writes.py checks, against the installed version,
that what is written here is exactly what prometheus_client's own ``observe``/``inc`` would
have written, after a fork and after its file has grown too.

Why: under gunicorn (``PROMETHEUS_MULTIPROC_DIR`` set) every change to a value takes
prometheus_client's process-wide lock and checks whether the process has forked, on every
call: about 8,000 instructions per change (valgrind's count, ``make bench-check``), four
changes per request (in flight up and down, the histogram's sum and one bucket), 9 % of a
small request. The middleware changes values only from the event loop's thread, one change
at a time, so the lock guards nothing here; ``Writes.current()`` checks for a fork once per
request instead of once per change; and each value's place in the file is looked up once,
not at every change. Together: about 19,000 instructions per request instead of 45,000.
Without ``PROMETHEUS_MULTIPROC_DIR`` (tests, ``make run``) values live in process memory
and prometheus_client's own calls are used; so they are, value by value, when an installed
prometheus_client keeps its values otherwise (an internal renamed): slower, never wrong,
never an error for the request.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from prometheus_client import Gauge, Histogram

# How prometheus_client's MmapedDict stores a value: two native doubles, value and timestamp.
_write_value_and_timestamp = struct.Struct("dd").pack_into


def add_to(value: Any) -> Callable[[float], None]:
    """``inc(amount)`` for one prometheus_client value: written straight to its
    memory-mapped file when it has one, else its own ``inc``."""
    if not getattr(value, "_multiprocess", False):
        inc: Callable[[float], None] = value.inc
        return inc
    # get() first: prometheus_client checks for a fork there and, after one, gives every
    # value a file of this process's own. The file object stays until the next fork
    # (Writes makes its writers again then); a value's place in it never moves.
    value.get()
    try:
        file = value._file  # noqa: SLF001 (see the module docstring)
        position = file._positions[value._key]  # noqa: SLF001
        file._m  # noqa: B018, SLF001 - present at each write below
    except (AttributeError, KeyError, TypeError):
        # Another prometheus_client than the one described above: its own inc.
        own_inc: Callable[[float], None] = value.inc
        return own_inc

    def add(amount: float) -> None:
        # prometheus_client's MmapedValue.inc without its lock and fork check. Its own
        # _value is kept up to date, so its calls and these can be mixed. file._m is read
        # at each write: the map is replaced when the file grows for new values.
        value._value += amount  # noqa: SLF001
        _write_value_and_timestamp(file._m, position, value._value, 0.0)  # noqa: SLF001

    return add


class Observes(Protocol):
    """What the middleware calls per request: HistogramWrites, or a histogram child itself."""

    def observe(self, amount: float) -> None: ...


class HistogramWrites:
    """``observe(amount)`` for one labelled histogram child, as the child's own would do."""

    __slots__ = ("add_to_bucket", "add_to_sum", "bounds")

    def __init__(self, child: Histogram) -> None:
        # The bounds end with +Inf, so bisect always finds a bucket: the first bound
        # >= amount, as prometheus_client's observe picks it.
        self.bounds: list[float] = list(child._upper_bounds)  # noqa: SLF001
        self.add_to_sum = add_to(child._sum)  # noqa: SLF001
        self.add_to_bucket = [add_to(bucket) for bucket in child._buckets]  # noqa: SLF001

    def observe(self, amount: float) -> None:
        self.add_to_sum(amount)
        self.add_to_bucket[bisect_left(self.bounds, amount)](1.0)


class Writes:
    """The middleware's writers: the in-flight gauge and one histogram child per label set.

    ``current()`` returns the writers of this process: after a fork (gunicorn's
    ``preload_app``) the parent's memory-mapped files are not this process's, so the writers
    are made again, after prometheus_client has opened the child's own files.
    """

    def __init__(self, duration: Histogram, active: Gauge) -> None:
        self._duration = duration
        self._active = active
        self._pid = -1
        self.add_active: Callable[[float], None] = active.inc
        # (method, route, status) -> that child's writes. Bounded: known methods, the app's
        # routes, the status codes (the middleware folds the rest first).
        self.histograms: dict[tuple[str, str, int], Observes] = {}

    def current(self) -> Writes:
        if self._pid != os.getpid():
            self._bind()
        return self

    def _bind(self) -> None:
        value = getattr(self._active, "_value", None)  # see add_to
        self.add_active = self._active.inc if value is None else add_to(value)
        self.histograms = {}
        self._pid = os.getpid()

    def histogram(self, key: tuple[str, str, int]) -> Observes:
        """The writes of one label set, made at its first request."""
        known = self.histograms.get(key)
        if known is not None:
            return known
        method, route, status = key
        child = self._duration.labels(method, route, str(status))
        writes: Observes
        try:
            writes = HistogramWrites(child)
        except AttributeError:  # see add_to: the child's own observe, slower, right
            writes = child
        self.histograms[key] = writes
        return writes
