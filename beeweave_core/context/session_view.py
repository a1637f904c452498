"""One session as the context engine last read it, caught up from a seq cursor.

Reading a session's whole timeline on every model call makes each call cost more than
the one before (0.55 ms per stored event per call, measured before this module).  A
view reads only the events stored since its cursor and folds them into what assembly
needs: conversation units, active memories (kept in a
:class:`~beeweave_core.memory.views.MemoryView`, by kind and with what they overturned), every
summary with its status, the thrash level and the turn scan of the working state.

Status changes made by BeeWeave's own writers (the memory writer invalidating an
overturned memory, the compactor rolling back a summary, a memory tool's forget) go
through the weave's :class:`~beeweave_core.store_writer.StoreWriter`, to which the
engine subscribes its :class:`Views`: they apply each change as it happens.  Any other
status change or purge through the store object bumps ``store.status_changes``; the
views are then dropped and the next call catches up from the start once.  (A change
made by another process is seen after :meth:`Views.drop` or a restart.)
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.context.compactor import units_between
from beeweave_core.context.messages import CONVERSATION_TYPES, Unit, UnitBuilder
from beeweave_core.context.working_state import TurnScan
from beeweave_core.events import Event, EventType, Status
from beeweave_core.memory.views import MemoryView
from beeweave_core.store import ChangeReader, EventReader
from beeweave_core.tokens import TokenCounter

_CONVERSATION = frozenset(CONVERSATION_TYPES)
#: What a branch's message list names (tool calls ride with the answer that made them).
_MESSAGES = frozenset({EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_RESULT})
#: The types a view folds in (see :meth:`SessionView._add`).
_KEPT = (*CONVERSATION_TYPES, EventType.MEMORY, EventType.SUMMARY, EventType.WARNING)
#: tool results a view remembers by id, newest last (what recall offers when the
#: retriever ranks none of them)
RESULTS_KEPT = 16
#: What the view counts of its active summaries (the compaction stats).
_TALLY = ("segments", "merged", "source_tokens", "summary_tokens")


@dataclass
class _TokenSum:
    mark: int = 0
    total: int = 0
    costs: list[int] = field(default_factory=list)


@dataclass
class SessionView:
    """What assembly reads of one session, kept current by :meth:`catch_up`."""

    session_id: str
    cursor: int = -1
    last_turn: int = -1  # seq of the newest conversation event folded in
    builder: UnitBuilder = field(default_factory=UnitBuilder)
    conversation_ids: set[str] = field(default_factory=set)  # user/assistant/tool results
    memory: MemoryView = field(default_factory=MemoryView)  # active memories, indexed
    summaries: dict[str, Event] = field(default_factory=dict)  # any status
    thrash: int = 0
    user_id: str | None = None
    scan: TurnScan = field(default_factory=TurnScan)
    results: deque[str] = field(default_factory=lambda: deque(maxlen=RESULTS_KEPT))
    refreshed: int = 0  # entries of ``memory.overturn_log`` the compactor has checked
    segment_of: dict[str, str] = field(default_factory=dict)  # turn id -> newest segment
    parent_of: dict[str, str] = field(default_factory=dict)  # summary id -> newest merge
    #: summaries by how they stand now (kept as summaries come and change status)
    summary_version: int = 0
    covered_to: int = -1  # last seq a segment handled (summarised or rolled back)
    rolled: list[Event] = field(default_factory=list)  # segments that failed retention
    tally: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_TALLY, 0))
    _cover: dict[str, int] = field(default_factory=dict)  # turn id -> active summaries
    _held: dict[str, int] = field(default_factory=dict)  # summary id -> active parents
    _top_ids: set[str] = field(default_factory=set)
    _tops: tuple[int, list[Event]] | None = None
    _scanned: int = 0  # units already folded into ``scan``
    _tokens: dict[str, _TokenSum] = field(default_factory=dict)
    #: the newest seq the store held when the view last looked (any type)
    stored_to: int = -1

    # ------------------------------------------------------------ reading
    def catch_up(self, store: EventReader, upto: int | None = None) -> int:
        """Fold in the events stored since the cursor (up to seq ``upto``, a seq known to
        be stored); returns how many were read (only the types a view keeps: an
        assembly's audit record, the biggest event a call writes, is never parsed by the
        next)."""
        events = store.timeline(
            self.session_id,
            seq_from=self.cursor + 1,
            seq_to=upto,
            types=_KEPT,
            include_inactive=True,
        )
        self.fold(events)
        if upto is not None:
            self.cursor = max(self.cursor, upto)
        return len(events)

    def fold(self, events: Iterable[Event]) -> None:
        """Fold in events already read, oldest first (all of them past the cursor)."""
        for ev in events:
            self._add(ev)

    def _add(self, ev: Event) -> None:
        self.cursor = max(self.cursor, ev.seq)
        if ev.status != Status.ACTIVE and ev.type != EventType.SUMMARY:
            return
        if ev.type in _CONVERSATION:
            self.last_turn = max(self.last_turn, ev.seq)
            self.builder.add(ev)
            if ev.type in _MESSAGES:
                self.conversation_ids.add(ev.id)
            if ev.type == EventType.TOOL_RESULT:
                self.results.append(ev.id)
            if self.user_id is None and ev.meta.get("user_id"):
                self.user_id = str(ev.meta["user_id"])
        elif ev.type == EventType.MEMORY:
            self.memory.add(ev)
        elif ev.type == EventType.SUMMARY:
            self._add_summary(ev)
        elif ev.type == EventType.WARNING and (ev.payload or {}).get("kind") == "thrash":
            self.thrash += 1

    def last_units(self, n: int) -> list[Unit]:
        """The newest ``n`` finished units (no copy of the whole list)."""
        self.builder.units_view()
        return list(self.builder.newest(n))

    def compaction_stats(self, max_level: int) -> dict[str, Any]:
        """The compaction stats row of the session, from the counts the view keeps."""
        from beeweave_core.context.compactor import stats_row

        return stats_row(self.tally, len(self.rolled), min(self.thrash, max_level))

    def holds(self, ids: Iterable[str]) -> bool:
        """Does this view hold one of the memories or summaries ``ids``?"""
        return any(i in self.memory.memories or i in self.summaries for i in ids)

    def apply_status(self, ids: Iterable[str], status: Status) -> None:
        """An event of this session changed status (told by :meth:`Views.own_change`)."""
        for i in ids:
            if status != Status.ACTIVE:
                self.memory.drop(i)
            if i in self.summaries:
                old = self.summaries[i]
                self._count(old, -1)
                self.summaries[i] = old.model_copy(update={"status": status})
                self._count(self.summaries[i], +1)
                self.summary_version += 1

    def _add_summary(self, ev: Event) -> None:
        self.summaries[ev.id] = ev
        if not ev.payload.get("level"):
            for i in ev.payload.get("source_ids") or ():
                self.segment_of[i] = ev.id
            self.covered_to = max(self.covered_to, int(ev.payload.get("seq_to", -1)))
            if (ev.payload.get("retention") or {}).get("outcome") == "rolled_back":
                self.rolled.append(ev)
        for c in ev.payload.get("children") or ():
            self.parent_of[c] = ev.id
        self._count(ev, +1)
        self.summary_version += 1

    def _count(self, s: Event, sign: int) -> None:
        """Add (+1) or take back (-1) what an active summary adds to coverage, the top
        set and the stats, so none of them is counted again from every summary."""
        if s.status != Status.ACTIVE:
            return
        for i in _sources(s):
            n = self._cover[i] = self._cover.get(i, 0) + sign
            if n <= 0:
                del self._cover[i]
        for c in s.payload.get("children") or ():
            n = self._held[c] = self._held.get(c, 0) + sign
            if sign > 0:
                self._top_ids.discard(c)
            elif n <= 0 and self.is_active(c):
                self._top_ids.add(c)
        if sign > 0 and not self._held.get(s.id):
            self._top_ids.add(s.id)
        elif sign < 0:
            self._top_ids.discard(s.id)
        level0 = not s.payload.get("level")
        t = self.tally
        t["segments" if level0 else "merged"] += sign
        if level0:
            t["source_tokens"] += sign * int(s.payload.get("source_tokens", 0))
            t["summary_tokens"] += sign * int(s.payload.get("summary_tokens", 0))

    def tops(self) -> list[Event]:
        """Active summaries no active summary merged, oldest first (kept, not recounted)."""
        if self._tops is None or self._tops[0] != self.summary_version:
            tops = sorted((self.summaries[i] for i in self._top_ids), key=_seq_of)
            self._tops = (self.summary_version, tops)
        return self._tops[1]

    def uncovered(self, units: Sequence[Unit], limit: int) -> list[Unit]:
        """The newest ``limit`` turns no active summary stands for: from the tail past
        the last segment, then from segments rolled back (newest first)."""
        found: dict[int, Unit] = {}
        i = len(units)
        while i > 0 and units[i - 1].seq_to > self.covered_to and len(found) < limit:
            i -= 1
            if not all(x in self._cover for x in units[i].ids):
                found[units[i].seq_from] = units[i]
        for s in reversed(self.rolled):
            if len(found) >= limit:
                break
            lo, hi = int(s.payload.get("seq_from", 0)), int(s.payload.get("seq_to", -1))
            for u in units_between(units, lo, hi):
                if not all(x in self._cover for x in u.ids):
                    found[u.seq_from] = u
        return [found[k] for k in sorted(found)][-limit:]

    # ------------------------------------------------------------ derived
    @property
    def systems(self) -> list[Event]:
        return self.builder.systems

    def units(self) -> list[Unit]:
        self.scanned()
        return self.builder.units()

    def scanned(self) -> TurnScan:
        """The working state's turn scan with every finished unit folded in (the new
        ones only; no copy of the unit list)."""
        self.builder.units_view()
        for u in self.builder.since(self._scanned):
            self.scan.add(u)
        self._scanned = self.builder.count()
        return self.scan

    def history_tokens(self, counter: TokenCounter) -> int:
        """Tokens of every turn as stored (what a plain buffer would send), kept as a
        running sum: only units finished again since the last call are counted."""
        self.units()
        acc = self._tokens.setdefault(counter.encoding_name, _TokenSum())
        log = self.builder.refinished
        for i in log[acc.mark :]:
            unit = self.builder.finished(i)
            cost = counter.count_messages(unit.messages, prime_reply=False) if unit else 0
            while len(acc.costs) <= i:
                acc.costs.append(0)
            acc.total += cost - acc.costs[i]
            acc.costs[i] = cost
        acc.mark = len(log)
        return acc.total

    def touched_tops(self) -> list[Event]:
        """Top summaries standing for a turn overturned since the last call (each
        overturned turn leads to its newest segment, then up through its merges)."""
        out: dict[str, Event] = {}
        for i in self.memory.overturn_log[self.refreshed :]:
            sid = self.segment_of.get(i)
            while sid in self.parent_of and self.is_active(self.parent_of[sid]):
                sid = self.parent_of[sid]
            if sid is not None and self.is_active(sid):
                out[sid] = self.summaries[sid]
        self.refreshed = len(self.memory.overturn_log)
        return list(out.values())

    def is_active(self, summary_id: str) -> bool:
        s = self.summaries.get(summary_id)
        return s is not None and s.status == Status.ACTIVE


class Views:
    """The engine's session views, dropped when the store changed behind them.

    Subscribed to the engine's :class:`~beeweave_core.store_writer.StoreWriter`, so the
    status changes BeeWeave makes itself reach them without a re-read.
    """

    def __init__(self, store: ChangeReader, *, max_sessions: int = 256) -> None:
        self.store = store
        self.lock = threading.RLock()
        self.max_sessions = max_sessions
        self._views: dict[str, SessionView] = {}
        #: other sessions as recall reads them (memories and summaries only)
        self._seen_changes = store.status_changes
        self._own_changes = 0  # status changes applied by :meth:`own_change`
        self._epoch = 0  # bumped each time a change behind the engine dropped every view

    def has(self, session_id: str) -> bool:
        """Is there a view of ``session_id`` (a read of it costs only what is new)?"""
        with self.lock:
            return session_id in self._views and self.store.status_changes == self._seen_changes

    def build(
        self,
        session_id: str,
        last: int,
        chunk: int = 5_000,
        stop: Callable[[], bool] = lambda: False,
    ) -> None:
        """Make the view of ``session_id`` up to seq ``last`` (a stored seq) without
        holding the lock: in reads of ``chunk`` seqs, so calls for this and other
        sessions go on meanwhile.  A status change while it reads (seen by the store's
        counter or made by :meth:`own_change`) makes it read again; after three tries
        the view is read under the lock, as :meth:`get` does.  ``stop`` true: it gives
        up between chunks (the engine closes)."""
        for _try in range(3):
            with self.lock:
                if self.has(session_id):
                    return
                mark = (self._own_changes, self.store.status_changes)
            view = SessionView(session_id)
            while view.cursor < last:
                if stop():
                    return
                view.catch_up(self.store, upto=min(view.cursor + chunk, last))
            with self.lock:
                if self.has(session_id):
                    return
                if mark == (self._own_changes, self.store.status_changes):
                    self._follow_changes()
                    self._views[session_id] = view
                    return
        self.get(session_id)

    def get(self, session_id: str, *, limit: int | None = None) -> tuple[SessionView, int]:
        """The view of ``session_id`` caught up (by at most ``limit`` seqs: the rest is
        read by the next call, see ``view.stored_to``) and how many events it just read."""
        with self.lock:
            self._follow_changes()
            view = self._views.pop(session_id, None) or SessionView(session_id)
            self._views[session_id] = view  # most recently used last
            while len(self._views) > self.max_sessions:
                self._views.pop(next(iter(self._views)))
            if limit is None:
                n = view.catch_up(self.store)
                view.stored_to = max(view.stored_to, view.cursor)
                return view, n
            newest = self.store.timeline(session_id, last=1, include_inactive=True)
            view.stored_to = newest[-1].seq if newest else -1
            if view.cursor >= view.stored_to:
                return view, 0
            return view, view.catch_up(self.store, upto=min(view.cursor + limit, view.stored_to))

    def _every(self) -> list[SessionView]:
        return list(self._views.values())

    def outside_changes(self) -> int:
        """How many times a change made behind the engine (a purge, another writer's
        status change) made the views read again; other derived state follows it."""
        with self.lock:
            self._follow_changes()
            return self._epoch

    def _follow_changes(self) -> None:
        if self.store.status_changes != self._seen_changes:
            self.drop()
            self._epoch += 1

    def drop(self, session_id: str | None = None) -> None:
        """Forget a view (or all): the next read catches up from the start."""
        with self.lock:
            if session_id is None:
                self._views.clear()
                self._seen_changes = self.store.status_changes
            else:
                self._views.pop(session_id, None)

    def on_stored(self, events: list[Event]) -> None:
        """Nothing to do: a view reads what was stored past its cursor on its next read
        (a subscriber of the engine's writer is told of appends too).

        Args:
            events: What the writer just stored.
        """

    def own_change(self, change: Callable[[], int], ids: Sequence[str], status: Status) -> int:
        """Run a status change BeeWeave itself makes and apply it to the views at once (as
        the subscriber of the engine's writer): under the lock, so no read sees the store
        changed and the views not yet.

        Args:
            change: The store call (through the writer); called once.
            ids: The events whose status changes.
            status: Their new status.

        Returns:
            What ``change`` returned.
        """
        with self.lock:
            for view in self._every():
                if view.holds(ids):  # what replaces them first (a memory superseding one
                    view.catch_up(self.store)  # carries on what that one overturned)
            before = self.store.status_changes
            self._own_changes += 1
            n = change()
            if self._seen_changes == before and self.store.status_changes in (before, before + 1):
                self._seen_changes = self.store.status_changes
            for view in self._every():
                view.apply_status(ids, status)
            return n

    @contextmanager
    def hiding(self, ids: Sequence[str]) -> Iterator[None]:
        """Read the sessions as if the summaries ``ids`` were rolled back (nothing is
        written; the lock is held throughout, so no other call sees it)."""
        with self.lock:
            views = self._every()
            for view in views:
                view.apply_status(ids, Status.INVALIDATED)
            try:
                yield
            finally:
                for view in views:
                    view.apply_status(ids, Status.ACTIVE)


def _seq_of(ev: Event) -> int:
    return ev.seq


def _sources(ev: Event) -> list[str]:
    return list(ev.payload.get("raw_ids") or ev.payload.get("source_ids") or ())
