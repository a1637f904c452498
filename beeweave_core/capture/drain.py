"""The store thread: journaled events go to the store in batches, and the spool is cut back.

One write per ``store_interval`` unless someone waits (a flush, a close, a full batch),
at most ``batch_size`` records a call.  When the store fails or hangs it stops asking:
the events stay in the spool, retried after ``retry_interval`` doubling to
``max_retry_interval``, and replayed in order (replay.py).  A call running longer than
``stall_after`` counts as not answering for ``flush()``.  An event the store refuses is
isolated and dead-lettered alone; the rest still go in.  Listeners (the vector indexer,
the memory writer) are called with each stored batch on this thread.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import time
from typing import Any

from beeweave_core import telemetry
from beeweave_core.capture.records import reason
from beeweave_core.capture.replay import Replay
from beeweave_core.errors import StoreError
from beeweave_core.events import AppendResult, Event
from beeweave_core.payloads import PayloadError

log = logging.getLogger("beeweave.bus")
_BAD_INPUT = (ValueError, TypeError, PayloadError)
#: Times the store may fail one event for an unknown reason before it is dead-lettered.
_STRIKES = 3


def is_outage(exc: BaseException) -> bool:
    """The store did not answer (retry later) rather than refused this input."""
    if isinstance(exc, _BAD_INPUT):
        return False
    retryable = getattr(exc, "is_retryable", None)  # the neo4j driver's own verdict
    if callable(retryable):
        try:
            if retryable():
                return True
        except Exception:
            pass
    return isinstance(exc, (OSError, sqlite3.OperationalError, StoreError, RuntimeError))


class Drain(Replay):
    """The store thread (a part of :class:`ContextBus`)."""

    def _store_loop(self) -> None:
        while True:
            self._swake.wait(0.05)
            self._swake.clear()
            try:
                with self._spause:
                    self._store_step()
            except Exception:  # the writer must survive anything
                log.exception("beeweave: store step failed")
            if time.monotonic() > self._stop_at or self._given_up():
                return
            if not self._jthread.is_alive() and self._caught_up():
                return

    def _given_up(self) -> bool:
        """Closing while the store is down: what it has not taken is in the spool already
        (``close`` flushed to disk first) and the next bus replays it, so retrying until
        the close timeout would only hold the host's exit (30 s by default)."""
        return self._closing and not self._store_up

    def _caught_up(self) -> bool:
        with self._spool_lock:
            return not self._orphans and not self._ready and self._stored_off >= self._spool.end

    def _store_step(self) -> None:
        self._advance()
        if time.monotonic() < self._next_retry:
            return
        if self._orphans and not self._replay_orphans():
            return
        if self._disk:
            self._replay_own()
            return
        while self._ready and not self._gathering() and time.monotonic() <= self._stop_at:
            records, end = self._next_batch()
            if not self._store(self._events(records)):
                with self._spool_lock:
                    self._stats["spooled"] += sum(len(e) for e, _ in self._ready)
                    self._ready.clear()
                    self._disk = True
                return
            self._last_write = time.monotonic()
            with self._spool_lock:
                while self._ready and self._ready[0][1] <= end:  # the journal may have cleared them
                    self._ready.popleft()
                self._stored_off = max(self._stored_off, end)
            self._advance()

    def _gathering(self) -> bool:
        """Let events gather for the next write (``store_interval``) unless someone waits.

        A flush, a close or a full batch writes now; otherwise one write per interval
        (a Neo4j transaction costs several round trips and a commit whatever its size)."""
        if not self._ready or self.store_interval <= 0 or self._closing:
            return False
        if self._flush_target > self._stored_upto:
            return False
        with self._spool_lock:
            queued = sum(len(records) for records, _ in self._ready)
        return queued < self.batch_size and (
            time.monotonic() - self._last_write < self.store_interval
        )

    def _next_batch(self) -> tuple[list[dict[str, Any]], int]:
        """The journal's first ready chunks as one batch of at most ``batch_size`` records
        (at least the first chunk), with the spool offset its last chunk ends at."""
        with self._spool_lock:
            records, end = list(self._ready[0][0]), self._ready[0][1]
            for more, more_end in itertools.islice(self._ready, 1, None):
                if len(records) + len(more) > self.batch_size:
                    break
                records += more
                end = more_end
        return records, end

    def _advance(self) -> None:
        """Publish what is stored; cut the spool back when the store has all of it."""
        done = -1
        with self._spool_lock:
            # spools of dead processes hold older events: nothing newer counts as stored first
            while not self._orphans and self._marks and self._marks[0][0] <= self._stored_off:
                done = self._marks.popleft()[1]
            if not self._ready and not self._marks and self._stored_off >= self._spool.end > 0:
                self._spool.reset()
                self._stored_off = 0
        if done > self._stored_upto:
            with self._cond:
                self._stored_upto = done
                # numbers the store has passed no flush asks about (``emit`` may add one
                # meanwhile: the set is copied in one C call, each number dropped alone)
                for n in [n for n in list(self._lazy) if n <= done]:
                    self._lazy.discard(n)
                self._cond.notify_all()

    # ------------------------------------------------------------ one store call
    @telemetry.traced("capture")
    def _store(self, events: list[Event]) -> bool:
        """Hand ``events`` to the store; False when it is not answering (retry later).

        One ``beeweave.capture`` span per batch written (``emit`` itself stays untraced:
        it only queues)."""
        if not events:
            return True
        self._call_since = time.monotonic()
        try:
            res = self.store.append(events, canonical=True)
        except Exception as exc:
            self._call_since = None
            if is_outage(exc):
                self._store_failed(exc)
                return False
            return self._store_one_by_one(events)
        self._call_since = None
        self._stored(res, events)
        return True

    def _store_one_by_one(self, events: list[Event]) -> bool:
        """Isolate the event(s) a batch was refused for; the rest still go in."""
        for ev in events:
            try:
                res = self.store.append([ev], canonical=True)
            except _BAD_INPUT as exc:
                self._refuse(ev, reason(exc))
                continue
            except Exception as exc:
                outage = is_outage(exc)
                strikes = self._strikes[ev.id] = self._strikes.get(ev.id, 0) + (not outage)
                if outage or strikes < _STRIKES:
                    self._store_failed(exc)
                    return False
                self._strikes.pop(ev.id, None)
                self._refuse(ev, f"store keeps failing it: {reason(exc)}")
                continue
            self._stored(res, [ev])
        return True

    def _stored(self, res: AppendResult, events: list[Event]) -> None:
        """Count what the store took and tell listeners; copies of purged events (the
        store refused them, ``res.purged``) are dropped here, never indexed."""
        self._stats["written"] += res.inserted
        self._stats["duplicates"] += res.duplicates
        if res.purged:
            self._stats["purged_copies"] += len(res.purged)
            dead = set(res.purged)
            events = [e for e in events if e.id not in dead]
        if not self._store_up:
            log.warning("beeweave: store is back; replaying the spool")
        self._store_up = True
        self._backoff = self.retry_interval
        for listener in self.listeners:
            try:
                listener(events)
            except Exception:  # a listener must not stop capture
                log.exception("beeweave: bus listener %r failed", listener)

    def _store_failed(self, exc: BaseException) -> None:
        self._stats["store_errors"] += 1
        if self._store_up:
            log.warning("beeweave: store unavailable (%s); events wait in %s", exc, self.spool_path)
        self._store_up = False
        self._next_retry = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.max_retry_interval)

    def _store_unavailable(self) -> bool:
        """The store is down, or its running call is past ``stall_after``."""
        since = self._call_since
        stalled = since is not None and time.monotonic() - since > self.stall_after
        return stalled or not self._store_up
