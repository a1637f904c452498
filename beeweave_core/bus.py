"""ContextBus: capture that never blocks or breaks the agent it watches, and loses nothing.

``emit()`` runs on the agent's thread.  It checks the cheap things (types, the
session id), mints an id and appends a tuple to an in-memory deque.  Two
background threads do the rest:

* the *journal* thread, every ``flush_interval`` (50 ms), turns tuples into events
  (coalescing bursts of low-priority fragments), one at a time so a bad one is
  dead-lettered alone, and appends them to this process's spool file;
* the *store* thread hands those events to the store in batches and cuts the
  spool back once the store has them.  When the store fails or hangs it stops
  asking, and later replays the spool in order (ids are fixed before spooling,
  so a replay is idempotent).

So an event is on disk one journal tick after ``emit()`` returned, whether the
store answers or not; see docs/durability.md for the full contract.
Bounds: at most ``max_low`` low-priority items wait in the queue (beyond that the
newest are dropped and counted) and at most ``max_low`` fragments wait in coalescing
groups (beyond that the oldest group is written early); a store slower than capture
keeps at most ``READY_MAX`` journaled records in memory (it reads the rest from the
spool); past ``max_high`` high-priority items go straight to an overflow file on the
caller's thread, never dropped.  At most ``max_low`` refused emits wait for the journal
to write them to the dead-letter file (beyond that they are counted in
``refused_unkept``); refusals are written and logged once per journal cycle, so a flood
of bad input costs file speed and one log line per cycle, not one per event.
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import math
import os
import sqlite3
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Any, TypeVar

from beeweave_core import shutdown, telemetry
from beeweave_core.errors import StoreError, shown
from beeweave_core.events import (
    HIGH_PRIORITY_TYPES,
    AppendResult,
    EdgeType,
    Event,
    EventType,
    event_id_for,
    new_event_id,
)
from beeweave_core.governance.redaction import EVENT_FIELDS, Redactor, redact_value
from beeweave_core.ids import check_tenant, file_key, session_problem
from beeweave_core.payloads import PayloadError, dumps, to_jsonable
from beeweave_core.spool import (
    DRAINING,
    OVERFLOW,
    DeadLetters,
    Match,
    Spool,
    chunks,
    encode,
    filter_file,
    keys_of,
    line_matches,
)
from beeweave_core.store import EventStore

T = TypeVar("T")
log = logging.getLogger("beeweave.bus")
#: Journaled records kept in memory for a store that is behind; beyond this the store
#: thread reads them back from the spool file (memory stays bounded under any burst).
READY_MAX = 20_000
#: What :meth:`ContextBus.subscribe` takes: called with each batch once it is stored.
Listener = Callable[[list[Event]], None]

_HIGH = frozenset(t.value for t in HIGH_PRIORITY_TYPES)
_TYPES = frozenset(t.value for t in EventType)
_BAD_INPUT = (ValueError, TypeError, PayloadError)
#: Times the store may fail one event for an unknown reason before it is dead-lettered.
_STRIKES = 3
#: Items the journal takes from memory per write (each chunk is on disk before the next).
_CHUNK = 250

# Positions in the queued tuple (a tuple is the cheapest thing to build on emit()).
_N, _ID, _TYPE, _CONTENT, _SID, _ROLE, _PAYLOAD, _PARENTS, _LINKS, _META, _SOURCE, _TS, _CK, _HI = (
    range(14)
)
Built = tuple[int, dict[str, Any]]  # (n, the event in its JSON record form)


def _as_str(value: Any) -> Any:
    """A ``str`` subclass (an enum, a custom id type) as a plain, hashable ``str``."""
    return str.__str__(value) if isinstance(value, str) and type(value) is not str else value


def emit_problem(tv: Any, sid: Any, ck: Any, ts: Any, priority: Any, key: Any) -> str | None:
    """Why an emit() cannot become an event (None: it can).  Cheap: the caller's thread."""
    if type(tv) is not str or tv not in _TYPES:
        return f"unknown event type {shown(tv)}"
    problem = session_problem(sid)
    if problem:
        return problem
    if ck is not None and type(ck) is not str:
        return f"coalesce_key must be a string, got {type(ck).__name__}"
    if key is not None and type(key) is not str:
        return f"key must be a string, got {type(key).__name__}"
    if ts is not None and (type(ts) not in (int, float) or not math.isfinite(ts)):
        return f"ts must be a finite number of seconds, got {shown(ts)}"
    if priority not in (None, "high", "low"):
        return f"priority must be 'high' or 'low', got {shown(priority)}"
    return None


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


def _reason(exc: BaseException) -> str:
    """One bounded line saying why (a validation error's lines joined, not its first)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _raw(item: Any) -> Any:
    """A JSON form of whatever was refused, however broken its parts are."""
    if isinstance(item, Event):
        return item.to_record()
    if isinstance(item, dict):
        return item
    try:
        return to_jsonable(list(item))
    except Exception:
        out = []
        for part in item:
            try:
                out.append(to_jsonable(part))
            except Exception:
                out.append({"$unreadable": type(part).__name__})
        return out


class ContextBus:
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

    def _init_state(self) -> None:
        self._counter = itertools.count()
        self._high: deque[tuple[Any, ...]] = deque()
        self._low: deque[tuple[Any, ...]] = deque()
        self._rejects: deque[tuple[int, str, tuple[Any, ...]]] = deque()
        self._pending_low: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        self._pending_n = 0  # fragments in _pending_low (bounded by max_low)
        self._overflow_lock = threading.RLock()  # RLock: SIGTERM may land inside emit()
        self._overflow_f: IO[bytes] | None = None
        self._overflowing = False
        self._drain_left = False  # an overflow file cut off and not yet drained
        self._inflight = 0  # items the journal has taken but not yet written
        self._wake, self._swake = threading.Event(), threading.Event()
        self._cond = threading.Condition(threading.RLock())  # RLock: SIGTERM may re-enter
        # held by each journal cycle / store step (two locks: neither waits on the other);
        # purge takes both to see the files and queues still
        self._jpause, self._spause = threading.RLock(), threading.RLock()
        self._spool_lock = threading.Lock()  # spool offsets, _ready, _marks, _disk
        self._ready: deque[tuple[list[dict[str, Any]], int]] = deque()
        self._marks: deque[tuple[int, int]] = deque()  # (spool offset, every n <= is done)
        self._stored_off = 0
        self._disk = False  # the store thread replays from the spool file, not from memory
        self._persisted_upto = self._stored_upto = self._flush_target = -1
        self._orphan_off = 0
        self._store_up = True
        self._next_retry = self._last_write = 0.0
        self._backoff = self.retry_interval
        self._call_since: float | None = None
        self._strikes: dict[str, int] = {}
        self._closing = self._closed = False
        self._stop_at = math.inf
        self._refused_seen = 0
        self._stats: dict[str, int] = dict.fromkeys(
            (
                "emitted",
                "journaled",
                "written",
                "duplicates",
                "coalesced",
                "dropped_low",
                "overflowed",
                "spooled",
                "replayed",
                "refused",
                "refused_unkept",
                "purged_copies",
                "store_errors",
                "emit_errors",
            ),
            0,
        )

    # ------------------------------------------------------------ caller side
    def emit(
        self,
        type: EventType | str,
        content: Any = "",
        *,
        session_id: str,
        role: str | None = None,
        payload: Mapping[str, Any] | None = None,
        parents: Sequence[str] = (),
        links: Mapping[EdgeType | str, Sequence[str]] | None = None,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
        key: str | None = None,
        ts: float | None = None,
        priority: str | None = None,
        coalesce_key: str | None = None,
    ) -> str:
        """Queue one event and return its id at once; never raises, never blocks.

        ``key`` makes the id deterministic (a redelivered hook maps to the same id);
        without it every call is a new event.  ``priority`` overrides the type's
        default ("high" / "low"); low-priority events with the same
        ``coalesce_key`` inside ``coalesce_window`` are merged into one.  Input that
        cannot become an event (a non-string session id, ``ts="yesterday"``) is
        refused: counted, and kept in the dead-letter file with the reason.
        """
        eid = ""
        try:
            n = next(self._counter)
            self._stats["emitted"] += 1
            if telemetry.CAPTURE is not None:
                telemetry.CAPTURE.add(1)
            tv = type.value if isinstance(type, EventType) else _as_str(type)
            session_id, coalesce_key, key = (_as_str(session_id), _as_str(coalesce_key), _as_str(key))  # fmt: skip
            problem = emit_problem(tv, session_id, coalesce_key, ts, priority, key)
            eid = new_event_id() if problem or key is None else event_id_for(self.tenant, session_id, key)  # fmt: skip
            hi = priority == "high" or (priority is None and tv in _HIGH)
            item = (
                n, eid, tv, content, session_id, role, payload, parents,
                links, meta, source, ts if ts is not None else time.time(), coalesce_key, hi,
            )  # fmt: skip
            if problem:
                self._reject(n, problem, item)
            elif hi:
                if self._overflowing or len(self._high) + self._inflight >= self.max_high:
                    self._overflow(item)
                else:
                    self._high.append(item)
                    # waking the writer per event would make it fight the agent for the GIL
                    if len(self._high) >= self.max_high // 2 and not self._wake.is_set():
                        self._wake.set()
            elif len(self._low) < self.max_low:
                self._low.append(item)
            else:
                self._stats["dropped_low"] += 1
        except Exception:  # capture must never break the host
            self._stats["emit_errors"] += 1
            log.exception("beeweave: emit() failed; event not captured")
        return eid

    def _reject(self, n: int, problem: str, item: tuple[Any, ...]) -> None:
        """Queue a refusal for the dead-letter file, within ``max_low`` (a flood of bad
        input is counted past that, never held)."""
        if len(self._rejects) < self.max_low:
            self._rejects.append((n, problem, item))
        else:
            self._stats["refused_unkept"] += 1

    def submit(self, event: Event) -> str:
        """Queue an already built :class:`Event` (integrations that need full control).

        Args:
            event: The event, queued as high priority and written as it is.

        Returns:
            The event's id.
        """
        self._stats["emitted"] += 1
        if telemetry.CAPTURE is not None:
            telemetry.CAPTURE.add(1)
        self._high.append((next(self._counter), event))
        self._wake.set()
        return event.id

    def _overflow(self, item: tuple[Any, ...]) -> None:
        """Memory bound reached for high priority: keep it on disk instead of dropping it."""
        try:
            line = encode(item[_N], self._redacted(self._record(item)))
        except Exception as exc:
            self._rejects.append((item[_N], _reason(exc), item))
            return
        with self._overflow_lock:
            if self._overflow_f is None:
                from beeweave_core.private import open_private

                self._overflow_f = open_private(self.overflow_path, "ab", buffering=0)
            self._overflow_f.write(line)
            self._overflowing = True
        self._stats["overflowed"] += 1

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything emitted so far is in the store.

        True: every event emitted before the call is stored, and nothing was refused
        since the previous ``flush()``.  False: some events are only in the spool
        (the store is down or did not answer within ``stall_after``; they are
        replayed later), were refused (dead-letter file), or ``timeout`` passed.
        Either way everything emitted before the call is on disk or stored when
        this returns, unless the timeout passed first.

        Args:
            timeout: Most seconds to wait.

        Returns:
            Whether everything emitted before the call is stored and nothing was refused.
        """
        target = next(self._counter)
        self._flush_target = max(self._flush_target, target)
        self._wake.set()
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._stored_upto < target:
                if self._persisted_upto >= target and self._store_unavailable():
                    break
                left = deadline - time.monotonic()
                if left <= 0 or not self._jthread.is_alive():
                    break
                self._cond.wait(min(left, 0.05))
                self._wake.set()
                self._swake.set()
        total = self._stats["refused"] + self._stats["refused_unkept"]
        refused, self._refused_seen = total > self._refused_seen, total
        return self._stored_upto >= target and not refused

    def persisted(self, timeout: float = 5.0) -> bool:
        """Wait until everything emitted so far is at least on disk (spool or store).

        Args:
            timeout: Most seconds to wait.

        Returns:
            Whether it all reached disk before ``timeout``.
        """
        target = next(self._counter)
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
            if self._overflow_f is not None:
                self._overflow_f.close()
                self._overflow_f = None
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

    def _store_unavailable(self) -> bool:
        since = self._call_since
        stalled = since is not None and time.monotonic() - since > self.stall_after
        return stalled or not self._store_up

    # ------------------------------------------------------------ purge
    def forget(self, match: Match) -> int:
        """Drop pending events ``match(id, session_id, user_id)`` selects from memory, the
        spool, the overflow and spools left by dead processes, and such entries from
        the dead-letter file: a purge must also reach what the store does not have yet.

        Args:
            match: Says which events to drop, from their id, session id and user id.

        Returns:
            The number of pending events dropped.
        """
        with self._jpause, self._spause:
            dropped = self._forget_memory(match)
            with self._spool_lock:
                dropped += self._spool.rewrite(match, self._stored_off)
                self._stored_off = 0
                self._ready.clear()
                self._disk = self._spool.end > 0
                self._marks.clear()
                self._marks.append((self._spool.end, self._persisted_upto))
            with self._overflow_lock:
                if self._overflow_f is not None:
                    self._overflow_f.close()
                    self._overflow_f = None
                for path in (self.overflow_path, self._spool.file(DRAINING)):
                    dropped += filter_file(path, lambda line: line_matches(line, match))
            self._claim_orphans()
            for i, (path, _) in enumerate(self._orphans):
                start = self._orphan_off if i == 0 else 0
                dropped += filter_file(path, lambda line: line_matches(line, match), start)
            self._orphan_off = 0
            self._dead.forget(match)
        self._swake.set()
        return dropped

    def _claim_orphans(self) -> None:
        """Take on the spools of processes that died since this bus opened: a purge must
        reach them (else the next start replays what it removed), and they are replayed."""
        known = {path for path, _ in self._orphans}
        self._orphans += [o for o in self._spool.orphans() if o[0] not in known]

    def _forget_memory(self, match: Match) -> int:
        def hit(it: tuple[Any, ...]) -> bool:
            if len(it) == 2:
                return match(it[1].id, it[1].session_id, it[1].user_id)
            meta = it[_META] if isinstance(it[_META], Mapping) else {}
            user = meta.get("user_id")
            return match(it[_ID], it[_SID], user if isinstance(user, str) else None)

        dropped = 0
        for q in (self._high, self._low):
            for _ in range(len(q)):
                it = q.popleft()
                if hit(it):
                    dropped += 1
                else:
                    q.append(it)  # order is restored by ``n`` when the journal takes them
        for ck in list(self._pending_low):
            group = [it for it in self._pending_low[ck] if not hit(it)]
            dropped += len(self._pending_low[ck]) - len(group)
            if group:
                self._pending_low[ck] = group
            else:
                del self._pending_low[ck]
        self._pending_n = sum(len(g) for g in self._pending_low.values())
        with self._spool_lock:
            for records, _ in self._ready:
                dropped += sum(1 for r in records if match(*keys_of(r)))
        return dropped

    # ------------------------------------------------------------ journal thread
    def _journal_loop(self) -> None:
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            closing = self._closing
            try:
                with self._jpause:
                    self._journal_cycle(force=closing or self._flush_target > self._persisted_upto)
            except Exception:  # the writer must survive anything
                log.exception("beeweave: journal cycle failed")
            if closing and not (self._high or self._low or self._pending_low or self._rejects):
                self._swake.set()
                return

    def _take(self, k: int) -> list[tuple[Any, ...]]:
        """Up to ``k`` queued items in emit order (they count as in memory until written)."""
        items: list[tuple[Any, ...]] = []
        high, low = self._high, self._low
        while len(items) < k and (high or low):
            take_high = high and (not low or high[0][0] < low[0][0])
            items.append(high.popleft() if take_high else low.popleft())
        self._inflight = len(items)
        return items

    def _journal_cycle(self, force: bool) -> None:
        seen = -1
        refused = [self._rejects.popleft() for _ in range(len(self._rejects))]
        if refused:
            self._refuse_all([(item, reason) for _, reason, item in refused])
            seen = max(n for n, _, _ in refused)
        seen = max(seen, self._journal_memory())
        older = self._start_overflow_drain()
        if older is not None:
            # what reached memory before the overflow file was cut off may be older than
            # lines in it (a thread's next emit overflowed): those go first; what came
            # after the cut is newer than every line, and waits for the next cycle
            seen = max(seen, self._journal_memory(older))
            self._drain_overflow()
        batch: list[Built] = []
        now = time.time()
        for ck in [
            ck
            for ck, g in self._pending_low.items()
            if force or now - g[0][_TS] >= self.coalesce_window
        ]:
            self._add_group(batch, self._take_group(ck))
        self._persist(batch)
        done = seen
        if self._pending_low:
            done = min([done] + [g[0][_N] - 1 for g in self._pending_low.values()])
        elif not (self._high or self._low or self._overflowing):
            done = max(done, self._flush_target)
        self._commit(done)

    def _journal_memory(self, budget: int | None = None) -> int:
        """Write what is queued now (at most ``budget`` items, oldest queued first), in
        small chunks (each on disk before the next is taken); the highest ``n`` written
        (-1: none)."""
        seen = -1
        if budget is None:
            budget = len(self._high) + len(self._low)
        while budget > 0:
            items = self._take(min(budget, _CHUNK))
            if not items:
                break
            budget -= len(items)
            batch: list[Built] = []
            for it in items:
                self._arrange(batch, it)
            self._persist(batch)
            self._inflight = 0
            seen = max(seen, items[-1][0])
        return seen

    def _arrange(self, batch: list[Built], it: tuple[Any, ...]) -> None:
        """Place one queued item: pre-built, high priority, or a fragment to coalesce."""
        try:
            if len(it) == 2:  # pre-built event (submit)
                self._close_groups(batch, session_id=it[1].session_id)
                batch.append((it[0], it[1].to_record()))
            elif it[_HI]:
                self._close_groups(batch, session_id=it[_SID])
                self._add_built(batch, it)
            else:
                self._coalesce(batch, it)
        except Exception as exc:  # one bad item never takes the others with it
            self._refuse(it, _reason(exc))

    def _coalesce(self, batch: list[Built], it: tuple[Any, ...]) -> None:
        ck = (it[_SID], it[_TYPE], it[_CK])
        group = self._pending_low.get(ck)
        while self._pending_low and self._pending_n >= self.max_low:  # oldest goes out early
            oldest = next(iter(self._pending_low))
            self._add_group(batch, self._take_group(oldest))
            group = None if oldest == ck else group
        self._pending_n += 1
        if group is not None and it[_TS] - group[0][_TS] <= self.coalesce_window:
            group.append(it)
            return
        if group is not None:
            self._add_group(batch, self._take_group(ck))
        self._pending_low[ck] = [it]

    def _take_group(self, ck: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        group = self._pending_low.pop(ck)
        self._pending_n -= len(group)
        return group

    def _close_groups(self, batch: list[Built], session_id: str) -> None:
        """Fragments of a session precede the high-priority event that follows them."""
        for ck in [ck for ck in self._pending_low if ck[0] == session_id]:
            self._add_group(batch, self._take_group(ck))

    def _add_group(self, batch: list[Built], group: list[tuple[Any, ...]]) -> None:
        if len(group) == 1:
            self._add_built(batch, group[0])
            return
        first = group[0]
        try:
            text = "".join(
                x[_CONTENT] if isinstance(x[_CONTENT], str) else str(x[_CONTENT]) for x in group
            )
            payload = dict(first[_PAYLOAD] or {})
        except Exception:  # a fragment that cannot be merged: keep each one on its own
            for it in group:
                self._add_built(batch, it)
            return
        payload["coalesced"] = {
            "fragments": len(group),
            "first_ts": first[_TS],
            "last_ts": group[-1][_TS],
        }
        merged = first[:_CONTENT] + (text,) + first[_CONTENT + 1 : _PAYLOAD] + (payload,)
        self._stats["coalesced"] += len(group) - 1
        self._add_built(batch, merged + first[_PAYLOAD + 1 :])

    def _add_built(self, batch: list[Built], it: tuple[Any, ...]) -> None:
        try:
            batch.append((it[_N], self._record(it)))
        except Exception as exc:  # a payload whose model_dump raises …
            self._refuse(it, _reason(exc))

    def _record(self, it: tuple[Any, ...]) -> dict[str, Any]:
        """The event's JSON record, in canonical form, without building a model yet.

        This is all the journal does per event, so it stays fast (the window in which
        an event is only in memory); the store thread validates it into an
        :class:`Event` (a record it cannot validate is refused there, alone).
        """
        content = it[_CONTENT]
        payload = dict(it[_PAYLOAD] or {})
        if content is None:
            content = ""
        elif not isinstance(content, str):
            payload.setdefault("$content_value", to_jsonable(content))
            content = (
                content.decode("utf-8", "backslashreplace")
                if isinstance(content, bytes)
                else dumps(to_jsonable(content))
            )
        links = it[_LINKS]
        return {
            "id": it[_ID],
            "tenant": self.tenant,
            "session_id": it[_SID],
            "seq": -1,
            "type": it[_TYPE],
            "role": it[_ROLE],
            "content": content,
            "payload": to_jsonable(payload),
            "ts": it[_TS],
            "parents": list(it[_PARENTS] or ()),
            "links": {
                _as_str(k.value if isinstance(k, EdgeType) else k): list(v)
                for k, v in links.items()
            }
            if links
            else {},
            "meta": to_jsonable(dict(it[_META] or {})),
            "source": to_jsonable(dict(it[_SOURCE] or {})),
            "status": "active",
            "status_reason": None,
        }

    def redact(self, value: T) -> T:
        """``value`` with personal data replaced (counted in ``stats()["redacted"]``, never
        logged); ``value`` itself without a redactor.  The one place anything BeeWeave
        writes — events, checkpoints, store items — is redacted.

        Args:
            value: A text, or a JSON-like value or checkpoint object holding texts.

        Returns:
            ``value`` with every string inside redacted, its types kept.
        """
        if self.redactor is None:
            return value
        found: Counter[str] = Counter()
        try:
            return redact_value(value, self.redactor, found)
        finally:
            if found:
                with self._redact_lock:
                    self._redacted_counts.update(found)

    def _redacted(self, rec: dict[str, Any]) -> dict[str, Any]:
        """``rec`` with personal data replaced in its text, payload, meta and source (ids kept)."""
        if self.redactor is None:
            return rec
        return {**rec, **{f: self.redact(rec[f]) for f in EVENT_FIELDS if f in rec}}

    def _persist(self, batch: list[Built]) -> None:
        """Append records to the spool and hand them to the store thread."""
        if not batch:
            return
        parts: list[bytes] = []
        records: list[dict[str, Any]] = []
        for n, rec in batch:
            try:
                rec = self._redacted(rec)
                parts.append(encode(n, rec))
                records.append(rec)
            except Exception as exc:
                self._refuse(rec, _reason(exc))
        with self._spool_lock:
            end = self._spool.append(b"".join(parts))
            if self._disk:
                self._stats["spooled"] += 0 if self._store_up else len(records)
            else:
                self._ready.append((records, end))
                if len(self._ready) > 8 and sum(len(r) for r, _ in self._ready) > READY_MAX:
                    self._ready.clear()  # a store behind the journal: it reads the spool
                    self._disk = True
        self._stats["journaled"] += len(records)
        self._swake.set()

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
            if self._overflow_f is not None:
                self._overflow_f.close()
                self._overflow_f = None
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

    def _commit(self, done: int) -> None:
        if done < 0:
            return
        with self._spool_lock:
            self._marks.append((self._spool.end, done))
        with self._cond:
            if done > self._persisted_upto:
                self._persisted_upto = done
                self._cond.notify_all()
        self._swake.set()

    # ------------------------------------------------------------ store thread
    def _store_loop(self) -> None:
        while True:
            self._swake.wait(0.05)
            self._swake.clear()
            try:
                with self._spause:
                    self._store_step()
            except Exception:  # the writer must survive anything
                log.exception("beeweave: store step failed")
            if time.monotonic() > self._stop_at:
                return
            if not self._jthread.is_alive() and self._caught_up():
                return

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
                self._cond.notify_all()

    def _replay_own(self) -> None:
        """The store is back (or was slow): replay the spool from the first unstored line."""
        with self._spool_lock:
            start, end = self._stored_off, self._spool.end
        for lines, pos in chunks(self._spool.path, self.batch_size, start, end):
            events = self._events(line["event"] for line in self._parse(lines))
            if not self._store(events):
                return
            self._stats["replayed"] += len(events)
            with self._spool_lock:
                self._stored_off = max(self._stored_off, pos)
            self._advance()
            if time.monotonic() > self._stop_at:
                return
        with self._spool_lock:
            if self._stored_off >= self._spool.end:
                self._disk = False
        self._advance()

    def _replay_orphans(self) -> bool:
        """Replay spools left by dead processes, oldest first; False while the store is down."""
        while self._orphans:
            path, handle = self._orphans[0]
            for lines, pos in chunks(path, self.batch_size, self._orphan_off):
                events = self._events(line["event"] for line in self._parse(lines))
                if not self._store(events):
                    return False
                self._stats["replayed"] += len(events)
                self._orphan_off = pos
            path.unlink(missing_ok=True)
            if handle is not None:
                handle.close()
            self._orphans.pop(0)
            self._orphan_off = 0
            log.info("beeweave: replayed events a stopped process left in %s", path.name)
        return True

    def _parse(self, lines: list[bytes]) -> Iterator[dict[str, Any]]:
        for line in lines:
            try:
                rec = json.loads(line)
                if isinstance(rec, dict) and isinstance(rec.get("event"), dict):
                    yield rec
                    continue
                problem = "not a spool record"
            except ValueError as exc:
                problem = str(exc)
            self._refuse((line.decode("utf-8", "replace"),), f"unreadable spool line: {problem}")

    def _events(self, records: Iterable[dict[str, Any]]) -> list[Event]:
        """Validate records into events; one that does not validate is refused alone."""
        out: list[Event] = []
        for rec in records:
            try:
                out.append(Event.from_record(rec))
            except Exception as exc:  # ts="yesterday" from a spool, an unknown edge type …
                self._refuse(rec, _reason(exc))
        return out

    @telemetry.traced("capture")
    def _store(self, events: list[Event]) -> bool:
        """Hand ``events`` to the store; False when it is not answering (retry later).

        One ``beeweave.capture`` span per batch written (``emit`` itself stays untraced:
        it only queues)."""
        if not events:
            return True
        self._call_since = time.monotonic()
        try:
            res = self.store.append(events)
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
                res = self.store.append([ev])
            except _BAD_INPUT as exc:
                self._refuse(ev, _reason(exc))
                continue
            except Exception as exc:
                outage = is_outage(exc)
                strikes = self._strikes[ev.id] = self._strikes.get(ev.id, 0) + (not outage)
                if outage or strikes < _STRIKES:
                    self._store_failed(exc)
                    return False
                self._strikes.pop(ev.id, None)
                self._refuse(ev, f"store keeps failing it: {_reason(exc)}")
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

    def _refuse(self, item: Any, reason: str) -> None:
        """Keep what was refused, with why, so nothing is lost silently."""
        self._refuse_all([(item, reason)])

    def _refuse_all(self, refused: list[tuple[Any, str]]) -> None:
        """Dead-letter ``refused`` in one write, with one log line for all of them."""
        records = [self._dead_record(item, reason) for item, reason in refused]
        self._stats["refused"] += len(records)
        first = records[0]["error"]
        more = f" and {len(records) - 1} more" if len(records) > 1 else ""
        log.error(
            "beeweave: event refused (%s)%s; kept in %s", first[:200], more, self.dead_letter_path
        )
        try:
            self._dead.add(records)
        except Exception:
            log.exception("beeweave: could not write the dead-letter file")

    def _dead_record(self, item: Any, reason: str) -> dict[str, Any]:
        reason = self.redact(reason)  # an error message may quote the value it refused
        if isinstance(item, Event):
            item = item.to_record()
        if isinstance(item, dict):
            eid, sid, user = keys_of(item)
        elif isinstance(item, tuple) and len(item) == 14:
            meta = item[_META] if isinstance(item[_META], Mapping) else {}
            eid, sid, user = item[_ID], item[_SID], meta.get("user_id")
        else:
            eid = sid = user = None
        return {
            "at": time.time(),
            "error": reason,
            "id": eid if isinstance(eid, str) else None,
            "session_id": sid if isinstance(sid, str) else None,
            "user_id": user if isinstance(user, str) else None,
            "item": self.redact(_raw(item)),
        }
