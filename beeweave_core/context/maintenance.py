"""Maintenance: one background worker per engine keeps every session's derived state.

Stored batches (the capture bus's listener) mark their sessions *due*; the worker takes
one due session at a time and, from the session's cursor (it never re-reads a session):

1. extracts memories from the new turns and applies supersession (the memory writer);
2. folds the new events into the session's view (units, memories, summaries);
3. compacts when the uncovered turns passed the trigger of the window the reads ask
   for, and runs the amnesia check on what that compaction wrote;
4. publishes an immutable :class:`~.snapshot.Snapshot`.

A step reads at most :data:`CHUNK` events, so a long backlog (an import, a session
another process wrote) is a series of short steps, published one after another.  The
worker gives way to reads: while an ``assemble`` runs it waits between sub-steps (the
weave's :class:`~beeweave_core.read_gate.ReadGate`), so a read does not share the
interpreter with a catch-up.  ``assemble`` only ever takes the newest published snapshot; explicit
maintenance (``compact``, ``update``, ``memories``) asks the worker and waits for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from beeweave_core.context.compactor import CompactionReport, Compactor, SessionInputs
from beeweave_core.context.session_view import SessionView, Views
from beeweave_core.context.snapshot import Snapshot, empty
from beeweave_core.context.working_state import build_working_state
from beeweave_core.errors import StoreClosed
from beeweave_core.events import SEARCHED_TYPES, Event, EventType
from beeweave_core.fallback import Fallback, unavailable
from beeweave_core.memory.views import working_candidates
from beeweave_core.memory.writer import MemoryWriter
from beeweave_core.read_gate import ReadGate
from beeweave_core.tokens import TokenCounter

log = logging.getLogger("beeweave.context")

#: Events one step reads (memory extraction and the view's catch-up).
CHUNK = 256
#: Events the full-text index takes per sync (reads wait for at most one batch).
TEXT_BATCH = 256
#: Seconds without a new batch the worker waits for before it starts: an agent's loop
#: stores and reads turn after turn, and on a GIL the worker's Python runs in the
#: agent's time; it goes to work when the loop pauses (a model call) ...
DEBOUNCE = 0.05
#: ... or this many seconds after work became due, whichever comes first (a loop that
#: never pauses still gets its memories, in batches).
MAX_LAG = 1.0
#: Compactions one step makes at most (each at the next point the trigger was passed:
#: a backlog is compacted as it would have been turn by turn).
COMPACTION_PASSES = 64
#: Newest memories per working-state section.
WORKING_PER_SECTION = 64
#: Event types whose arrival makes a session due (an audit record alone does not).
_DUE_TYPES = frozenset(
    {
        EventType.USER_MESSAGE,
        EventType.ASSISTANT_MESSAGE,
        EventType.TOOL_RESULT,
        EventType.TOOL_INVOCATION,
        EventType.SYSTEM_PROMPT,
        EventType.MEMORY,
        EventType.SUMMARY,
    }
)

#: (session id, what the compaction wrote, window, counter) -> the amnesia check's
#: rolled-back summary ids
Guard = Callable[[str, CompactionReport, int, TokenCounter], list[str]]


@dataclass
class _Ask:
    """What the reads of one session asked for: the window compaction measures against
    and the tokenizers the history is counted with."""

    window: int = 0
    counters: dict[str, TokenCounter] = field(default_factory=dict)


@dataclass
class _Job:
    """An explicit request for maintenance now (``compact``/``update``), and its answer."""

    session_id: str
    compact: int = 0  # window to compact against (0: none asked)
    force: bool = False
    counter: TokenCounter | None = None
    done: threading.Event = field(default_factory=threading.Event)
    report: CompactionReport | None = None
    written: list[str] = field(default_factory=list)
    error: BaseException | None = None


class Maintenance:
    """The worker and its published snapshots (see the module docstring)."""

    def __init__(
        self,
        views: Views,
        memory: MemoryWriter,
        compactor: Compactor,
        *,
        guard: Guard | None = None,
        gate: ReadGate | None = None,
    ) -> None:
        self.views = views
        self.memory = memory
        self.compactor = compactor
        self.guard = guard
        self._outage = Fallback("context maintenance")  # a store outage: one warning
        self._cond = threading.Condition()
        self._due: dict[str, None] = {}  # ordered set: oldest request first
        self._jobs: list[_Job] = []
        self._published: dict[str, Snapshot] = {}
        self._asks: dict[str, _Ask] = {}
        #: reads in flight, shared with the weave's other background workers
        self.gate = gate or ReadGate()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._busy: str | None = None  # the session a step is working on
        self._marked_at = 0.0  # when a batch last made a session due (monotonic)
        #: something was stored since the full-text index was last brought up to date
        #: (a read's own search catches up what other processes stored)
        self._text_due = True
        #: test hook: held while a step runs (a test holds it to keep a step open)
        self.step_lock = threading.Lock()
        compactor.pause = self._give_way

    # ------------------------------------------------------------ the read side
    def snapshot(self, session_id: str) -> Snapshot:
        """The newest published snapshot (an empty one before the first), at once."""
        snap = self._published.get(session_id)
        return snap if snap is not None else empty(session_id)

    def ask(self, session_id: str, window: int, counter: TokenCounter) -> None:
        """What a read needs next time: a window for compaction, a tokenizer's count.
        Marks the session due when it was never maintained or asked for more."""
        with self._cond:
            a = self._asks.setdefault(session_id, _Ask())
            new = window > a.window or counter.encoding_name not in a.counters
            a.window = max(a.window, window)
            a.counters.setdefault(counter.encoding_name, counter)
            if new or session_id not in self._published:
                self._mark(session_id)

    def reading(self) -> AbstractContextManager[None]:
        """Around a read: the worker waits between sub-steps while one runs."""
        return self.gate.reading()

    def behind(self, session_id: str, last_seq: int) -> bool:
        """Has maintenance not yet read up to ``last_seq`` (a stored seq) of the session?"""
        return self.snapshot(session_id).cursor < last_seq or session_id == self._busy

    # ----------------------------------------------------------- the write side
    def notify(self, events: Iterable[Event]) -> None:
        """A stored batch (the bus's listener, on its writer thread): quick, no reads."""
        batch = list(events)
        # words a search can find (an audit record's wait for the next such batch: see
        # ``search_text``)
        self._text_due = self._text_due or any(e.type in SEARCHED_TYPES for e in batch)
        sids = {e.session_id for e in batch if e.type in _DUE_TYPES}
        if sids:
            with self._cond:
                for sid in sids:
                    self._mark(sid)

    def run(
        self,
        session_id: str,
        *,
        compact: int = 0,
        force: bool = False,
        counter: TokenCounter | None = None,
        timeout: float | None = 120.0,
    ) -> _Job:
        """Maintain ``session_id`` now (and compact against ``compact`` tokens) and wait."""
        job = _Job(session_id, compact, force, counter)
        with self._cond:
            if self._closing:
                raise StoreClosed("the context engine is closed")
            self._jobs.append(job)
            self._start()
            self._cond.notify_all()
        if not job.done.wait(timeout):
            raise TimeoutError(f"maintenance of {session_id!r} did not finish in {timeout} s")
        if job.error is not None:
            raise job.error
        return job

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10.0)
        for job in self._jobs:
            job.error = StoreClosed("the context engine is closed")
            job.done.set()

    def forget(self) -> None:
        """Drop every snapshot (a change behind the engine: a purge); reads start over."""
        with self._cond:
            self._published.clear()
            for sid in list(self._asks):
                self._mark(sid)

    # ----------------------------------------------------------------- worker
    def _mark(self, session_id: str) -> None:
        """(``_cond`` held) the session is due; the worker starts on first use."""
        self._due[session_id] = None
        self._marked_at = time.monotonic()
        self._start()
        self._cond.notify_all()

    def _start(self) -> None:
        if self._thread is None and not self._closing:
            self._thread = threading.Thread(
                target=self._loop, name="beeweave-maintenance", daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._due and not self._closing:
                    self._cond.wait()
                self._quiet()
                if self._closing:
                    return
            try:
                self._sync_text()  # words are searchable as soon as they are stored
            except Exception:  # (a closed store: the loop ends at the next check)
                log.debug("beeweave: text index sync failed", exc_info=True)
            with self._cond:
                if self._closing or (not self._jobs and not self._due):
                    continue
                job = self._jobs.pop(0) if self._jobs else None
                sid = job.session_id if job is not None else next(iter(self._due))
                self._due.pop(sid, None)
                self._busy = sid
            try:
                more = self._maintain(sid, job)
            except StoreClosed:
                more = False
            except Exception as exc:  # one session's failure must not stop the others
                if job is not None:
                    job.error = exc
                if unavailable(exc):
                    self._outage.warn(exc)
                else:
                    log.exception("beeweave: maintenance of a session failed")
                more = False
            finally:
                with self._cond:
                    self._busy = None
                if job is not None:
                    job.done.set()
            if more:
                with self._cond:
                    self._due[sid] = None

    def _quiet(self) -> None:
        """(``_cond`` held) Wait for a pause in the batches (see ``DEBOUNCE``); an
        explicit job or closing goes at once."""
        until = time.monotonic() + MAX_LAG
        while not self._jobs and not self._closing:
            left = min(self._marked_at + DEBOUNCE, until) - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _maintain(self, sid: str, job: _Job | None) -> bool:
        """One step (a job runs steps until the session is caught up); True: more due."""
        while True:
            more = self._step(sid, job)
            if job is None or not more or self._closing:
                return more

    def _give_way(self) -> None:
        if not self._closing:
            self.gate.give_way()

    def _step(self, sid: str, job: _Job | None) -> bool:
        with self.step_lock:
            self._give_way()
            self._sync_text()
            view, _n = self.views.get(sid, limit=CHUNK)
            cursor = self.memory.cursor(sid)
            more = view.cursor < view.stored_to
            if cursor < view.last_turn:
                upto = min(cursor + CHUNK, view.last_turn)
                written = self.memory.process(sid, upto=upto, pause=self._between)
                self._text_due = self._text_due or bool(written)
                if job is not None:
                    job.written += written
                more = more or self.memory.cursor(sid) < view.last_turn
                self._give_way()
                view, _n = self.views.get(sid, limit=CHUNK)
                more = more or view.cursor < view.stored_to
            if not more:
                self._compact(sid, view, job)
                view, _n = self.views.get(sid)
            self._publish(sid, view)
            return more

    def _between(self) -> None:
        """Between two events of a step: reads first, and the words just stored."""
        self._give_way()
        self._sync_text()

    def _sync_text(self) -> None:
        """Keep the store's full-text index current (SQLite builds it off the write
        path, and without a vector indexer nothing else would before a read), in small
        batches that give way to reads."""
        if not self._text_due:
            return
        self._text_due = False  # (a batch stored from here on sets it again)
        self.views.store.sync_text_index(TEXT_BATCH, go_on=self._may_go_on)

    def _may_go_on(self) -> bool:
        self._give_way()
        return not self._closing

    def _compact(self, sid: str, view: SessionView, job: _Job | None) -> None:
        ask = self._asks.get(sid)
        window = job.compact if job is not None and job.compact else (ask.window if ask else 0)
        if not window:
            return
        counter = (
            job.counter if job is not None and job.counter is not None else _first_counter(ask)
        )
        force = job is not None and job.force
        for _pass in range(COMPACTION_PASSES):  # one trigger point per pass, then merges
            self._give_way()
            inputs = _inputs(view, self.compactor)
            refreshed = self.compactor.refresh_stale(sid, counter, inputs)
            if refreshed:
                view, _n = self.views.get(sid)
                inputs = _inputs(view, self.compactor)
            report = self.compactor.maybe_compact(
                sid, window_tokens=window, counter=counter, force=force, inputs=inputs
            )
            report.refreshed = refreshed
            if report.triggered and self.guard is not None:
                view, _n = self.views.get(sid)
                self._publish(sid, view)
                report.rolled_back += self.guard(sid, report, window, counter)
            if job is not None and (job.report is None or report.triggered):
                job.report = _merged(job.report, report)
            view, _n = self.views.get(sid)
            force = False
            if not report.triggered:
                return

    def _publish(self, sid: str, view: SessionView) -> None:
        ask = self._asks.get(sid)
        counters = list(ask.counters.values()) if ask else []
        old = self._published.get(sid)
        memories = tuple(view.memory.memories.values())
        working = build_working_state(
            sid,
            working_candidates(view.memory, WORKING_PER_SECTION),
            view.last_units(8),
            scan=view.scanned(),
            per_section=WORKING_PER_SECTION,
            overturned=view.memory.overturned(),
        )
        snap = Snapshot(
            session_id=sid,
            cursor=view.cursor,
            systems=tuple(view.systems),
            user_id=view.user_id,
            memories=memories,
            superseded=view.memory.replaced(),
            working=working,
            results=tuple(view.results),
            level=min(view.thrash, self.compactor.policy.max_level),
            history_tokens={c.encoding_name: view.history_tokens(c) for c in counters},
            compaction=view.compaction_stats(self.compactor.policy.max_level),
            version=(old.version if old else 0) + 1,
        )
        self._published[sid] = snap  # the swap: one dictionary store


def _first_counter(ask: _Ask | None) -> TokenCounter:
    if ask is not None and ask.counters:
        return next(iter(ask.counters.values()))
    return TokenCounter()


def _inputs(view: SessionView, compactor: Compactor) -> SessionInputs:
    """The compactor's inputs from the view (the view's overturn cursor moves)."""
    return SessionInputs(
        view.units(),
        list(view.summaries.values()),
        min(view.thrash, compactor.policy.max_level),
        view.memory.overturned(),
        view.touched_tops(),
        view.covered_to,
    )


def _merged(a: CompactionReport | None, b: CompactionReport) -> CompactionReport:
    """Two passes of one request as one report (the first pass's trigger figures)."""
    if a is None or not a.triggered:
        return b
    a.summaries += b.summaries
    a.merged += b.merged
    a.rolled_back += b.rolled_back
    a.refreshed += b.refreshed
    a.source_tokens += b.source_tokens
    a.summary_tokens += b.summary_tokens
    return a


__all__ = ["CHUNK", "Maintenance"]
