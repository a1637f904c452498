"""What the parts of the capture bus share: settings, queues, locks, offsets and counters.

:class:`~beeweave_core.capture.bus.ContextBus` is one object whose methods come from
the modules beside this one (intake, overflow, journal, replay, drain, purge); they
share these fields, as they did when they were one class, so every lock and every
offset is the same object whichever thread or part uses it.  Two threads write here:
the *journal* thread (``_journal_loop``) and the *store* thread (``_store_loop``); the
agent's thread only appends to the queues and counts.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from beeweave_core.capture.item import Item, Queued
from beeweave_core.capture.spool import DeadLetters, Spool
from beeweave_core.events import Event
from beeweave_core.governance.redaction import Redactor
from beeweave_core.store import EventStore

#: What :meth:`ContextBus.subscribe` takes: called with each batch once it is stored.
Listener = Callable[[list[Event]], None]
#: Counters of ``stats()``: what happened to every emitted event.
STATS = (
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
)


class CaptureState:
    """The fields every part of the bus reads; set by ``ContextBus.__init__``."""

    store: EventStore
    redactor: Redactor | None
    tenant: str
    batch_size: int
    flush_interval: float
    coalesce_window: float
    max_high: int
    max_low: int
    store_interval: float
    retry_interval: float
    max_retry_interval: float
    stall_after: float
    spool_path: Path
    overflow_path: Path
    dead_letter_path: Path
    listeners: list[Listener]
    _spool: Spool
    _dead: DeadLetters
    _redacted_counts: Counter[str]
    _redact_lock: threading.Lock
    _orphans: list[tuple[Path, IO[bytes] | None]]
    _jthread: threading.Thread
    _sthread: threading.Thread

    def _init_state(self) -> None:
        self._counter = itertools.count()
        self._high: deque[Queued] = deque()
        self._low: deque[Queued] = deque()
        self._rejects: deque[tuple[int, str, Item]] = deque()
        self._pending_low: dict[tuple[Any, ...], list[Item]] = {}
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
        # numbers a reading flush need not wait for: lazy records and other waits' marks
        self._lazy: set[int] = set()
        self._orphan_off = 0
        self._store_up = True
        self._next_retry = self._last_write = 0.0
        self._backoff = self.retry_interval
        self._call_since: float | None = None
        self._strikes: dict[str, int] = {}
        self._closing = self._closed = False
        self._stop_at = math.inf
        self._refused_seen = 0
        self._stats: dict[str, int] = dict.fromkeys(STATS, 0)
