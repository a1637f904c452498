"""The overflow file: high-priority events past ``max_high`` go to disk, never dropped.

Written on the caller's thread (inside ``emit()``, under an ``RLock``: a SIGTERM
handler may land inside ``emit()`` and close the bus on the same thread), and moved
into the spool by the journal thread: cut off (renamed to ``overflow-draining``) so
new emits go to memory again, then copied line by line (same line format).
"""

from __future__ import annotations

import os

from beeweave_core.capture.item import Item
from beeweave_core.capture.records import Records, reason
from beeweave_core.capture.spool import DRAINING, chunks, encode
from beeweave_core.private import open_private


class Overflow(Records):
    """The overflow file's writer and drain (a part of :class:`ContextBus`)."""

    def _overflow(self, item: Item) -> None:
        """Memory bound reached for high priority: keep it on disk instead of dropping it."""
        try:
            line = encode(item.n, self._redacted(self._record(item)))
        except Exception as exc:
            self._rejects.append((item.n, reason(exc), item))
            return
        with self._overflow_lock:
            if self._overflow_f is None:
                self._overflow_f = open_private(self.overflow_path, "ab", buffering=0)
            self._overflow_f.write(line)
            self._overflowing = True
        self._stats["overflowed"] += 1

    def _close_overflow_file(self) -> None:
        """Close the overflow file's handle; the next overflow opens it again (the caller
        holds ``_overflow_lock``)."""
        if self._overflow_f is not None:
            self._overflow_f.close()
            self._overflow_f = None

    def _start_overflow_drain(self) -> int | None:
        """Cut the overflow file off (new emits go to memory again).  ``None``: nothing to
        drain; else how many items were queued in memory at the cut (they go before the
        file's lines; a file left from before has only newer items after it: 0)."""
        draining = self._spool.file(DRAINING)
        # the file is this process's own: only a drain cut short can leave it (asked by a
        # flag, not a stat per cycle: a syscall hands the GIL to the agent and back)
        if self._drain_left and draining.exists():
            return 0
        if not self._overflowing:
            return None
        with self._overflow_lock:
            self._close_overflow_file()
            self._drain_left = True
            if self.overflow_path.exists():
                os.replace(self.overflow_path, draining)
            self._overflowing = False
            queued = len(self._high) + len(self._low)
        return queued if draining.exists() else None

    def _drain_overflow(self) -> None:
        """Move the overflow file into the spool, streamed in blocks (never loaded whole)."""
        draining = self._spool.file(DRAINING)
        for lines, _ in chunks(draining, self.batch_size):  # same line format: copy them
            with self._spool_lock:
                self._spool.append(b"".join(lines))
                self._ready.clear()  # the store thread reads these from the spool
                self._disk = True
        draining.unlink(missing_ok=True)
        self._drain_left = False
        self._swake.set()
