"""ContextBus: capture that never blocks or breaks the agent it watches, and loses nothing.

``emit()`` runs on the agent's thread.  It checks the cheap things (types, the
session id), mints an id and appends an :class:`~beeweave_core.capture.item.Item` to an
in-memory deque (intake.py).  Two background threads do the rest:

* the *journal* thread, every ``flush_interval`` (50 ms), turns items into events
  (coalescing bursts of low-priority fragments), one at a time so a bad one is
  dead-lettered alone, and appends them to this process's spool file (journal.py);
* the *store* thread hands those events to the store in batches and cuts the
  spool back once the store has them.  When the store fails or hangs it stops
  asking, and later replays the spool in order (drain.py, replay.py; ids are fixed
  before spooling, so a replay is idempotent).

So an event is on disk one journal tick after ``emit()`` returned, whether the
store answers or not; see docs/durability.md for the full contract, and the modules
beside this one for the bounds each part keeps.  This class is their composition:
one object, one set of locks and offsets (state.py), the public calls below, and
what a process exit saves (``atexit`` and SIGTERM, shutdown.py).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections import Counter
from typing import Any

from beeweave_core.capture import shutdown
from beeweave_core.capture.drain import Drain
from beeweave_core.capture.intake import Intake
from beeweave_core.capture.journal import Journal
from beeweave_core.capture.purge import Purge
from beeweave_core.capture.spool import OVERFLOW, DeadLetters, Spool
from beeweave_core.capture.state import Listener
from beeweave_core.governance.redaction import Redactor
from beeweave_core.ids import check_tenant, file_key
from beeweave_core.store import EventStore


class ContextBus(Intake, Journal, Drain, Purge):
    """Bounded, prioritised, non-blocking, durable capture in front of an :class:`EventStore`.

    Args:
        store: Where events end up; its ``tenant`` names the spool files.
        spool_dir: The folder of the spool, overflow and dead-letter files.
        name: Part of the spool files' names (one bus per name and tenant).
        batch_size: Most records handed to the store in one call.
        flush_interval: Seconds between two journal cycles.
        coalesce_window: Seconds within which low-priority fragments of one
            ``coalesce_key`` are merged into one event.
        max_high: High-priority items held in memory; past it they go to the overflow file.
        max_low: Low-priority items held in memory; past it the newest are dropped.
        store_interval: Least seconds between two background writes to the store
            (``None``: the store's ``write_interval``).
        retry_interval: First wait in seconds before asking a failed store again.
        max_retry_interval: Longest such wait (it doubles after each failure).
        stall_after: Seconds after which a running store call counts as not answering.
        dead_letter_days: Days a dead-letter entry is kept (``None``: forever).
        redactor: Replaces personal data in every record before it is written.

    Raises:
        ValueError: ``store.tenant`` is not a valid tenant name.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        spool_dir: str | os.PathLike[str],
        name: str = "bus",
        batch_size: int = 1000,
        flush_interval: float = 0.05,
        coalesce_window: float = 0.1,
        max_high: int = 1_000,
        max_low: int = 10_000,
        store_interval: float | None = None,
        retry_interval: float = 0.5,
        max_retry_interval: float = 30.0,
        stall_after: float = 5.0,
        dead_letter_days: float | None = 30.0,
        redactor: Redactor | None = None,
    ) -> None:
        self.store = store
        #: Runs on every record before it reaches a file or the store (see governance/).
        self.redactor = redactor
        self.tenant = check_tenant(store.tenant)
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.coalesce_window = coalesce_window
        self.max_high = max_high
        self.max_low = max_low
        #: Least seconds between two background writes to the store (``None``: the
        #: store's ``write_interval``); a flush, a close or a full batch does not wait.
        self.store_interval = store.write_interval if store_interval is None else store_interval
        self.retry_interval = retry_interval
        self.max_retry_interval = max_retry_interval
        #: A store call running longer than this counts as "not answering" for flush().
        self.stall_after = stall_after
        key = file_key(name, self.tenant)
        self._spool = Spool(spool_dir, key)
        self.spool_path = self._spool.path
        self.overflow_path = self._spool.file(OVERFLOW)
        self.dead_letter_path = self._spool.folder / f"{key}.dead-letter.jsonl"
        self._dead = DeadLetters(self.dead_letter_path, retention_days=dead_letter_days)
        self._redacted_counts: Counter[str] = Counter()
        self._redact_lock = threading.Lock()
        self._init_state()
        #: Called on the store thread with each batch once it is in the store
        #: (the vector indexer and the memory writer hang off this).
        self.listeners: list[Listener] = []
        self._orphans = self._spool.orphans()
        self._jthread = threading.Thread(
            target=self._journal_loop, name="beeweave-journal", daemon=True
        )
        self._sthread = threading.Thread(
            target=self._store_loop, name="beeweave-store", daemon=True
        )
        self._jthread.start()
        self._sthread.start()
        ref = weakref.ref(self)
        self._atexit = lambda: (b := ref()) is not None and b.close(timeout=5.0)
        atexit.register(self._atexit)
        shutdown.register(self)

    def flush(self, timeout: float = 30.0, *, reading: bool = False) -> bool:
        """Wait until everything emitted so far is in the store.

        True: every event emitted before the call is stored, and nothing was refused
        since the previous ``flush()``.  False: some events are only in the spool
        (the store is down or did not answer within ``stall_after``; they are
        replayed later), were refused (dead-letter file), or ``timeout`` passed.
        Either way everything emitted before the call is on disk or stored when
        this returns, unless the timeout passed first.

        Args:
            timeout: Most seconds to wait.
            reading: Do not wait for lazy records (``emit(lazy=True)``): a read needs
                what was captured, not the audit records of the reads before it
                (each assembly would otherwise wait for the previous one's).

        Returns:
            Whether everything emitted before the call is stored (lazy records left out
            when ``reading``) and nothing was refused.
        """
        target = next(self._counter)
        self._lazy.add(target)  # a wait's own number: nothing to store
        self._flush_target = max(self._flush_target, target)
        self._wake.set()
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._stored_upto < target and not (reading and self._only_lazy(target)):
                if self._persisted_upto >= target and self._store_unavailable():
                    break
                left = deadline - time.monotonic()
                if left <= 0 or not self._jthread.is_alive():
                    break
                self._cond.wait(min(left, 0.05))
                self._wake.set()
                self._swake.set()
            done = self._stored_upto >= target or (reading and self._only_lazy(target))
        total = self._stats["refused"] + self._stats["refused_unkept"]
        refused, self._refused_seen = total > self._refused_seen, total
        return done and not refused

    def _only_lazy(self, target: int) -> bool:
        """Every number below ``target`` not yet stored is a lazy record or a wait's mark
        (stored in order: the first one that is not ends the check)."""
        lazy = self._lazy
        return all(n in lazy for n in range(self._stored_upto + 1, target))

    def persisted(self, timeout: float = 5.0) -> bool:
        """Wait until everything emitted so far is at least on disk (spool or store).

        Args:
            timeout: Most seconds to wait.

        Returns:
            Whether it all reached disk before ``timeout``.
        """
        target = next(self._counter)
        self._lazy.add(target)
        self._flush_target = max(self._flush_target, target)
        self._wake.set()
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._persisted_upto < target and time.monotonic() < deadline:
                self._cond.wait(0.02)
                self._wake.set()
        return self._persisted_upto >= target

    def close(self, timeout: float = 30.0) -> None:
        """Store what the store takes within ``timeout``, keep the rest spooled, stop.

        Safe to call twice.  Whatever is not stored stays in the spool file and is
        replayed by the next bus opened for the same store and tenant.

        Args:
            timeout: Most seconds to spend storing and stopping the threads.
        """
        if self._closed:
            return
        self._closed = True
        start = time.monotonic()
        self.flush(timeout)
        self._stop_at = start + timeout
        self._closing = True
        self._wake.set()
        self._jthread.join(max(1.0, self._stop_at - time.monotonic()))
        self._swake.set()
        self._sthread.join(max(0.5, self._stop_at - time.monotonic()))
        with self._overflow_lock:
            self._close_overflow_file()
        for _, handle in self._orphans:
            if handle is not None:
                handle.close()
        self._spool.close()
        atexit.unregister(self._atexit)
        shutdown.unregister(self)

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` on the writer thread with each batch once it is stored.

        A listener must be quick (capture waits for it) and may fail: the failure is
        logged and capture goes on.  Subscribing the same listener twice is a no-op.
        The list is replaced, never changed in place, so the writer thread can walk
        it without a lock.

        Args:
            listener: Called with each stored batch (a list of events).
        """
        if listener not in self.listeners:
            self.listeners = [*self.listeners, listener]

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling ``listener``; safe to repeat.

        Args:
            listener: A listener given to :meth:`subscribe`.
        """
        self.listeners = [x for x in self.listeners if x != listener]

    def stats(self) -> dict[str, Any]:
        """Counters that say what happened to every emitted event.

        Returns:
            Emitted, journaled, written, coalesced, dropped, refused ... counts, the queue
            lengths, whether events wait in the spool, whether the store is up, and the
            redactions by kind.
        """
        return {
            **self._stats,
            "queue_high": len(self._high),
            "queue_low": len(self._low) + self._pending_n,
            "spool_pending": self._spool_pending(),
            "store_up": self._store_up and not self._store_unavailable(),
            "redacted": dict(self._redacted_counts),
        }

    def _spool_pending(self) -> bool:
        """Events on disk the store does not have yet: a dead process's spool, the
        overflow file, or this spool past what was stored (store down or behind)."""
        return bool(self._orphans) or self._overflowing or self._stored_off < self._spool.end
