"""ContextBus: capture that never blocks or breaks the agent it watches.

``emit()`` runs on the agent's thread.  It only mints an id and appends a tuple to an
in-memory deque; a background writer turns tuples into events, coalesces bursts of
low-priority fragments, and writes batches into the store.  When the store fails,
batches go to an append-only spool file and are replayed, in order, once the store
answers again (ids are fixed before spooling, so a replay is idempotent).

Bounds: at most ``max_low`` low-priority items wait in memory (beyond that the
newest are dropped and counted); at most ``max_high`` high-priority items wait in
memory (beyond that they overflow to a disk file, never dropped).
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from beeweave_core.events import (
    HIGH_PRIORITY_TYPES,
    EdgeType,
    Event,
    EventType,
    event_id_for,
    new_event_id,
)
from beeweave_core.payloads import PayloadError, dumps, to_jsonable
from beeweave_core.store import EventStore

log = logging.getLogger("beeweave.bus")
#: What :meth:`ContextBus.subscribe` takes: called with each batch once it is stored.
Listener = Callable[[list[Event]], None]

_HIGH = frozenset(t.value for t in HIGH_PRIORITY_TYPES)
_BAD_INPUT = (ValueError, TypeError, PayloadError)

# Positions in the queued tuple (a tuple is the cheapest thing to build on emit()).
_N, _ID, _TYPE, _CONTENT, _SID, _ROLE, _PAYLOAD, _PARENTS, _LINKS, _META, _SOURCE, _TS, _CK, _HI = (
    range(14)
)


class ContextBus:
    """Bounded, prioritised, non-blocking capture in front of an :class:`EventStore`."""

    def __init__(
        self,
        store: EventStore,
        *,
        spool_dir: str | os.PathLike[str],
        name: str = "bus",
        batch_size: int = 1000,
        flush_interval: float = 0.05,
        coalesce_window: float = 0.1,
        max_high: int = 100_000,
        max_low: int = 10_000,
        retry_interval: float = 0.5,
        max_retry_interval: float = 30.0,
    ) -> None:
        self.store = store
        self.tenant = store.tenant
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.coalesce_window = coalesce_window
        self.max_high = max_high
        self.max_low = max_low
        self.retry_interval = retry_interval
        self.max_retry_interval = max_retry_interval
        spool = Path(spool_dir)
        spool.mkdir(parents=True, exist_ok=True)
        self.spool_path = spool / f"{name}.spool.jsonl"
        self.overflow_path = spool / f"{name}.overflow.jsonl"
        self.dead_letter_path = spool / f"{name}.dead-letter.jsonl"

        self._counter = itertools.count()
        self._high: deque[tuple[Any, ...]] = deque()
        self._low: deque[tuple[Any, ...]] = deque()
        self._overflow_lock = threading.Lock()
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._done_upto = -1  # every item numbered <= this is stored, spooled or refused
        self._closing = False
        self._stats: dict[str, int] = dict.fromkeys(
            (
                "emitted", "written", "duplicates", "coalesced", "dropped_low", "overflowed",
                "spooled", "replayed", "refused", "store_errors", "emit_errors",
            ),
            0,
        )  # fmt: skip
        self._store_up = True
        self._next_retry = 0.0
        self._backoff = retry_interval
        self._pending_low: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        #: Called on the writer thread with each batch once it is in the store
        #: (the vector indexer and the memory writer hang off this).
        self.listeners: list[Listener] = []
        self._thread = threading.Thread(target=self._run, name=f"beeweave-{name}", daemon=True)
        self._thread.start()
        ref = weakref.ref(self)
        self._atexit = lambda: (b := ref()) is not None and b.close(timeout=10.0)
        atexit.register(self._atexit)

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
        ``coalesce_key`` inside ``coalesce_window`` are merged into one.
        """
        eid = ""
        try:
            eid = event_id_for(self.tenant, session_id, key) if key is not None else new_event_id()
            tv = type.value if isinstance(type, EventType) else type
            hi = priority == "high" or (priority is None and tv in _HIGH)
            item = (
                next(self._counter), eid, tv, content, session_id, role, payload, parents,
                links, meta, source, ts if ts is not None else time.time(), coalesce_key, hi,
            )  # fmt: skip
            self._stats["emitted"] += 1
            if hi:
                if len(self._high) < self.max_high:
                    self._high.append(item)
                else:
                    self._overflow(item)
                # Waking the writer on every event makes it fight the agent for the GIL;
                # the timer (flush_interval) picks up small amounts, a full batch wakes it.
                if len(self._high) >= self.batch_size and not self._wake.is_set():
                    self._wake.set()
            elif len(self._low) < self.max_low:
                self._low.append(item)
            else:
                self._stats["dropped_low"] += 1
        except Exception:  # capture must never break the host
            self._stats["emit_errors"] += 1
            log.exception("beeweave: emit() failed; event not captured")
        return eid

    def submit(self, event: Event) -> str:
        """Queue an already built :class:`Event` (integrations that need full control)."""
        self._stats["emitted"] += 1
        self._high.append((next(self._counter), event))
        self._wake.set()
        return event.id

    def _overflow(self, item: tuple[Any, ...]) -> None:
        """Memory bound reached for high priority: keep it on disk instead of dropping it."""
        try:
            ev = self._build(item)
        except _BAD_INPUT as exc:
            self._dead_letter(item, exc)
            return
        with self._overflow_lock, self.overflow_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"n": item[_N], "event": ev.to_record()}) + "\n")
        self._stats["overflowed"] += 1

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything emitted so far is stored (True) or safely spooled (False)."""
        target = next(self._counter)
        deadline = time.monotonic() + timeout
        self._flush_target = max(self._flush_target, target)
        self._wake.set()
        with self._cond:
            while self._done_upto < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.05))
                self._wake.set()
        return self._store_up and not self._spool_pending()

    def close(self, timeout: float = 30.0) -> None:
        """Flush, stop the writer and release the atexit hook.  Safe to call twice."""
        if self._closing:
            return
        self.flush(timeout)
        self._closing = True
        self._wake.set()
        self._thread.join(timeout)
        atexit.unregister(self._atexit)

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` on the writer thread with each batch once it is stored.

        A listener must be quick (capture waits for it) and may fail: the failure is
        logged and capture goes on.  Subscribing the same listener twice is a no-op.
        The list is replaced, never changed in place, so the writer thread can walk
        it without a lock.
        """
        if listener not in self.listeners:
            self.listeners = [*self.listeners, listener]

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling ``listener``; safe to repeat."""
        self.listeners = [x for x in self.listeners if x != listener]

    def stats(self) -> dict[str, Any]:
        """Counters that say what happened to every emitted event."""
        return {
            **self._stats,
            "queue_high": len(self._high),
            "queue_low": len(self._low) + sum(len(g) for g in self._pending_low.values()),
            "spool_pending": self._spool_pending(),
            "store_up": self._store_up,
        }

    # ------------------------------------------------------------ writer side
    _flush_target = -1

    def _mark_done(self, n: int) -> None:
        with self._cond:
            if n > self._done_upto:
                self._done_upto = n
                self._cond.notify_all()

    def _run(self) -> None:
        self._replay_spool()
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                self._cycle(force=self._closing or self._flush_target > self._done_upto)
            except Exception:  # the writer must survive anything
                log.exception("beeweave: writer cycle failed")
            if self._closing and not self._high and not self._low:
                self._cycle(force=True)
                return

    def _drain(self) -> list[tuple[Any, ...]]:
        items: list[tuple[Any, ...]] = []
        for q in (self._high, self._low):
            for _ in range(len(q)):
                items.append(q.popleft())
        if self.overflow_path.exists():
            with self._overflow_lock:
                lines = self.overflow_path.read_text(encoding="utf-8").splitlines()
                self.overflow_path.unlink()
            for line in lines:
                rec = json.loads(line)
                items.append((rec["n"], Event.from_record(rec["event"])))
        items.sort(key=lambda it: it[0])
        return items

    def _cycle(self, force: bool) -> None:
        items = self._drain()
        batch: list[tuple[int, Event]] = []
        now = time.time()
        for it in items:
            if len(it) == 2:  # pre-built event (submit/overflow)
                self._close_groups(batch, session_id=it[1].session_id)
                batch.append((it[0], it[1]))
                continue
            if it[_HI]:
                self._close_groups(batch, session_id=it[_SID])
                self._add_built(batch, it)
            else:
                self._coalesce(batch, it)
        for ck in [
            ck
            for ck, g in self._pending_low.items()
            if force or now - g[0][_TS] >= self.coalesce_window
        ]:
            self._add_group(batch, self._pending_low.pop(ck))
        if batch:
            for i in range(0, len(batch), self.batch_size):
                self._write(batch[i : i + self.batch_size])
        elif self._spool_pending():
            self._replay_spool()
        done = max((it[0] for it in items), default=-1)
        if self._pending_low:
            done = min([done] + [g[0][_N] - 1 for g in self._pending_low.values()])
        elif not self._high and not self._low:
            done = max(done, self._flush_target)
        if done >= 0:
            self._mark_done(done)

    def _coalesce(self, batch: list[tuple[int, Event]], it: tuple[Any, ...]) -> None:
        ck = (it[_SID], it[_TYPE], it[_CK])
        group = self._pending_low.get(ck)
        if group is not None and it[_TS] - group[0][_TS] <= self.coalesce_window:
            group.append(it)
            return
        if group is not None:
            self._add_group(batch, self._pending_low.pop(ck))
        self._pending_low[ck] = [it]

    def _close_groups(self, batch: list[tuple[int, Event]], session_id: str) -> None:
        """Fragments of a session precede the high-priority event that follows them."""
        for ck in [ck for ck in self._pending_low if ck[0] == session_id]:
            self._add_group(batch, self._pending_low.pop(ck))

    def _add_group(self, batch: list[tuple[int, Event]], group: list[tuple[Any, ...]]) -> None:
        if len(group) == 1:
            self._add_built(batch, group[0])
            return
        first = group[0]
        text = "".join(
            x[_CONTENT] if isinstance(x[_CONTENT], str) else str(x[_CONTENT]) for x in group
        )
        payload = dict(first[_PAYLOAD] or {})
        payload["coalesced"] = {
            "fragments": len(group),
            "first_ts": first[_TS],
            "last_ts": group[-1][_TS],
        }
        merged = (
            first[:_CONTENT]
            + (text,)
            + first[_CONTENT + 1 : _PAYLOAD]
            + (payload,)
            + first[_PAYLOAD + 1 :]
        )
        self._stats["coalesced"] += len(group) - 1
        self._add_built(batch, merged)

    def _add_built(self, batch: list[tuple[int, Event]], it: tuple[Any, ...]) -> None:
        try:
            batch.append((it[_N], self._build(it)))
        except _BAD_INPUT as exc:
            self._dead_letter(it, exc)

    def _build(self, it: tuple[Any, ...]) -> Event:
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
        links = {EdgeType(k): tuple(v) for k, v in (it[_LINKS] or {}).items()}
        # canonical JSON now, so the spool and dead-letter files keep every value intact
        return Event(
            id=it[_ID], tenant=self.tenant, session_id=it[_SID], type=EventType(it[_TYPE]),
            role=it[_ROLE], content=content, payload=to_jsonable(payload), ts=it[_TS],
            parents=tuple(it[_PARENTS] or ()), links=links, meta=to_jsonable(dict(it[_META] or {})),
            source=to_jsonable(dict(it[_SOURCE] or {})),
        )  # fmt: skip

    def _write(self, batch: list[tuple[int, Event]]) -> None:
        events = [ev for _, ev in batch]
        if self._spool_pending():  # keep order: older spooled events go first
            self._spool(events)
            self._replay_spool()
            return
        try:
            res = self.store.append(events)
        except _BAD_INPUT:
            self._write_one_by_one(events)
        except Exception as exc:
            self._store_failed(exc)
            self._spool(events)
        else:
            self._stats["written"] += res.inserted
            self._stats["duplicates"] += res.duplicates
            self._notify(events)

    def _notify(self, events: list[Event]) -> None:
        for listener in self.listeners:
            try:
                listener(events)
            except Exception:  # a listener must not stop capture
                log.exception("beeweave: bus listener %r failed", listener)

    def _write_one_by_one(self, events: list[Event]) -> None:
        """Isolate the event(s) a batch was refused for; the rest still go in."""
        for i, ev in enumerate(events):
            try:
                res = self.store.append([ev])
            except _BAD_INPUT as exc:
                self._dead_letter(ev, exc)
            except Exception as exc:
                self._store_failed(exc)
                self._spool(events[i:])
                return
            else:
                self._stats["written"] += res.inserted
                self._stats["duplicates"] += res.duplicates
                self._notify([ev])

    def _store_failed(self, exc: BaseException) -> None:
        self._stats["store_errors"] += 1
        if self._store_up:
            log.warning("beeweave: store unavailable (%s); spooling to %s", exc, self.spool_path)
        self._store_up = False
        self._next_retry = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.max_retry_interval)

    def _spool(self, events: list[Event]) -> None:
        with self.spool_path.open("a", encoding="utf-8") as f:
            for ev in events:
                f.write(json.dumps(ev.to_record(), ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._stats["spooled"] += len(events)

    def _spool_pending(self) -> bool:
        try:
            return self.spool_path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def _replay_spool(self) -> None:
        """Replay the spool in order once the store answers; keep it until all is in."""
        if not self._spool_pending() or time.monotonic() < self._next_retry:
            return
        lines = self.spool_path.read_text(encoding="utf-8").splitlines()
        events = [Event.from_record(json.loads(x)) for x in lines if x.strip()]
        for i in range(0, len(events), self.batch_size):
            chunk = events[i : i + self.batch_size]
            try:
                res = self.store.append(chunk)
            except _BAD_INPUT:
                for ev in chunk:
                    try:
                        res = self.store.append([ev])
                        self._stats["written"] += res.inserted
                    except _BAD_INPUT as exc:
                        self._dead_letter(ev, exc)
                continue
            except Exception as exc:
                self._store_failed(exc)
                rest = lines[i:]
                tmp = self.spool_path.with_suffix(".tmp")
                tmp.write_text("".join(x + "\n" for x in rest), encoding="utf-8")
                os.replace(tmp, self.spool_path)
                return
            self._stats["written"] += res.inserted
            self._stats["duplicates"] += res.duplicates
            self._stats["replayed"] += len(chunk)
            self._notify(chunk)
        self.spool_path.unlink(missing_ok=True)
        if not self._store_up:
            log.warning("beeweave: store is back; spool replayed")
        self._store_up = True
        self._backoff = self.retry_interval

    def _dead_letter(self, item: Any, exc: BaseException) -> None:
        """Keep what was refused, with why, so nothing is lost silently."""
        self._stats["refused"] += 1
        raw = item.to_record() if isinstance(item, Event) else to_jsonable(list(item))
        log.error("beeweave: event refused (%s); kept in %s", exc, self.dead_letter_path)
        try:
            with self.dead_letter_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"error": str(exc), "item": raw}, ensure_ascii=False) + "\n")
        except Exception:
            log.exception("beeweave: could not write the dead-letter file")
