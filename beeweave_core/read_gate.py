"""Reads go first: background work in one process waits between its small steps while a
read (``assemble``, ``retrieve``) runs.

Maintenance (extraction, compaction, the full-text index's catch-up) is CPU-bound
Python.  Under the GIL a read that runs beside it gets a share of the interpreter, and
each SQLite row it fetches hands the GIL back and waits up to a switch interval to get
it again: a 20 ms read measured 100-200 ms beside a catch-up.  One gate per weave,
shared by every context engine's maintenance worker, makes them pause at their next
step boundary instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Longest a worker waits for reads in flight before it goes on anyway (no starvation
#: under back-to-back reads).
YIELD_AT_MOST = 0.25


class ReadGate:
    """Counts reads in flight; workers call :meth:`give_way` between steps."""

    def __init__(self, at_most: float = YIELD_AT_MOST) -> None:
        self.at_most = at_most
        self._cond = threading.Condition()
        self._readers = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Around a read: workers wait at their next step boundary until it ends."""
        with self._cond:
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    def give_way(self) -> None:
        """Wait while reads are in flight (at most :attr:`at_most` seconds)."""
        deadline = time.monotonic() + self.at_most
        with self._cond:
            while self._readers:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)


__all__ = ["YIELD_AT_MOST", "ReadGate"]
