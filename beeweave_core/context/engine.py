"""``ContextEngine``: what ``weave.context`` is — maintenance behind, a pure read in front.

Built on first use of ``weave.context`` / ``weave.assemble``.  The weave subscribes the
engine to the capture bus; each stored batch marks its sessions due for maintenance
(:mod:`.maintenance`: memories, supersession, compaction and its amnesia check, in a
background worker that publishes snapshots).  ``assemble`` reads: the session's newest
turns from the store (bounded by the budget), the latest published snapshot, and what
the retriever finds for the request; it writes nothing but its audit record, which goes
through the bus.  It never runs extraction or compaction and never waits for them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from beeweave_core.config import ContextConfig
from beeweave_core.context.assembler import (
    PRESETS,
    AssembledContext,
    Candidate,
    Plan,
    RecallInputs,
    assemble,
    day_of,
    infer_phase,
    lines_for,
    unit_cost,
)
from beeweave_core.context.code_links import with_code_links
from beeweave_core.context.compactor import CompactionReport, Compactor
from beeweave_core.context.editing import EditPolicy, tool_digest
from beeweave_core.context.maintenance import Maintenance
from beeweave_core.context.messages import Unit, UnitsMemo
from beeweave_core.context.request import AssembleRequest
from beeweave_core.context.session_view import RESULTS_KEPT, Views
from beeweave_core.context.snapshot import Snapshot, index_terms
from beeweave_core.context.summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
from beeweave_core.context.tail import EarlySystems, Tail, event_tokens, read_tail
from beeweave_core.context.working_state import Item, WorkingState, put_to_sleep
from beeweave_core.errors import StoreClosed
from beeweave_core.events import Event, EventType
from beeweave_core.governance.health import context_text, guard_compaction
from beeweave_core.memory.dormancy import (
    DAY,
    Affirmations,
    DormancyPolicy,
    dormant_ages,
    needs_confirmation_text,
)
from beeweave_core.memory.writer import MemoryWriter
from beeweave_core.payloads import CanonicalList
from beeweave_core.read_gate import ReadGate
from beeweave_core.store import EventStore
from beeweave_core.store_writer import StoreWriter
from beeweave_core.telemetry import traced
from beeweave_core.tokens import DEFAULT_MODEL, TokenCounter

if TYPE_CHECKING:
    from beeweave_core.retrieval import Hit

log = logging.getLogger("beeweave.context")

#: Immediate-floor factor per thrash level (the guard shrinks what stays verbatim).
THRASH_SHRINK = 0.7
#: Pieces an audit record lists of what went in and what was left out (each).
AUDIT_PIECES = 150
#: Hits a read asks the retriever for (the candidates of the recalled layer), and how
#: many each path fetches first (memories collapse onto the turns they came from).
RECALL_K = 60
RECALL_CANDIDATES = 120
#: What was said and done (the evidence recall ranks first), and the notes made of it
#: (memories, summaries: recalled on their own only when their turns are gone, or a
#: memory tool wrote them).
_SAID = [
    t.value
    for t in (
        EventType.USER_MESSAGE,
        EventType.ASSISTANT_MESSAGE,
        EventType.TOOL_RESULT,
        EventType.ERROR,
    )
]
_NOTES = [EventType.MEMORY.value, EventType.SUMMARY.value]
_RECALLED = [*_SAID, *_NOTES]
NOTES_K = 8
#: The retriever's paths recall uses: not ``recent``, nor ``metadata`` (which, with
#: only a type filter, is the newest events of each session in scope: the newest
#: turns are shown verbatim already, and ranking them would take recall's places).
RECALL_PATHS = ("semantic", "lexical", "temporal", "graph")
#: Event types recall never shows (pinned already, bookkeeping, or echoes of recall).
_NOT_RECALLED = frozenset(
    {
        EventType.SYSTEM_PROMPT,
        EventType.RETRIEVAL,
        EventType.MODEL_CALL,
        EventType.CHECKPOINT,
        EventType.WARNING,
        EventType.INTERNAL_THOUGHT,
    }
)
#: Conversation events a branch (a LangGraph checkpoint's lineage) names.
_BRANCHED = frozenset({EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_RESULT})

#: ``Weave.emit``'s shape: records one event, returns its id.
Emit = Callable[..., "str | None"]
#: ``Weave.retrieve``'s shape: the hits for a query.
Retrieve = Callable[..., "list[Hit]"]


class ContextEngine:
    """Assembly over one event store, with its maintenance (see the module docstring).

    ``store`` is read and written: a weave passes the :class:`StoreWriter` of its store,
    so what maintenance writes is redacted, scoped and indexed at once, and memory tools'
    status changes reach the engine's views; a plain store gets a writer of its own.  The
    engine reads :attr:`store` (the writer's store) and writes through :attr:`writer`,
    to which its session views are subscribed until :meth:`close`.  ``emit`` records each
    assembly as a ``retrieval`` event (through the capture bus); ``retrieve`` is the fused
    retriever (a weave passes its own; without one the engine builds one over ``store``);
    ``flush`` makes captured events readable first.
    """

    def __init__(
        self,
        store: EventStore | StoreWriter,
        config: ContextConfig | None = None,
        *,
        emit: Emit | None = None,
        retrieve: Retrieve | None = None,
        flush: Callable[[float], bool] | None = None,
        gate: ReadGate | None = None,
    ) -> None:
        cfg = config or ContextConfig()
        summarizer = cfg.summarizer or (
            LLMSummarizer(cfg.llm) if cfg.llm is not None else ExtractiveSummarizer()
        )
        self.config = cfg
        #: BeeWeave's own writes (memories, summaries, rollbacks) go through it.
        self.writer = store if isinstance(store, StoreWriter) else StoreWriter(store)
        #: What the engine reads.
        self.store = self.writer.store
        self.views = Views(self.store)
        self.writer.subscribe(self.views)
        self._emit = emit
        self._retrieve = retrieve
        self._flush_fn = flush
        self.edit_policy = cfg.edit_policy or EditPolicy()
        self._units_memo = UnitsMemo()
        self._early_systems = EarlySystems()
        self.presets = {**PRESETS, **cfg.presets}
        self.memory = MemoryWriter(
            self.writer,
            llm=cfg.memory_llm,
            digest=self._digest,
            outside_changes=self.views.outside_changes,
        )
        self.compactor = Compactor(
            self.writer,
            summarizer,
            policy=cfg.policy,
            edit_policy=self.edit_policy,
            overturned=self.memory.overturned_index,
        )
        self._counters: dict[str, TokenCounter] = {}
        #: When long-term memories turn dormant (replace it to change the age or clock).
        self.dormancy = DormancyPolicy()
        self.affirmations = Affirmations(self.store)
        #: Check early facts right after each compaction, rolling back what lost them.
        self.amnesia_guard = True
        self.maintenance = Maintenance(
            self.views, self.memory, self.compactor, guard=self._guard, gate=gate
        )

    def _digest(self, result: Event, invocation: Event | None) -> str:
        return tool_digest(result, invocation, self.edit_policy, self.store.get_artifact)

    def close(self) -> None:
        """Stop maintenance, then leave the writer (the weave closes its store after)."""
        self.maintenance.close()
        self.writer.unsubscribe(self.views)

    def on_batch(self, events: list[Event]) -> None:
        """A stored batch: its sessions are due for maintenance (quick: no reads)."""
        self.maintenance.notify(events)

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

    def _flush(self) -> None:
        if self._flush_fn is not None:
            self._flush_fn(10.0)

    # ---------------------------------------------------------- maintenance
    def update(self, session_id: str) -> list[str]:
        """Catch up long-term memory for ``session_id`` now; returns new memory ids."""
        self._flush()
        return self.maintenance.run(session_id).written

    def settle(self, session_ids: Sequence[str]) -> None:
        """Wait until maintenance has read what is stored of these sessions (a purge or
        a soft delete of a session comes after it, not in the middle of a step)."""
        for sid in dict.fromkeys(session_ids):
            try:
                self.maintenance.run(sid)
            except StoreClosed:
                return

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
    ) -> CompactionReport:
        """Bring ``session_id`` up to date now and compact it if it passed the trigger
        of ``window_tokens`` (``force``: compact what is old enough anyway)."""
        if not isinstance(window_tokens, int) or window_tokens <= 0:
            raise ValueError(f"window_tokens must be a positive int, got {window_tokens!r}")
        if flush:
            self._flush()
        c = self.counter(model, counter)
        job = self.maintenance.run(session_id, compact=window_tokens, force=force, counter=c)
        return job.report or CompactionReport(session_id, reason="below trigger")

    async def acompact(self, session_id: str, **kw: Any) -> CompactionReport:
        return await asyncio.to_thread(self.compact, session_id, **kw)

    def memories(self, session_id: str, *, include_inactive: bool = False) -> list[Event]:
        """The session's memory events (active ones unless ``include_inactive``)."""
        self.update(session_id)
        return self.store.timeline(
            session_id, types=(EventType.MEMORY,), include_inactive=include_inactive
        )

    def working_state(self, session_id: str) -> WorkingState:
        """The session's working state once maintenance has read everything stored."""
        self.update(session_id)
        snap = self.maintenance.snapshot(session_id)
        return snap.working or WorkingState(session_id)

    def catching_up(self, session_id: str) -> bool:
        """True while maintenance has not yet read everything stored in ``session_id``."""
        newest = self.store.timeline(session_id, last=1, types=_BRANCHED)
        return bool(newest) and self.maintenance.behind(session_id, newest[-1].seq)

    def _guard(self, sid: str, report: CompactionReport, window: int, c: TokenCounter) -> list[str]:
        """The amnesia check right after a compaction: the early facts sampled are asked
        for one by one; a summary is rolled back when the answers miss a fact that they
        carry without it (see ``governance/health.py``)."""
        if not self.amnesia_guard:
            return []
        written = [i for i in (*report.summaries, *report.merged) if i not in report.rolled_back]
        snap = self.maintenance.snapshot(sid)
        memories = list(snap.memories)

        def text(hidden: Collection[str], facts: Sequence[Event]) -> str:
            req = AssembleRequest(sid, window, counter=c, record=False, flush=False)
            out = []
            for m in facts:
                ctx = self._read(replace(req, query=m.content), c, hidden=frozenset(hidden))
                out.append(context_text(ctx))
            return "\n".join(out)

        rolled, _after = guard_compaction(self.writer, sid, written, text, self._dormant, memories)
        return rolled

    # ------------------------------------------------------------ assembly
    @traced("assemble", session_pos=1)
    def assemble(
        self, session_id: str, query: str | None = None, **options: Any
    ) -> AssembledContext:
        """The layered context for the next model call of ``session_id``.

        ``budget_tokens`` bounds all layers together, counted with ``model``'s
        tokenizer (or ``counter``); the other options are :class:`AssembleRequest`'s.
        A pure read: it writes only its audit record (through the bus) and never waits
        for maintenance."""
        return self.read(AssembleRequest.of(session_id, query, options))

    async def aassemble(
        self, session_id: str, query: str | None = None, **options: Any
    ) -> AssembledContext:
        """Async twin of :meth:`assemble` (runs in a worker thread)."""
        return await asyncio.to_thread(self.assemble, session_id, query, **options)

    def read(self, req: AssembleRequest) -> AssembledContext:
        """:meth:`assemble` for a ready :class:`AssembleRequest`."""
        if req.phase is not None and req.phase not in self.presets:
            raise ValueError(f"unknown phase {req.phase!r}; known: {', '.join(self.presets)}")
        c = self.counter(req.model, req.counter)
        req = req.bounded(c)
        flush = req.flush
        if not self.config.catch_up_in_background:  # asked to wait for the full answer
            if flush:
                self._flush()
                flush = False
            self.maintenance.run(
                req.session_id, compact=req.window_tokens or req.budget_tokens, counter=c
            )
        with self.maintenance.reading():  # maintenance gives way from here on
            if flush:
                self._flush()
            ctx = self._read(req, c)
        if req.record and ctx.messages:
            ctx.retrieval_event_id = self._record(ctx, req.user_id)
        return ctx

    def _read(
        self, req: AssembleRequest, c: TokenCounter, hidden: frozenset[str] = frozenset()
    ) -> AssembledContext:
        sid = req.session_id
        self.maintenance.ask(sid, req.window_tokens or req.budget_tokens, c)
        snap = self.maintenance.snapshot(sid)
        tail = read_tail(self.store, sid, req.budget_tokens, c)
        systems = self._systems(snap, tail, req.agent_id)
        units = self._units(tail, req)
        uid = req.user_id or snap.user_id or _user_of(tail.events)
        asked = req.query or _last_user_text(units)
        working, asleep = self._asleep(snap, asked)
        whole = tail.complete and self._fits(c, systems, units, req.budget_tokens)
        phase = req.phase or infer_phase(units, from_start=tail.complete)
        shares = self.presets[phase]
        if snap.level:
            shares = shares.shrink_immediate(THRASH_SHRINK**snap.level)
        qmsg = {"role": "user", "content": req.query} if req.include_query and req.query else None
        plan = Plan(
            session_id=sid,
            query=req.query,
            budget=req.budget_tokens,
            counter=c,
            phase=phase,
            shares=shares,
            systems=[e.content for e in systems],
            system_ids=[e.id for e in systems],
            units=units,
            working=working,
            query_message=qmsg,
            single_system=req.single_system,
            whole_history=whole,
            policy=self.edit_policy,
            resolve=self.store.get_artifact,
            recall=self._recall(
                req, snap, units, uid, asleep | hidden, whole, self._results(snap, tail)
            ),
        )
        filled = assemble(plan)
        messages = filled.messages
        return AssembledContext(
            session_id=sid,
            query=req.query,
            messages=messages,
            layers=filled.reports,
            total_tokens=filled.tokens,
            budget_tokens=req.budget_tokens,
            model=req.model,
            encoding=c.encoding_name,
            phase=phase,
            working_state=working,
            full_history_tokens=self._history_tokens(c, snap, tail, systems, units, whole),
            overhead_tokens=filled.overhead,
            compaction={"stats": dict(snap.compaction)},
            catching_up=not tail.complete and snap.cursor < tail.first_seq,
            message_ids=filled.message_ids,
            recall_query=asked or None,
        )

    # ------------------------------------------------------------ reading
    def _systems(self, snap: Snapshot, tail: Tail, agent_id: str | None) -> list[Event]:
        """The session's system prompts: the snapshot's and any newer in the tail."""
        if snap.ready:
            self._early_systems.forget(snap.session_id)
            found = [
                *snap.systems,
                *(e for e in tail.since(snap.cursor) if e.type == EventType.SYSTEM_PROMPT),
            ]
        elif tail.complete:
            found = [e for e in tail.events if e.type == EventType.SYSTEM_PROMPT]
        else:
            newest = tail.events[-1].seq if tail.events else -1
            found = self._early_systems.of(self.store, snap.session_id, newest)
        if agent_id is not None:
            found = [e for e in found if e.agent_id in (None, agent_id)]
        return list({e.id: e for e in found}.values())

    def _units(self, tail: Tail, req: AssembleRequest) -> list[Unit]:
        """The tail's turns as units, cut to the branch and to one agent's part; they
        start on a user turn (no orphaned tool result at the cut)."""
        events = [e for e in tail.events if e.type != EventType.SYSTEM_PROMPT]
        if req.agent_id is not None:
            events = [e for e in events if e.agent_id in (None, req.agent_id)]
        if req.lineage is not None:
            events = [e for e in events if _in_lineage(e, req.lineage)]
        if not tail.complete:
            first = next((i for i, e in enumerate(events) if e.type == EventType.USER_MESSAGE), 0)
            events = events[first:]
        key = (tail.session_id, req.agent_id, req.lineage is not None, tail.complete)
        return self._units_memo.units(key, events)

    @staticmethod
    def _fits(
        c: TokenCounter, systems: Sequence[Event], units: Sequence[Unit], budget: int
    ) -> bool:
        msgs = (
            [
                {
                    "role": "system",
                    "content": "\n\n".join(dict.fromkeys(e.content for e in systems if e.content)),
                }
            ]
            if systems
            else []
        )
        return c.count_messages(msgs) + sum(unit_cost(c, u) for u in units) <= budget

    @staticmethod
    def _history_tokens(
        c: TokenCounter,
        snap: Snapshot,
        tail: Tail,
        systems: Sequence[Event],
        units: Sequence[Unit],
        whole: bool,
    ) -> int:
        """What the whole history costs as a plain buffer sends it."""
        if tail.complete:  # (a unit's cost is its messages', kept on the unit)
            sys_msgs = [{"role": "system", "content": e.content} for e in systems]
            return c.count_messages(sys_msgs) + sum(unit_cost(c, u) for u in units)
        known = snap.history_tokens.get(c.encoding_name)
        if known is None:
            return tail.tokens
        return known + sum(event_tokens(c, e) for e in tail.since(snap.cursor))

    def _asleep(self, snap: Snapshot, query: str) -> tuple[WorkingState, frozenset[str]]:
        """The working state without dormant memories, and those the query matches
        listed as needing confirmation with their age (memory/dormancy.py)."""
        working = snap.working or WorkingState(snap.session_id)
        cutoff = self.dormancy.clock() - self.dormancy.after_days * DAY
        matching = snap.memories_matching(index_terms(query))
        # only what this call could show: the working state's memories and the matching
        pinned = working.memory_ids
        old = [
            m
            for m in {m.id: m for m in (*matching, *snap.memories_of(pinned))}.values()
            if m.ts < cutoff
        ]
        ages = dormant_ages(self.store, old, self.dormancy, self.affirmations.last) if old else {}
        if not ages:
            return working, frozenset()
        asked = [
            Item(
                "needs_confirmation",
                needs_confirmation_text(m, ages[m.id]),
                (m.id,),
                int(m.payload.get("source_seq", m.seq)),
            )
            for m in matching
            if m.id in ages
        ]
        return put_to_sleep(working, ages.keys(), asked), frozenset(ages)

    def _dormant(self, memories: Sequence[Event]) -> Collection[str]:
        return dormant_ages(self.store, memories, self.dormancy, self.affirmations.last).keys()

    def _recall(
        self,
        req: AssembleRequest,
        snap: Snapshot,
        units: Sequence[Unit],
        uid: str | None,
        skip: frozenset[str],
        whole: bool = False,
        results: Sequence[str] = (),
    ) -> Callable[[set[str]], RecallInputs]:
        """The recalled layer's candidates, given the ids the newest turns show
        (``whole``: they show every turn of the session)."""
        query = req.query or _last_user_text(units)
        today = day_of(units[-1].events[-1].ts) if units else None

        def recall(shown: set[str]) -> RecallInputs:
            if req.use_retriever is False or not query.strip():
                return RecallInputs(req.session_id, [], today)
            hits = self._hits(req, query, uid, whole)
            twins = self._twins(hits)
            keep = [
                (ev, h.score)
                for h in hits
                if (ev := self._pick(h, twins, req, shown, skip)) is not None
            ]
            keep = with_code_links(
                self.store,
                req.session_id,
                keep,
                lambda e: self._recallable(e, req, shown, skip),
                query,
            )
            keep += self._results_unranked(results, keep, req, shown, skip)
            related = self._related(keep, snap)
            shows = [
                (evs, score) for ev, score in keep if (evs := _evidence(ev, related, req, shown))
            ]
            cands: list[Candidate] = lines_for(
                shows, related, dict(snap.superseded), self.edit_policy, self.store.get_artifact
            )
            return RecallInputs(req.session_id, cands, today)

        return recall

    def _results(self, snap: Snapshot, tail: Tail) -> Sequence[str]:
        """The session's newest tool results by id, newest last: the snapshot's, and those
        stored after what maintenance has read (a call made before it caught up, such as
        the first after a burst of writes: read from the store when the tail does not
        reach back to them)."""
        if snap.cursor >= tail.last_seq:
            return snap.results
        gap: list[Event] = []
        if not tail.complete and snap.cursor < tail.first_seq - 1:
            gap = self.store.timeline(
                snap.session_id,
                seq_from=snap.cursor + 1,
                seq_to=tail.first_seq - 1,
                types=(EventType.TOOL_RESULT,),
                last=RESULTS_KEPT,
            )
        newer = [e.id for e in (*gap, *tail.since(snap.cursor)) if e.type == EventType.TOOL_RESULT]
        return (*snap.results, *newer)[-RESULTS_KEPT:]

    def _results_unranked(
        self,
        results: Sequence[str],
        keep: Sequence[tuple[Event, float]],
        req: AssembleRequest,
        shown: set[str],
        skip: frozenset[str],
    ) -> list[tuple[Event, float]]:
        """The session's newest tool results the retriever did not rank, newest first,
        after its hits: a result cost a tool call and its digest is short, while a
        question can miss it by wording alone (asked in another language than the tool
        answered in).  They take only the room the ranked evidence leaves."""
        have = {ev.id for ev, _s in keep}
        want = [i for i in reversed(results) if i not in have and i not in shown]
        if not want:
            return []
        found = {e.id: e for e in self.store.get(want)}
        return [
            (found[i], 0.0)
            for i in want
            if i in found and self._recallable(found[i], req, shown, skip)
        ]

    def _hits(self, req: AssembleRequest, query: str, uid: str | None, whole: bool) -> list[Hit]:
        """The retriever's hits for this request: this session's, and the user's other
        sessions' when there are any.  When the window holds the whole session and the
        user has no other, no turn can be recalled: only the notes are searched."""
        retrieve = self._retrieve or self._own_retriever()
        others = bool(uid) and len(self.store.recent_user_sessions(uid, 2)) >= 2  # type: ignore[arg-type]
        scope = {"user_id": uid} if others else {}
        try:
            if whole and not others:
                return list(
                    retrieve(
                        query,
                        session_id=req.session_id,
                        k=NOTES_K,
                        filters={"types": _NOTES},
                        paths=("lexical", "semantic"),
                    )
                )
            return list(
                retrieve(
                    query,
                    session_id=req.session_id,
                    k=RECALL_K + NOTES_K,
                    candidates=RECALL_CANDIDATES,
                    filters={"types": _RECALLED},
                    paths=RECALL_PATHS,
                    **scope,
                )
            )
        except ImportError:
            return []
        except Exception:  # recall is a bonus: never fail an assembly on it
            log.exception("beeweave: retriever failed; assembling without recall")
            return []

    def _own_retriever(self) -> Retrieve:
        from beeweave_core.retrieval import Retriever

        r = Retriever(self.store)
        self._retrieve = r.retrieve
        return r.retrieve

    def _recallable(
        self, ev: Event, req: AssembleRequest, shown: set[str], skip: frozenset[str]
    ) -> bool:
        if ev.type in _NOT_RECALLED or ev.id in shown or ev.id in skip:
            return False
        if ev.type == EventType.MEMORY and self._dormant([ev]):
            return False  # asked about in the working state when the query matches it
        if req.agent_id is not None and ev.agent_id not in (None, req.agent_id):
            return _written_by_tool(ev)
        if req.lineage is not None and ev.session_id == req.session_id:
            if ev.type in _BRANCHED or ev.type == EventType.TOOL_INVOCATION:
                return _in_lineage(ev, req.lineage)
            sources = ev.payload.get("source_ids") or ev.payload.get("raw_ids") or ()
            return not sources or any(s in req.lineage for s in sources)
        return True

    def _twins(self, hits: Sequence[Hit]) -> dict[str, Event]:
        """The events the retriever merged into a hit for saying the same words (the
        turn a memory was taken from, a turn said again), read at once."""
        ids = [d for h in hits for d in h.provenance.duplicates[:SOURCES_READ]]
        return {e.id: e for e in self.store.get(ids)} if ids else {}

    def _pick(
        self,
        hit: Hit,
        twins: dict[str, Event],
        req: AssembleRequest,
        shown: set[str],
        skip: frozenset[str],
    ) -> Event | None:
        """What a hit shows: a turn the retriever merged into a memory hit (same words)
        stands for it, the evidence rather than what was taken from it; of a turn said
        again in the session, the newest saying (what was said last is what holds; none
        when the newest turns already show it)."""
        ev = hit.event
        same = [twins[d] for d in hit.provenance.duplicates if d in twins]
        if ev.type == EventType.MEMORY:
            ev = next((t for t in same if t.type in _BRANCHED), ev)
            same = []
        again = [t for t in same if t.session_id == ev.session_id and t.type == ev.type]
        newest = max([ev, *again], key=lambda e: e.seq)
        return newest if self._recallable(newest, req, shown, skip) else None

    def _related(self, keep: Sequence[tuple[Event, float]], snap: Snapshot) -> dict[str, Event]:
        """The tool calls behind recalled results and the turns that replaced recalled
        ones, in one read."""
        want: set[str] = set()
        for ev, _s in keep:
            if ev.type == EventType.TOOL_RESULT:
                want.update(ev.parents)
            elif ev.type in (EventType.MEMORY, EventType.SUMMARY):
                want.update(_sources(ev)[:SOURCES_READ])
            want.update(snap.superseded.get(ev.id, ()))
        found = {e.id: e for e in self.store.get(sorted(want))} if want else {}
        for e in list(found.values()):  # what replaced a memory's source turns, too
            for i in snap.superseded.get(e.id, ()):
                want.add(i)
        more = sorted(want - set(found))
        if more:
            found.update({e.id: e for e in self.store.get(more)})
        return found

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
            "recall_query": ctx.recall_query,
            "tokens_by_layer": ctx.tokens_by_layer,
            "budget_by_layer": {name: rep.budget for name, rep in ctx.layers.items()},
            "full_history_tokens": ctx.full_history_tokens,
            "included": CanonicalList(p.to_dict() for p in ctx.provenance[:AUDIT_PIECES]),
            "left_out": CanonicalList(p.to_dict() for p in ctx.left_out[:AUDIT_PIECES]),
            "compaction": ctx.compaction,
            "at": time.time(),
        }
        meta = {"user_id": user_id} if user_id else {}
        try:
            return emit(
                EventType.RETRIEVAL,
                ctx.query or "",
                session_id=ctx.session_id,
                role="system",
                payload=payload,
                meta=meta,
                source={"framework": "beeweave", "component": "assembler"},
            )
        except Exception:  # the audit record must never cost the agent its context
            log.exception("beeweave: could not record the assembly")
            return None


#: Source turns read per recalled memory or summary (a memory has one or two).
SOURCES_READ = 4


def _sources(ev: Event) -> list[str]:
    return [str(i) for i in ev.payload.get("source_ids") or ev.payload.get("raw_ids") or ()]


def _evidence(
    ev: Event, related: dict[str, Event], req: AssembleRequest, shown: set[str]
) -> list[Event]:
    """What a hit shows: a memory or summary is shown by the turns it came from when
    they are still stored (the evidence itself, not a paraphrase of it); a summary whose
    turns are stored adds nothing; one whose turns are gone (archived by retention, a
    memory tool's memory that never had any) is itself."""
    if ev.type not in (EventType.MEMORY, EventType.SUMMARY) or _written_by_tool(ev):
        return [ev]  # (a memory tool's note is the agent's own words, not its turn's)
    turns = [related[i] for i in _sources(ev)[:SOURCES_READ] if i in related]
    turns = [
        t
        for t in turns
        if t.type in _BRANCHED
        and t.id not in shown
        and (req.lineage is None or _in_lineage(t, req.lineage))
    ]
    if turns:
        return sorted(turns, key=lambda t: t.seq)
    if any(i in related or i in shown for i in _sources(ev)[:SOURCES_READ]):
        return []  # its turns are shown already, or off this branch
    return [ev]


def _written_by_tool(ev: Event) -> bool:
    return ev.type == EventType.MEMORY and ev.source.get("component") == "memory_tools"


def _in_lineage(ev: Event, lineage: Collection[str]) -> bool:
    """On the branch: named by it, or a tool call made by an answer that is."""
    if ev.id in lineage:
        return True
    if ev.type == EventType.TOOL_INVOCATION:
        return any(p in lineage for p in ev.parents)
    return ev.type not in _BRANCHED


def _user_of(events: Sequence[Event]) -> str | None:
    return next((str(e.meta["user_id"]) for e in reversed(events) if e.meta.get("user_id")), None)


def _last_user_text(units: Sequence[Unit]) -> str:
    for u in reversed(units):
        if u.kind == "user":
            return u.events[0].content
    return ""
