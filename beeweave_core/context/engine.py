"""``ContextEngine``: what ``weave.context`` is — memory, compaction and assembly wired up.

Built on first use of ``weave.context`` / ``weave.assemble``.  It hangs the memory
writer on the capture bus (rules only, so capture stays fast), and before every
assembly it catches up: memories from events not seen yet, summaries rebuilt where the
user overturned something they hold, compaction when the uncovered turns passed the
trigger.  Then it fills the layers and records the assembly as a ``retrieval`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from beeweave_core.context.assembler import (
    PRESETS,
    AssembledContext,
    LayerShares,
    Plan,
    assemble,
    infer_phase,
)
from beeweave_core.context.compactor import CompactionPolicy, CompactionReport, Compactor
from beeweave_core.context.editing import Editor, EditPolicy
from beeweave_core.context.memory import MemoryWriter
from beeweave_core.context.messages import Unit, read_units
from beeweave_core.context.recall import Recallable, RecallInputs, gather
from beeweave_core.context.summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
from beeweave_core.context.working_state import Item, WorkingState, build_working_state
from beeweave_core.events import EventType
from beeweave_core.llm import TextLLM
from beeweave_core.telemetry import traced
from beeweave_core.text import language as L
from beeweave_core.tokens import DEFAULT_MODEL, TokenCounter

log = logging.getLogger("beeweave.context")

#: How many of a user's other sessions are searched straight from the store.
OTHER_SESSIONS = 20
#: Immediate-layer factor per thrash level (the guard shrinks what stays verbatim).
THRASH_SHRINK = 0.7


class ContextEngine:
    """Assembly, compaction and long-term memory over one :class:`~beeweave_core.Weave`.

    Settings come from the arguments or from ``weave.options["context"]`` (a dict with
    any of ``summarizer``, ``llm``, ``policy``, ``edit_policy``, ``memory_llm``,
    ``presets``).  ``llm`` is a shortcut for ``summarizer=LLMSummarizer(llm)``; an LLM
    is a :class:`~beeweave_core.llm.TextLLM` (framework models are wrapped by their
    integration package) or a function ``str -> str``.
    """

    def __init__(
        self,
        weave: Any,
        *,
        summarizer: Summarizer | None = None,
        llm: TextLLM | Callable[[str], str] | None = None,
        policy: CompactionPolicy | None = None,
        edit_policy: EditPolicy | None = None,
        memory_llm: TextLLM | Callable[[str], str] | None = None,
        presets: dict[str, LayerShares] | None = None,
        listen: bool = True,
    ) -> None:
        opts = dict(getattr(weave, "options", {}).get("context") or {})
        llm = llm if llm is not None else opts.get("llm")
        summarizer = (
            summarizer
            or opts.get("summarizer")
            or (LLMSummarizer(llm) if llm is not None else ExtractiveSummarizer())
        )
        self.weave = weave
        self.store = getattr(weave, "writer", weave.store)
        self.edit_policy = edit_policy or opts.get("edit_policy") or EditPolicy()
        self.presets = {**PRESETS, **(presets or opts.get("presets") or {})}
        self.memory = MemoryWriter(self.store, llm=memory_llm or opts.get("memory_llm"),
                                   policy=self.edit_policy)  # fmt: skip
        self.compactor = Compactor(
            self.store, summarizer, policy=policy or opts.get("policy"),
            edit_policy=self.edit_policy, overturned=self.memory.overturned_index,
        )  # fmt: skip
        self._counters: dict[str, TokenCounter] = {}
        self._listening = False
        if listen and hasattr(weave, "bus"):
            weave.bus.listeners.append(self.memory.on_batch)
            self._listening = True
            weave._closers.append(self._detach)

    def _detach(self) -> None:
        if self._listening:
            with contextlib.suppress(ValueError):  # already removed
                self.weave.bus.listeners.remove(self.memory.on_batch)
            self._listening = False

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
        flush = getattr(self.weave, "flush", None)
        if callable(flush):
            flush(10.0)

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
    ) -> CompactionReport:
        """Bring memory up to date and compact ``session_id`` if it passed the trigger."""
        if flush:
            self._flush()
        c = self.counter(model, counter)
        self.memory.process(session_id)
        refreshed = self.compactor.refresh_stale(session_id, c)
        report = self.compactor.maybe_compact(
            session_id, window_tokens=window_tokens, counter=c, force=force
        )
        report.refreshed = refreshed
        return report

    async def acompact(self, session_id: str, **kw: Any) -> CompactionReport:
        return await asyncio.to_thread(self.compact, session_id, **kw)

    def working_state(self, session_id: str) -> WorkingState:
        self.memory.process(session_id)
        _systems, units = read_units(self.store, session_id)
        return build_working_state(session_id, self.memory.active(session_id), units)

    def memories(self, session_id: str, *, include_inactive: bool = False) -> list[Any]:
        """The session's memory events (active ones unless ``include_inactive``)."""
        self.memory.process(session_id)
        return self.store.timeline(session_id, types=(EventType.MEMORY,),
                                   include_inactive=include_inactive)  # fmt: skip

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
    ) -> AssembledContext:
        """The layered context for the next model call of ``session_id``.

        ``budget_tokens`` bounds all layers together, counted with ``model``'s
        tokenizer (or ``counter``).  ``query`` steers recall (default: the latest user
        message); it is appended as a user message only with ``include_query``.
        ``phase`` picks the layer split (requirement / execution / closing; inferred
        when ``None``).  ``window_tokens`` is what compaction measures against
        (default: the budget).  ``single_system`` merges the system layers into one
        message for models that accept only one.
        """
        if (
            not isinstance(budget_tokens, int)
            or isinstance(budget_tokens, bool)
            or budget_tokens <= 0
        ):
            raise ValueError(f"budget_tokens must be a positive int, got {budget_tokens!r}")
        if phase is not None and phase not in self.presets:
            raise ValueError(f"unknown phase {phase!r}; known: {', '.join(self.presets)}")
        c = self.counter(model, counter)
        if flush:
            self._flush()
        self.memory.process(session_id)
        report = None
        if compact:
            try:
                report = self.compact(session_id, window_tokens=window_tokens or budget_tokens,
                                      counter=c, flush=False)  # fmt: skip
            except Exception:  # a failing summarizer must not cost the agent its context
                log.exception("beeweave: compaction failed; assembling without it")
        systems, raw_units = read_units(self.store, session_id)
        memories = self.memory.active(session_id)
        ws = build_working_state(session_id, memories, raw_units)
        editor = Editor(
            self.edit_policy, self.memory.overturned_index(session_id), self.store.get_artifact
        )
        units, edited_out = _edited(editor, raw_units)
        phase = phase or infer_phase(raw_units)
        level = self.compactor.level(session_id)
        shares = self.presets[phase]
        if level:
            shares = shares.shrink_immediate(THRASH_SHRINK**level)
        uid = user_id or _user_of(systems, raw_units)
        recall_query = query or _last_user_text(raw_units)
        qmsg = {"role": "user", "content": query} if include_query and query else None

        def recall(window_from: int, in_working: Sequence[Item]) -> list[Recallable]:
            return gather(RecallInputs(
                session_id=session_id, query=recall_query, user_id=uid, memories=memories,
                exclude={i for it in in_working for i in it.event_ids},
                exclude_texts={L.fold(it.text) for it in in_working}, top_summaries=self.compactor.top_summaries(session_id),
                rolled_back=self.compactor.rolled_back(session_id), units=raw_units,
                covered_to=self.compactor.covered_to(session_id), window_from=window_from,
                editor=editor, now=time.time(),
                other_sessions=lambda: self._other_sessions(session_id, uid),
                retrieve=self._retriever(session_id, uid, use_retriever),
            ))  # fmt: skip

        plan = Plan(
            session_id=session_id, query=query, budget=budget_tokens, counter=c, phase=phase,
            shares=shares, systems=[e.content for e in systems], system_ids=[e.id for e in systems],
            units=units, edited_out=edited_out, working=ws, recall=recall, query_message=qmsg, single_system=single_system,
        )  # fmt: skip
        messages, layers, overhead = assemble(plan)
        full = c.count_messages([m for u in raw_units for m in u.messages]
                                + [{"role": "system", "content": e.content} for e in systems])  # fmt: skip
        ctx = AssembledContext(
            session_id=session_id, query=query, messages=messages, layers=layers,
            total_tokens=c.count_messages(messages), budget_tokens=budget_tokens, model=model,
            encoding=c.encoding_name, phase=phase, full_history_tokens=full, working_state=ws,
            overhead_tokens=overhead,
            compaction=_report_dict(report, self.compactor.stats(session_id)) if compact else None,
        )  # fmt: skip
        if record:
            ctx.retrieval_event_id = self._record(ctx, uid)
        return ctx

    async def aassemble(
        self, session_id: str, query: str | None = None, **kw: Any
    ) -> AssembledContext:
        """Async twin of :meth:`assemble` (runs in a worker thread)."""
        return await asyncio.to_thread(self.assemble, session_id, query, **kw)

    # ------------------------------------------------------------ helpers
    def _other_sessions(
        self, session_id: str, user_id: str | None
    ) -> list[tuple[str, list[Any], list[Any]]]:
        if not user_id:
            return []
        out = []
        for s in self.store.sessions(user_id=user_id)[: OTHER_SESSIONS + 1]:
            if s.session_id == session_id:
                continue
            self.memory.process(s.session_id, use_llm=False)  # imported / written elsewhere
            mems = self.store.timeline(s.session_id, types=(EventType.MEMORY,))
            sums = self.compactor.top_summaries(s.session_id)
            if mems or sums:
                out.append((s.session_id, mems, sums))
        return out[:OTHER_SESSIONS]

    def _retriever(self, session_id: str, user_id: str | None, use: bool | None) -> Any:
        """The fused retriever for cross-session recall, when it exists and is useful."""
        if use is False or not user_id:
            return None
        if use is None and len(self.store.sessions(user_id=user_id)) < 2:
            return None  # nothing beyond this session to search
        try:
            retrieve = self.weave.retrieve
        except AttributeError:
            return None

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
        emit = getattr(self.weave, "emit", None)
        if not callable(emit):
            return None
        payload = {
            "budget_tokens": ctx.budget_tokens,
            "total_tokens": ctx.total_tokens,
            "model": ctx.model,
            "encoding": ctx.encoding,
            "phase": ctx.phase,
            "tokens_by_layer": ctx.tokens_by_layer,
            "full_history_tokens": ctx.full_history_tokens,
            "included": [p.to_dict() for p in ctx.provenance][:300],
            "left_out": [p.to_dict() for p in ctx.left_out][:300],
            "compaction": ctx.compaction,
        }
        meta = {"user_id": user_id} if user_id else {}
        return emit(EventType.RETRIEVAL, ctx.query or "", session_id=ctx.session_id, role="system",
                    payload=payload, meta=meta, source={"framework": "beeweave", "component": "assembler"})  # fmt: skip


def _edited(editor: Editor, units: Sequence[Unit]) -> tuple[list[Unit], list[tuple[Unit, str]]]:
    """Units as the immediate layer shows them: acks and repeated turns dropped
    (the latest user message always kept), big tool outputs cut, overturned wording out.
    Also returns what was dropped, and why, for the audit record."""
    last_user = next((i for i in range(len(units) - 1, -1, -1) if units[i].kind == "user"), None)
    out: list[Unit] = []
    dropped: list[tuple[Unit, str]] = []
    seen: set[str] = set()
    for i in range(len(units) - 1, -1, -1):
        edited = editor.edit_unit(units[i], keep_acks=(i == last_user))
        if edited is None:
            dropped.append((units[i], "edited out: acknowledgement or overturned instruction"))
            continue
        if editor.policy.merge_repeats and edited.kind != "tool_group":
            key = L.fold(edited.messages[0].get("content") or "")
            if key and key in seen and i != last_user:
                dropped.append((units[i], "edited out: repeats a later turn"))
                continue
            seen.add(key)
        out.append(edited)
    return out[::-1], dropped[::-1]


def _user_of(systems: Sequence[Any], units: Sequence[Unit]) -> str | None:
    for ev in [*systems, *(e for u in units for e in u.events)]:
        if ev.meta.get("user_id"):
            return str(ev.meta["user_id"])
    return None


def _last_user_text(units: Sequence[Unit]) -> str:
    for u in reversed(units):
        if u.kind == "user":
            return u.events[0].content
    return ""


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
