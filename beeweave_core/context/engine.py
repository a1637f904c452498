"""``ContextEngine``: what ``weave.context`` is — memory, compaction and assembly wired up.

Built on first use of ``weave.context`` / ``weave.assemble``.  The weave subscribes
its memory writer to the capture bus (rules only, so capture stays fast), and before every
assembly it catches up: memories from events not seen yet, summaries rebuilt where the
user overturned something they hold, compaction when the uncovered turns passed the
trigger.  Then it fills the layers and records the assembly as a ``retrieval`` event.
A long backlog (a long session never read by this process, an import) is caught up by a
background thread instead, while calls answer from the session's tail (``tail.py``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypedDict

from typing_extensions import Required

from beeweave_core.config import ContextConfig
from beeweave_core.context.assembler import (
    PRESETS,
    AssembledContext,
    Plan,
    assemble,
    infer_phase,
)
from beeweave_core.context.compactor import (
    CompactionReport,
    Compactor,
    SessionInputs,
    stats_row,
    units_after,
)
from beeweave_core.context.cross_session import OtherSessions
from beeweave_core.context.editing import EditCache, Editor, EditPolicy
from beeweave_core.context.memory import MemoryWriter
from beeweave_core.context.messages import Unit
from beeweave_core.context.recall import SUMMARY_LINES, Recallable, RecallInputs, gather
from beeweave_core.context.session_view import (
    SessionView,
    Snapshot,
    Views,
    WatchedStore,
    index_terms,
    snapshot,
)
from beeweave_core.context.summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
from beeweave_core.context.tail import Tail, read_tail, tail_view
from beeweave_core.context.working_state import Item, WorkingState, put_to_sleep
from beeweave_core.events import Event, EventType
from beeweave_core.governance.dormancy import (
    DAY,
    Affirmations,
    DormancyPolicy,
    dormant_ages,
    needs_confirmation_text,
)
from beeweave_core.governance.health import context_text, guard_compaction
from beeweave_core.store import EventStore
from beeweave_core.telemetry import traced
from beeweave_core.text import language as L
from beeweave_core.tokens import DEFAULT_MODEL, TokenCounter

if TYPE_CHECKING:
    from beeweave_core.retrieval import Hit

log = logging.getLogger("beeweave.context")

#: Immediate-layer factor per thrash level (the guard shrinks what stays verbatim).
THRASH_SHRINK = 0.7
#: Newest memories per working-state section offered to the working layer.
WORKING_PER_SECTION = 64
#: Newest memories offered to recall besides those sharing a word with the query.
RECALL_RECENT = 64
#: Uncompacted units beyond which a call hands compaction to a background thread.
BACKGROUND_UNITS = 400
#: Unread events beyond which a call hands the memory catch-up to a background thread.
BACKGROUND_EVENTS = 2_000
#: Events the background catch-up reads per step.
MEMORY_CHUNK = 500
#: Seconds a deferred catch-up waits at most for the call that started it to answer.
DEFER_AT_MOST = 5.0


class AssembleOptions(TypedDict, total=False):
    """Keyword arguments of :meth:`ContextEngine.assemble` (for ``Weave.assemble``)."""

    budget_tokens: Required[int]
    model: str | None
    phase: str | None
    user_id: str | None
    counter: TokenCounter | None
    window_tokens: int | None
    compact: bool
    record: bool
    include_query: bool
    single_system: bool
    flush: bool
    use_retriever: bool | None
    dry_run: bool
    lineage: Collection[str] | None
    agent_id: str | None


#: ``Weave.emit``'s shape: records one event, returns its id.
Emit = Callable[..., str]
#: ``Weave.retrieve``'s shape: the hits for a query.
Retrieve = Callable[..., "list[Hit]"]


class ContextEngine:
    """Assembly, compaction and long-term memory over one event store.

    ``store`` is read and written (a weave passes its ``writer``, so what the engine
    writes is indexed at once).  The rest is optional, so an engine also runs over a
    bare store: ``emit`` records each assembly as a ``retrieval`` event, ``retrieve``
    adds fused cross-session recall, ``flush`` makes captured events readable first.
    The weave also feeds :meth:`on_batch` every stored batch, so memory keeps up
    while capture runs.
    """

    def __init__(
        self,
        store: EventStore,
        config: ContextConfig | None = None,
        *,
        emit: Emit | None = None,
        retrieve: Retrieve | None = None,
        flush: Callable[[float], bool] | None = None,
    ) -> None:
        cfg = config or ContextConfig()
        summarizer = cfg.summarizer or (
            LLMSummarizer(cfg.llm) if cfg.llm is not None else ExtractiveSummarizer()
        )
        self.config = cfg
        #: the engine's session views; its writers' status changes reach them directly
        self.views = Views(store)
        self.store = WatchedStore(store, self.views)
        self.edits = EditCache()
        self._catching_up: set[str] = set()  # guarded by _bg_lock (never held long)
        self._bg_lock = threading.Lock()
        self._answered: dict[str, threading.Event] = {}  # catch-ups waiting for a call
        self._closing = threading.Event()  # background catch-ups stop between chunks
        self._emit = emit
        self._retrieve = retrieve
        self._flush_fn = flush
        self.edit_policy = cfg.edit_policy or EditPolicy()
        self.presets = {**PRESETS, **cfg.presets}
        self.memory = MemoryWriter(self.store, llm=cfg.memory_llm, policy=self.edit_policy,
                                   outside_changes=self.views.outside_changes)  # fmt: skip
        self.compactor = Compactor(
            self.store, summarizer, policy=cfg.policy,
            edit_policy=self.edit_policy, overturned=self.memory.overturned_index,
        )  # fmt: skip
        self._counters: dict[str, TokenCounter] = {}
        #: When long-term memories turn dormant (replace it to change the age or clock).
        self.dormancy = DormancyPolicy()
        self.affirmations = Affirmations(self.store)
        #: the user's other recent sessions, as recall reads them
        self.others = OtherSessions(self.store, self.views, self.memory, self._dormant)
        #: Check early facts right after each compaction, rolling back what lost them.
        self.amnesia_guard = True

    def close(self) -> None:
        """Stop background catch-ups at their next chunk (the weave closes its store)."""
        self._closing.set()
        with self._bg_lock:
            waiting = list(self._answered.values())
        for answered in waiting:
            answered.set()

    def on_batch(self, events: list[Event]) -> None:
        """A stored batch: extract the memories its rules find (quick, no model)."""
        self.memory.on_batch(events)

    @property
    def summarizer(self) -> Summarizer:
        return self.compactor.summarizer

    def counter(
        self, model: str | None = DEFAULT_MODEL, counter: TokenCounter | None = None
    ) -> TokenCounter:
        if counter is not None:
            return counter
        key = model or DEFAULT_MODEL
        if key not in self._counters:
            self._counters[key] = TokenCounter(key)
        return self._counters[key]

    # ------------------------------------------------------------ upkeep
    def _flush(self) -> None:
        if self._flush_fn is not None:
            self._flush_fn(10.0)

    def update(self, session_id: str) -> list[str]:
        """Catch up long-term memory for ``session_id``; returns new memory ids."""
        return self.memory.process(session_id)

    @traced("compact", session_pos=1)
    def compact(
        self,
        session_id: str,
        *,
        window_tokens: int,
        model: str | None = DEFAULT_MODEL,
        counter: TokenCounter | None = None,
        force: bool = False,
        flush: bool = True,
        guard: bool = True,
    ) -> CompactionReport:
        """Bring memory up to date and compact ``session_id`` if it passed the trigger
        (``guard``: run the amnesia check on what it wrote)."""
        if flush:
            self._flush()
        c = self.counter(model, counter)
        self.memory.process(session_id)
        inputs = self._compactor_inputs(session_id, touched=True)
        refreshed = self.compactor.refresh_stale(session_id, c, inputs)
        if refreshed:
            inputs = self._compactor_inputs(session_id)
        report = self.compactor.maybe_compact(
            session_id, window_tokens=window_tokens, counter=c, force=force, inputs=inputs
        )
        report.refreshed = refreshed
        if report.triggered and self.amnesia_guard and guard:
            self._guard(session_id, report, window_tokens, c)
        return report

    def _guard(
        self, session_id: str, report: CompactionReport, window: int, c: TokenCounter
    ) -> None:
        """The amnesia check right after a compaction; what it rolls back is reported."""
        written = [i for i in (*report.summaries, *report.merged) if i not in report.rolled_back]

        def text(hidden: Collection[str]) -> str:
            with self.views.hiding(list(hidden)):  # this session's facts: no index wait
                ctx = self.assemble(session_id, budget_tokens=window, counter=c, dry_run=True,
                                    flush=False, use_retriever=False)  # fmt: skip
            return context_text(ctx)

        with self.views.lock:
            memories = list(self.views.get(session_id)[0].memories.values())
        rolled, _after = guard_compaction(
            self.store, session_id, written, text, self._dormant, memories
        )
        report.rolled_back += rolled

    async def acompact(self, session_id: str, **kw: Any) -> CompactionReport:
        return await asyncio.to_thread(self.compact, session_id, **kw)

    def _compactor_inputs(self, session_id: str, *, touched: bool = False) -> SessionInputs:
        """The compactor's inputs from the view; with ``touched``, the top summaries
        holding a turn overturned since the last such call (the view's cursor moves)."""
        with self.views.lock:
            view, _n = self.views.get(session_id)
            return SessionInputs(view.units(), list(view.summaries.values()),
                                 min(view.thrash, self.compactor.policy.max_level),
                                 view.overturned(),
                                 view.touched_tops() if touched else [],
                                 view.covered_to)  # fmt: skip

    def working_state(self, session_id: str) -> WorkingState:
        self.memory.process(session_id)
        return self._snapshot(session_id, None).working

    def memories(self, session_id: str, *, include_inactive: bool = False) -> list[Any]:
        """The session's memory events (active ones unless ``include_inactive``)."""
        self.memory.process(session_id)
        return self.store.timeline(session_id, types=(EventType.MEMORY,),
                                   include_inactive=include_inactive)  # fmt: skip

    def _upkeep(
        self, session_id: str, c: TokenCounter, compact: bool, window: int
    ) -> CompactionReport | None:
        """Memories from new events, then compaction when due: what an assembly writes.

        A long backlog (a session imported or written without the engine: memories
        far behind, or many uncompacted turns) is caught up once by a background
        thread, in chunks; calls meanwhile answer from the session's tail (see
        :meth:`_prepare`), so no caller waits for the catch-up."""
        if self.catching_up(session_id):
            return None
        with self.views.lock:
            view = self.views.get(session_id)[0]
            last, turn = view.cursor, view.last_turn
        # (the backlog in turns: the memories written since are no backlog)
        behind = turn - self.memory.cursor(session_id) > BACKGROUND_EVENTS
        if behind and self._hand_over(session_id, c, window if compact else 0, last):
            return None
        self.memory.process(session_id)
        if not compact:
            return None
        inputs = self._compactor_inputs(session_id)
        piled = len(inputs.units) - _covered_units(inputs) > BACKGROUND_UNITS
        if piled and self._hand_over(session_id, c, window, last):
            return None
        try:
            return self.compact(session_id, window_tokens=window, counter=c, flush=False)
        except Exception:  # a failing summarizer must not cost the agent its context
            log.exception("beeweave: compaction failed; assembling without it")
            return None

    def _hand_over(self, session_id: str, c: TokenCounter, window: int, last: int) -> bool:
        """A long backlog: to the background thread (True), or, when the config says
        callers wait for a complete answer, caught up here and now (False)."""
        if self.config.catch_up_in_background:  # (once this call has answered)
            self._catch_up_in_background(session_id, c, window, last, defer=True)
            return True
        self._catch_up(session_id, c, window, last)
        return False

    def _catch_up_in_background(
        self, session_id: str, c: TokenCounter, window: int, last: int, *, defer: bool = False
    ) -> None:
        """The view (read in chunks, see :meth:`Views.build`), memories in chunks of
        :data:`MEMORY_CHUNK` events (the writer's lock is let go between chunks), then
        compaction passes until none triggers (``window`` 0: no compaction).  With
        ``defer`` it starts once the calling assembly has answered (:meth:`_answered_now`;
        the thread would slow it down), or after :data:`DEFER_AT_MOST` seconds."""
        answered = threading.Event()
        with self._bg_lock:
            if session_id in self._catching_up:
                return
            self._catching_up.add(session_id)
            if defer:
                self._answered[session_id] = answered
            else:
                answered.set()

        def run() -> None:
            try:
                answered.wait(DEFER_AT_MOST)
                self.views.build(session_id, last, stop=self._closing.is_set)
                self._catch_up(session_id, c, window, last)
            except Exception:
                if not self._closing.is_set():  # (a closed store: expected)
                    log.exception("beeweave: background catch-up failed")
            finally:
                with self._bg_lock:
                    self._catching_up.discard(session_id)
                    self._answered.pop(session_id, None)

        threading.Thread(target=run, name=f"beeweave-catch-up-{session_id}", daemon=True).start()

    def _catch_up(self, session_id: str, c: TokenCounter, window: int, last: int) -> None:
        """The catch-up itself (in the background, or in the call when the config says
        callers wait); the amnesia check runs once, at the end, on every summary the
        passes wrote (not once per pass over the whole session)."""
        cursor = self.memory.cursor(session_id)
        while cursor < last and not self._closing.is_set():
            self.memory.process(session_id, upto=min(cursor + MEMORY_CHUNK, last))
            cursor = self.memory.cursor(session_id)
        self.memory.warm(session_id)  # (a reopened session: nothing new, nothing read yet)
        self._warm_affirmations(session_id)
        done = CompactionReport(session_id)
        # one pass compacts down to the keep size; repeat past merges
        while window and not self._closing.is_set():
            report = self.compact(session_id, window_tokens=window, counter=c, flush=False,
                                  guard=False)  # fmt: skip
            if not report.triggered:
                break
            done.summaries += report.summaries
            done.merged += report.merged
            done.rolled_back += report.rolled_back
        if self._closing.is_set():
            return
        if window:
            self.compactor.warm(session_id, self._compactor_inputs(session_id))
        with self.views.lock:  # what later passes replaced is not the check's business
            view = self.views.get(session_id)[0]
            done.summaries = [i for i in done.summaries if view.is_active(i)]
            done.merged = [i for i in done.merged if view.is_active(i)]
        if (done.summaries or done.merged) and self.amnesia_guard:
            self._guard(session_id, done, window, c)

    def _warm_affirmations(self, session_id: str) -> None:
        """Ask now which old memories are dormant (the answers stay in
        :attr:`affirmations`), not in the next call, which asks it of every memory old
        enough to be dormant."""
        cutoff = self.dormancy.clock() - self.dormancy.after_days * DAY
        with self.views.lock:
            old = self.views.get(session_id)[0].memories_before(cutoff)
        self._dormant(old)

    def catching_up(self, session_id: str) -> bool:
        """True while a background catch-up of ``session_id`` is running (calls then
        answer from the session's newest turns, see :mod:`.tail`)."""
        with self._bg_lock:
            return session_id in self._catching_up

    def _prepare(
        self, session_id: str, c: TokenCounter, compact: bool, window: int, budget: int,
        dry_run: bool,
    ) -> tuple[SessionView | None, CompactionReport | None]:  # fmt: skip
        """What an assembly writes first (memories, compaction); or, while the session
        catches up in the background, the view of its tail to answer from (a dry run
        writes nothing and reads the whole view)."""
        if dry_run:
            return None, None
        tail = self._tail(session_id, c, compact, window, budget)
        if tail is None:
            report = self._upkeep(session_id, c, compact, window)
            if not self.catching_up(session_id):
                return None, report
            tail = read_tail(self.store, session_id, budget, c)  # the upkeep handed it over
        return tail_view(self.store, tail), None

    def _tail(
        self, session_id: str, c: TokenCounter, compact: bool, window: int, budget: int
    ) -> Tail | None:
        """The session's tail while it catches up in the background.  A first call on
        a long session the engine has no view of starts that catch-up (unless the config
        says callers wait): reading the whole session first would make it wait."""
        if not self.config.catch_up_in_background:
            return None
        if self.catching_up(session_id):
            return read_tail(self.store, session_id, budget, c)
        if self.views.has(session_id):
            return None
        tail = read_tail(self.store, session_id, budget, c)
        if tail.complete or tail.first_seq <= BACKGROUND_EVENTS:
            return None  # short enough to read now
        self._catch_up_in_background(session_id, c, window if compact else 0, tail.last_seq,
                                     defer=True)  # fmt: skip
        return tail

    def _answered_now(self, session_id: str) -> None:
        """The call that started a deferred catch-up has its answer: the catch-up starts."""
        with self._bg_lock:
            answered = self._answered.pop(session_id, None)
        if answered is not None:
            answered.set()

    # ------------------------------------------------------------ assembly
    @traced("assemble", session_pos=1)
    def assemble(
        self,
        session_id: str,
        query: str | None = None,
        *,
        budget_tokens: int,
        model: str | None = DEFAULT_MODEL,
        phase: str | None = None,
        user_id: str | None = None,
        counter: TokenCounter | None = None,
        window_tokens: int | None = None,
        compact: bool = True,
        record: bool = True,
        include_query: bool = False,
        single_system: bool = False,
        flush: bool = True,
        use_retriever: bool | None = None,
        dry_run: bool = False,
        lineage: Collection[str] | None = None,
        agent_id: str | None = None,
    ) -> AssembledContext:
        """The layered context for the next model call of ``session_id``.

        ``budget_tokens`` bounds all layers together, counted with ``model``'s
        tokenizer (or ``counter``).  ``query`` steers recall (default: the latest user
        message); it is appended as a user message only with ``include_query``.
        ``phase`` picks the layer split (requirement / execution / closing; inferred
        when ``None``).  ``window_tokens`` is what compaction measures against
        (default: the budget).  ``single_system`` merges the system layers into one
        message for models that accept only one.  ``dry_run`` inspects: nothing is
        written (no memories, no compaction, no audit record).  ``lineage`` is the ids
        of the conversation events on the branch being resumed (a LangGraph
        checkpoint's messages): turns of other branches, and what was derived only
        from them, are left out.  ``agent_id``: that agent's turns and the user's only,
        never another agent's turns or tool results (tool-written memories are shared)."""
        _check_budget(budget_tokens)
        if phase is not None and phase not in self.presets:
            raise ValueError(f"unknown phase {phase!r}; known: {', '.join(self.presets)}")
        c = self.counter(model, counter)
        if flush:
            self._flush()
        window = window_tokens or budget_tokens
        tail, report = self._prepare(session_id, c, compact, window, budget_tokens, dry_run)
        snap = self._asleep(self._snapshot(session_id, lineage, agent_id, tail), query)
        uid = user_id or snap.user_id
        plan = self._plan(snap, query, budget_tokens, c, phase, include_query, single_system,
                          self._recall(snap, query, uid, use_retriever, not dry_run))  # fmt: skip
        messages, layers, overhead = assemble(plan)
        ctx = AssembledContext(
            session_id=session_id, query=query, messages=messages, layers=layers,
            total_tokens=c.count_messages(messages), budget_tokens=budget_tokens, model=model,
            encoding=c.encoding_name, phase=plan.phase, working_state=snap.working,
            full_history_tokens=snap.history_tokens(c), overhead_tokens=overhead,
            compaction=_report_dict(report, self._stats(snap))
            if compact and not dry_run else None, catching_up=tail is not None,
        )  # fmt: skip
        if record and not dry_run and (snap.units or snap.systems):
            ctx.retrieval_event_id = self._record(ctx, uid)
        self._answered_now(session_id)
        return ctx

    async def aassemble(
        self, session_id: str, query: str | None = None, **kw: Any
    ) -> AssembledContext:
        """Async twin of :meth:`assemble` (runs in a worker thread)."""
        return await asyncio.to_thread(self.assemble, session_id, query, **kw)

    def _stats(self, snap: Snapshot) -> dict[str, Any]:
        """Compaction stats of the session, from the counts its view keeps."""
        with self._lock_for(snap):
            return stats_row(snap.view.tally, len(snap.view.rolled), snap.level)

    def _lock_for(self, snap: Snapshot) -> AbstractContextManager[object]:
        """The views' lock, for a snapshot of a shared view (a tail's is the call's own:
        no wait on a background catch-up holding the lock)."""
        return nullcontext() if snap.private else self.views.lock

    def _snapshot(
        self,
        session_id: str,
        lineage: Collection[str] | None,
        agent_id: str | None = None,
        tail: SessionView | None = None,
    ) -> Snapshot:
        """The session as this call reads it: from the view (or the ``tail`` view), cut
        to the branch (and to one agent's part of it)."""
        with nullcontext() if tail is not None else self.views.lock:
            view = tail if tail is not None else self.views.get(session_id)[0]
            snap = snapshot(view, lineage, working_items=WORKING_PER_SECTION,
                            recent_memories=RECALL_RECENT, agent_id=agent_id)  # fmt: skip
        return replace(snap, private=tail is not None)

    def _asleep(self, snap: Snapshot, query: str | None) -> Snapshot:
        """Dormant memories leave the working state and recall; those the query matches
        are listed as needing confirmation, with their age (governance/dormancy.py)."""
        cutoff = self.dormancy.clock() - self.dormancy.after_days * DAY
        with self._lock_for(snap):
            memories = snap.view.memories_before(cutoff)
            terms = index_terms(query or _last_user_text(snap.units))
            matching = snap.view.memories_matching(terms)
        ages = dormant_ages(self.store, memories, self.dormancy, self.affirmations.last)
        if not ages:
            return snap
        by_id = {m.id: m for m in memories}
        asked = [
            Item("needs_confirmation", needs_confirmation_text(by_id[i], ages[i]), (i,),
                 int(by_id[i].payload.get("source_seq", by_id[i].seq)))
            for i in matching if i in ages
        ]  # fmt: skip
        working = put_to_sleep(snap.working, ages.keys(), asked)
        return replace(snap, asleep=frozenset(ages), working=working)

    def _plan(
        self, snap: Snapshot, query: str | None, budget: int, c: TokenCounter,
        phase: str | None, include_query: bool, single_system: bool,
        recall: Callable[[int, Sequence[Item]], list[Recallable]],
    ) -> Plan:  # fmt: skip
        """Edit the newest turns, pick the phase and the layer shares."""
        editor = Editor(self.edit_policy, snap.overturned, self.store.get_artifact)
        qmsg = {"role": "user", "content": query} if include_query and query else None
        sys_cost = c.count_messages([{"role": "system", "content": e.content}
                                     for e in snap.systems], prime_reply=False)  # fmt: skip
        room = budget - sys_cost - (c.count_message(qmsg) if qmsg else 0)
        units, edited_out, whole = self.edits.newest(editor, snap.units, c, room)
        whole = whole and snap.history_tokens(c) <= budget  # a plain buffer would fit too
        first = snap.units[0].seq_from if snap.units else 1 << 62
        # turns a summary stands for that are gone (archived by retention): not whole
        whole = whole and all(int(s.payload.get("seq_from", first)) >= first
                              for s in snap.top_summaries)  # fmt: skip
        phase = phase or infer_phase(snap.units)
        shares = self.presets[phase]
        if snap.level:
            shares = shares.shrink_immediate(THRASH_SHRINK**snap.level)
        return Plan(
            session_id=snap.session_id, query=query, budget=budget, counter=c, phase=phase,
            shares=shares, systems=[e.content for e in snap.systems],
            system_ids=[e.id for e in snap.systems], units=units, edited_out=edited_out,
            working=snap.working, recall=recall, query_message=qmsg,
            single_system=single_system, whole_history=whole,
        )  # fmt: skip

    def _recall(
        self, snap: Snapshot, query: str | None, uid: str | None, use_retriever: bool | None,
        write: bool,
    ) -> Callable[[int, Sequence[Item]], list[Recallable]]:  # fmt: skip
        """The recalled layer's candidates, given the immediate window and working items
        (``write``: other sessions' memories are caught up first; not from a tail's call,
        which must not wait on the memory writer a background catch-up holds)."""
        write = write and not snap.private
        editor = Editor(self.edit_policy, snap.overturned, self.store.get_artifact)
        recall_query = query or _last_user_text(snap.units)
        memories = snap.recall_memories(recall_query)

        def recall(window_from: int, in_working: Sequence[Item]) -> list[Recallable]:
            return gather(RecallInputs(
                session_id=snap.session_id, query=recall_query, user_id=uid, memories=memories,
                exclude={i for it in in_working for i in it.event_ids},
                exclude_texts={L.fold(it.text) for it in in_working},
                top_summaries=snap.top_summaries, rolled_back=snap.rolled_back,
                uncovered=snap.uncovered, span=snap.last_seq, window_from=window_from,
                editor=editor, now=time.time(),
                other_sessions=lambda terms: self.others.read(snap.session_id, uid, terms, write),
                retrieve=self._retriever(snap.session_id, uid, use_retriever),
                older_lines=self._lines_matching(snap),
            ))  # fmt: skip

        return recall

    def _lines_matching(
        self, snap: Snapshot
    ) -> Callable[[frozenset[str], set[str]], list[tuple[Event, int]]] | None:
        """The view's summary-line index, for a snapshot of the whole session."""
        if snap.whole is None:
            return None

        def find(terms: frozenset[str], among: set[str]) -> list[tuple[Event, int]]:
            with self._lock_for(snap):
                return snap.view.lines_matching(terms, among, SUMMARY_LINES)

        return find

    # ------------------------------------------------------------ helpers
    def _dormant(self, memories: Sequence[Event]) -> Collection[str]:
        return dormant_ages(self.store, memories, self.dormancy, self.affirmations.last).keys()

    def _retriever(self, session_id: str, user_id: str | None, use: bool | None) -> Any:
        """The fused retriever for cross-session recall, when it exists and is useful."""
        if use is False or not user_id:
            return None
        retrieve = self._retrieve
        if retrieve is None:
            return None
        # the user's session ids come from an index; stats would count their tokens
        if use is None and len(self.store.recent_user_sessions(user_id, 2)) < 2:
            return None  # nothing beyond this session to search

        def run(query: str) -> list[Any]:
            try:
                return list(retrieve(query, user_id=user_id, k=20, scope="user",
                                     filters={"types": ["memory", "summary"]}))  # fmt: skip
            except ImportError:
                return []  # retrieval not installed: the store path still works
            except Exception:
                log.exception("beeweave: retriever failed; using the store path only")
                return []

        return run

    def _record(self, ctx: AssembledContext, user_id: str | None) -> str | None:
        emit = self._emit
        if emit is None:
            return None
        payload = {
            "budget_tokens": ctx.budget_tokens,
            "total_tokens": ctx.total_tokens,
            "model": ctx.model,
            "encoding": ctx.encoding,
            "phase": ctx.phase,
            "tokens_by_layer": ctx.tokens_by_layer,
            "budget_by_layer": {name: rep.budget for name, rep in ctx.layers.items()},
            "full_history_tokens": ctx.full_history_tokens,
            "included": [p.to_dict() for p in ctx.provenance[:300]],
            "left_out": [p.to_dict() for p in ctx.left_out[:300]],
            "compaction": ctx.compaction,
        }
        meta = {"user_id": user_id} if user_id else {}
        return emit(EventType.RETRIEVAL, ctx.query or "", session_id=ctx.session_id, role="system",
                    payload=payload, meta=meta, source={"framework": "beeweave", "component": "assembler"})  # fmt: skip


def _last_user_text(units: Sequence[Unit]) -> str:
    for u in reversed(units):
        if u.kind == "user":
            return u.events[0].content
    return ""


def _check_budget(budget_tokens: Any) -> None:
    if not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be a positive int, got {budget_tokens!r}")


def _covered_units(inputs: SessionInputs) -> int:
    """How many units lie at or before the last seq a segment summary handled."""
    covered = inputs.covered_to
    if covered is None:
        covered = max((int(s.payload.get("seq_to", -1)) for s in inputs.summaries
                       if s.payload.get("level", 0) == 0), default=-1)  # fmt: skip
    return len(inputs.units) - len(units_after(inputs.units, covered))


def _report_dict(report: CompactionReport | None, stats: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"stats": stats}
    if report is not None:
        out.update(
            triggered=report.triggered, reason=report.reason, tail_tokens=report.tail_tokens,
            threshold=report.threshold, level=report.level, thrash=report.thrash,
            summaries=report.summaries, rolled_back=report.rolled_back, merged=report.merged,
            refreshed=report.refreshed, ratio=report.ratio,
        )  # fmt: skip
    return out
