"""Long-term memory: durable facts, decisions, preferences and artifacts, kept current.

The writer reads a session's events in order (live from the capture bus, or catching up
before an assembly) and stores what will matter later as ``memory`` events with
DERIVED_FROM edges to what they came from.  Rules do the extraction — no model call per
message — and an optional LLM can add what rules miss.

Keeping memory *current* is the hard part, so each new statement is compared with what
is already remembered:

* said again word for word → the existing memory gains a DERIVED_FROM edge (no copy);
* said again with small changes → a new version that SUPERSEDES the old one;
* an explicit change of plan ("change of plan: …", "cancel that", "不用 X 了，改成 Y")
  → the memories it names are invalidated (``store.invalidate(..., by=new)``), or, when
  only one clause of a memory is overturned, replaced by a version without it;
* the same subject with different values and no change cue → both stay, marked as a
  conflict, which the working state shows so the agent asks instead of guessing.

Each kind has a lifespan: recall weight halves every ``HALF_LIFE_DAYS[kind]`` and a
memory older than ``EXPIRE_HALF_LIVES`` half-lives is no longer recalled.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.context.editing import EditPolicy, tool_digest
from beeweave_core.context.memory_views import MemoryView, ViewSet
from beeweave_core.context.messages import tool_args, tool_name
from beeweave_core.context.supersession import (
    Judge,
    Similarity,
    SlotIndex,
    default_similarity,
    llm_judge,
)
from beeweave_core.errors import StoreClosed
from beeweave_core.events import Edge, EdgeType, Event, EventType, event_id_for
from beeweave_core.llm import TextLLM, as_text_llm
from beeweave_core.ranking import HALF_LIFE_DAYS, age_weight
from beeweave_core.store import EventStore
from beeweave_core.text import language as L
from beeweave_core.text.segment import CJK
from beeweave_core.text.statements import is_statement

KINDS = ("fact", "decision", "preference", "constraint", "artifact")
EXPIRE_HALF_LIVES = 4.0
#: Kinds that tell the agent what to do; only these can contradict each other.
INSTRUCTION_KINDS = frozenset({"constraint", "decision", "preference"})
NEAR_DUPLICATE = 0.8
SAME_SUBJECT = 0.6
_SOURCE = {"framework": "beeweave", "component": "memory"}


def decay(ev: Event, now: float | None = None) -> float:
    """Recall weight of a memory by age and kind: 1.0 new, halving every half-life."""
    return age_weight(ev, now)


def expired(ev: Event, now: float | None = None) -> bool:
    return decay(ev, now) < 0.5**EXPIRE_HALF_LIVES


def classify(sentence: str, role: str) -> str:
    """The memory kind of a sentence (English and Chinese cues)."""
    if role != "user":
        return "artifact" if L.DONE.search(sentence) else "fact"
    if L.CHANGE.search(sentence) or L.DECISION.search(sentence):
        return "decision"
    if L.PREFERENCE.search(sentence):
        return "preference"
    if L.CONSTRAINT.search(sentence) or L.IMPERATIVE.search(sentence):
        return "constraint"
    return "fact"


def _too_short(sentence: str) -> bool:
    if L.key_values(sentence):
        return False
    if L.has_cjk(sentence):
        return len(CJK.findall(sentence)) < 4
    return len(sentence.split()) < 3


def statement_sentences(text: str, role: str) -> list[str]:
    """The sentences of a turn that may be remembered: a user's statements (their
    acknowledgements, questions and commands are not facts), an answer's statements
    that carry a number or a quoted value."""
    if role == "user":
        return [] if _not_a_fact(text) else _user_statements(text)
    return [s for s in L.sentences(text)
            if (L.numbers(s) or L.quoted(s)) and is_statement(s) and not _too_short(s)]  # fmt: skip


def _not_a_fact(text: str) -> bool:
    """A user turn that is empty, an acknowledgement or a passing command as a whole."""
    return not text.strip() or L.is_ack(text) or L.is_transient(text)


def _user_statements(text: str) -> list[str]:
    return [s for s in L.sentences(text) if is_statement(s) and not _too_short(s)]


@dataclass
class Candidate:
    kind: str
    text: str
    role: str
    extra: dict[str, Any] = field(default_factory=dict)


MEMORY_EXTRACT_PROMPT = """Extract durable facts, decisions (with reasons), preferences and \
constraints from the user's message below, for an assistant's long-term memory.  Copy values \
(numbers, units, names, identifiers) exactly.  Reply with JSON lines only, one object per item: \
{"kind": "fact|decision|preference|constraint", "text": "..."}.  Reply with nothing if there is \
nothing durable."""


#: Events a stored batch may find unread before the bus listener leaves the session to
#: the engine's background catch-up (the capture thread never reads a long backlog).
MAX_BATCH_BACKLOG = 2_000


class MemoryWriter:
    """Extracts and maintains ``memory`` events for sessions of one store.

    Thread-safe: the capture bus calls :meth:`on_batch` from its writer thread while an
    assembly calls :meth:`process` to catch up; one lock serialises them, and a
    per-session cursor means every event is read once.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        llm: TextLLM | Callable[[str], str] | None = None,
        policy: EditPolicy | None = None,
        clock: Callable[[], float] = time.time,
        judge: Judge | None = None,
        similarity: Similarity | None = None,
        outside_changes: Callable[[], int] = lambda: 0,
    ) -> None:
        self.store = store
        #: bumped when the store changed behind the writer (a purge, a memory tool's
        #: invalidation): its per-session state is then read again
        self.outside_changes = outside_changes
        self.llm = as_text_llm(llm) if llm is not None else None
        self.policy = policy or EditPolicy()
        self.clock = clock
        #: asked about ambiguous look-alike settings; by default the LLM, when one is set
        self.judge = (
            judge if judge is not None else (llm_judge(self.llm) if self.llm is not None else None)
        )
        self.similarity = similarity or (default_similarity() if self.judge else None)
        self._lock = threading.RLock()
        self._cursor: dict[str, int] = {}
        self._views: dict[str, ViewSet] = {}
        self._slots: dict[str, SlotIndex] = {}
        self._epoch = outside_changes()
        self._generation: dict[str, int] = {}  # per session: bumped by each write/forget

    # --------------------------------------------------------------- driving
    def on_batch(self, events: Sequence[Event]) -> None:
        """Bus listener: catch up the sessions a stored batch touched (rules only)."""
        wanted = (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_RESULT)
        newest: dict[str, int] = {}
        for e in events:
            if e.type in wanted:
                newest[e.session_id] = max(newest.get(e.session_id, -1), e.seq)
        for sid, seq in newest.items():
            if seq - self.cursor(sid) <= MAX_BATCH_BACKLOG:  # else: the engine catches up
                self.process(sid, use_llm=False)

    def cursor(self, session_id: str) -> int:
        """The last seq of ``session_id`` the writer has read."""
        with self._lock:
            self._follow_outside_changes()
            cursor = self._cursor.get(session_id)
            if cursor is None:
                cursor = self._cursor[session_id] = self._initial_cursor(session_id)
            return cursor

    def process(
        self, session_id: str, *, use_llm: bool = True, upto: int | None = None
    ) -> list[str]:
        """Read the session's new events (up to seq ``upto``, every event up to it being
        stored) and write the memories they yield."""
        written: list[str] = []
        with self._lock:
            cursor = self.cursor(session_id)
            events = self.store.timeline(
                session_id,
                seq_from=cursor + 1,
                seq_to=upto,
                types=(EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE,
                       EventType.TOOL_RESULT, EventType.TOOL_INVOCATION),
            )  # fmt: skip
            if not events:
                self._cursor[session_id] = max(cursor, upto if upto is not None else cursor)
                return written
            self._viewset(session_id)
            invocations = {e.id: e for e in events if e.type == EventType.TOOL_INVOCATION}
            for ev in events:
                try:
                    written += self._process_event(ev, invocations, use_llm=use_llm)
                except StoreClosed:
                    raise  # nothing more can be written: not a bad event
                except Exception:  # a bad event must not stop memory for the rest
                    import logging

                    logging.getLogger("beeweave.memory").exception(
                        "beeweave: memory extraction failed for event %s", ev.id
                    )
                cursor = max(cursor, ev.seq)
            self._cursor[session_id] = max(cursor, upto if upto is not None else cursor)
        return written

    def _follow_outside_changes(self) -> None:
        """A purged session may start its seqs again, an invalidated memory must not
        be compared with: after a change made behind the writer, it reads again."""
        epoch = self.outside_changes()
        if epoch != self._epoch:
            self._epoch = epoch
            self._cursor.clear()
            self._views.clear()
            self._slots.clear()
            self._generation.clear()

    def warm(self, session_id: str) -> None:
        """Build the session's comparison indexes (active memory views, settings in
        force) before a statement needs them: a background catch-up calls this, so no
        caller pays a read of every memory of a long session.  Built without the lock
        (other sessions keep being served); kept only if no memory of the session was
        written or forgotten meanwhile."""
        with self._lock:
            self._follow_outside_changes()
            if session_id in self._views and session_id in self._slots:
                return
            before = (self._epoch, self._generation.get(session_id, 0))
        views = self._read_views(session_id)
        slots = self._slot_index_of(views)
        with self._lock:
            self._follow_outside_changes()
            if (self._epoch, self._generation.get(session_id, 0)) == before:
                self._views.setdefault(session_id, views)
                self._slots.setdefault(session_id, slots)

    def _viewset(self, session_id: str) -> ViewSet:
        """The session's active memory views (read once, kept current by _write/_forget)."""
        if session_id not in self._views:
            self._views[session_id] = self._read_views(session_id)
        return self._views[session_id]

    def _read_views(self, session_id: str) -> ViewSet:
        return ViewSet([MemoryView.of(e) for e in self.active(session_id)])

    def _initial_cursor(self, session_id: str) -> int:
        mems = self.store.timeline(session_id, types=(EventType.MEMORY,), include_inactive=True)
        return max((int(m.payload.get("source_seq", -1)) for m in mems), default=-1)

    # ---------------------------------------------------------------- reading
    def active(self, session_id: str, *, include_expired: bool = True) -> list[Event]:
        """Active memory events of a session, oldest first."""
        mems = self.store.timeline(session_id, types=(EventType.MEMORY,))
        if include_expired:
            return mems
        now = self.clock()
        return [m for m in mems if not expired(m, now)]

    def overturned_index(self, session_id: str) -> dict[str, list[str]]:
        """event id → wording the user later overturned (for editing verbatim text)."""
        out: dict[str, list[str]] = {}
        for m in self.store.timeline(session_id, types=(EventType.MEMORY,)):
            for item in m.payload.get("overturned") or ():
                for src in item.get("sources") or ():
                    out.setdefault(src, []).append(item["text"])
        return out

    def slot_index(self, session_id: str) -> SlotIndex:
        """The session's statements in force by setting (built once, then kept current)."""
        index = self._slots.get(session_id)
        if index is None:
            index = self._slots[session_id] = self._slot_index_of(self._viewset(session_id))
        return index

    def _slot_index_of(self, views: ViewSet) -> SlotIndex:
        index = SlotIndex(judge=self.judge, similarity=self.similarity)
        for v in views:
            if not v.is_artifact:
                m = v.event
                index.observe(m.id, m.content, int(m.payload.get("source_seq", -1)),
                              supersede=False)  # fmt: skip
        return index

    # ------------------------------------------------------------- extraction
    def _process_event(
        self, ev: Event, invocations: dict[str, Event], *, use_llm: bool
    ) -> list[str]:
        if ev.type == EventType.USER_MESSAGE:
            return self._from_user(ev, use_llm=use_llm)
        if ev.type == EventType.ASSISTANT_MESSAGE:
            cands = [Candidate(classify(s, "assistant"), s, "assistant")
                     for s in statement_sentences(ev.content, "assistant")]  # fmt: skip
            return [i for c in cands if (i := self._store(ev, c))]
        if ev.type == EventType.TOOL_RESULT:
            inv = next((invocations[p] for p in ev.parents if p in invocations), None)
            if inv is None and ev.parents:
                found = [e for e in self.store.get(list(ev.parents))
                         if e.type == EventType.TOOL_INVOCATION]  # fmt: skip
                inv = found[0] if found else None
            text = tool_digest(ev, inv, self.policy, self.store.get_artifact)
            extra = {"tool": tool_name(inv or ev), "args": tool_args(inv) if inv else None}
            sources = [ev.id] + ([inv.id] if inv else [])
            return [
                i
                for i in [self._store(ev, Candidate("artifact", text, "tool", extra), sources)]
                if i
            ]
        return []

    def _from_user(self, ev: Event, *, use_llm: bool) -> list[str]:
        text = ev.content or ""
        if _not_a_fact(text):  # (the LLM is not asked either)
            return []
        cands = [Candidate(classify(s, "user"), s, "user") for s in _user_statements(text)]
        if use_llm and self.llm is not None:
            cands += self._llm_candidates(self.llm, text)
        written: list[str] = []
        if L.is_change(text):
            written += self._apply_change(ev, text, cands)
        for c in cands:
            if (i := self._store(ev, c)) and i not in written:
                written.append(i)
        return written

    def _llm_candidates(self, llm: TextLLM, text: str) -> list[Candidate]:
        out: list[Candidate] = []
        try:
            reply = llm.complete(MEMORY_EXTRACT_PROMPT, text)
        except Exception:  # the optional LLM failing must not lose the rule memories
            return out
        for line in reply.splitlines():
            try:
                obj = json.loads(line.strip().rstrip(","))
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("text") and obj.get("kind") in KINDS:
                out.append(
                    Candidate(str(obj["kind"]), str(obj["text"]), "user", {"extractor": "llm"})
                )
        return out

    # ---------------------------------------------------------------- changes
    def _apply_change(self, ev: Event, text: str, cands: list[Candidate]) -> list[str]:
        """Invalidate (or revise) what an explicit change of plan names or cancels.

        A change that names nothing ("Change of plan: the X is Y now") is a new value
        for a setting: the candidate is left to :meth:`_store`, where the slot index
        finds what it replaces.
        """
        views = self._change_views(ev, text)
        targets = self._named_targets(text, views) or self._cancelled_last(text, views)
        if not targets:
            return []
        change_idx = next((i for i, c in enumerate(cands) if L.is_change(c.text)), None)
        if change_idx is not None:
            known = {v.id for v, _ in targets}
            targets += [(v, []) for v in self._slot_targets(ev, cands[change_idx])
                        if v.id not in known]  # fmt: skip
        overturned, revisions = self._overturned_parts(targets)
        extra = {"overturned": overturned, "supersedes": [v.id for v, _ in targets]}
        by = self._write(ev, self._change_candidate(cands, change_idx, targets, extra), [ev.id])
        revised_ids = self._write_revisions(ev, revisions)
        for v, _ in targets:
            reason = f"overturned by #{ev.seq}: {L.fold(text)[:120]}"
            self.store.invalidate([v.id], reason, by=revised_ids.get(v.id, by))
            if v.id in revised_ids:
                self.store.link([Edge(src=by, dst=v.id, type=EdgeType.SUPERSEDES)])
            self._forget(ev.session_id, v.id)
        return [by, *revised_ids.values()]

    def _change_views(self, ev: Event, text: str) -> list[MemoryView]:
        """Earlier instructions and facts a change could overturn (not its own rewording)."""
        said = next((s for s in L.sentences(text) if L.is_change(s)), text)
        own_terms = set(L.terms(said))
        negated = {L.fold(x) for x in L.overturned_terms(text)}

        def agrees(v: MemoryView) -> bool:
            if L.jaccard(own_terms, v.terms) >= NEAR_DUPLICATE:
                return True
            return bool(negated & {L.fold(x) for x in L.overturned_terms(v.text)})

        return [v for v in self._views.get(ev.session_id, ()) if v.kind != "artifact"
                and v.event.payload.get("source_seq", -1) < ev.seq and not agrees(v)]  # fmt: skip

    @staticmethod
    def _named_targets(text: str, views: list[MemoryView]) -> list[tuple[MemoryView, list[str]]]:
        """Memories that mention what the change says is no longer wanted ("drop X")."""
        said = next((s for s in L.sentences(text) if L.is_change(s)), text)
        own_slot = L.slot_terms(said)
        targets: list[tuple[MemoryView, list[str]]] = []
        for x in L.overturned_terms(text):
            for v in views:
                if not L.mentions(x, v.text) or any(t[0] is v for t in targets):
                    continue
                if v.kind == "fact" and L.overlap(own_slot - set(L.terms(x)), v.slot)[0] < 1:
                    continue  # a fact that merely mentions X is not the plan being changed
                targets.append((v, [c for c in L.clauses(v.text) if L.mentions(x, c)]))
        return targets

    @staticmethod
    def _cancelled_last(text: str, views: list[MemoryView]) -> list[tuple[MemoryView, list[str]]]:
        """ "Cancel that" / "算了": the user's last instruction."""
        if not L.CANCEL_LAST.search(text):
            return []
        user_views = [v for v in views if v.event.payload.get("source_role") == "user"]
        if not user_views:
            return []
        last_seq = max(v.event.payload.get("source_seq", -1) for v in user_views)
        return [(v, []) for v in user_views if v.event.payload.get("source_seq") == last_seq]

    def _overturned_parts(
        self, targets: list[tuple[MemoryView, list[str]]]
    ) -> tuple[list[dict[str, Any]], list[tuple[MemoryView, str]]]:
        """The overturned wording per target, and revisions for partly overturned ones."""
        overturned: list[dict[str, Any]] = []
        revisions: list[tuple[MemoryView, str]] = []
        for v, matched in targets:
            clauses = L.clauses(v.text)
            keep = [c for c in clauses if c not in matched]
            partial = (
                bool(matched and keep)
                and len(keep) < len(clauses)
                and any(L.key_values(c) or len(c.split()) >= 3 for c in keep)
            )
            sources = self._sources_of(v)
            overturned += [{"memory": v.id, "text": w, "sources": sources}
                           for w in (matched if partial else [v.text])]  # fmt: skip
            if partial:
                revised = ", ".join(keep).rstrip(",. ")
                revisions.append((v, revised + ("." if v.text.rstrip().endswith(".") else "")))
        return overturned, revisions

    @staticmethod
    def _change_candidate(
        cands: list[Candidate],
        change_idx: int | None,
        targets: list[tuple[MemoryView, list[str]]],
        extra: dict[str, Any],
    ) -> Candidate:
        """The change itself, remembered as a decision naming what it overturned."""
        if change_idx is not None:
            c = cands.pop(change_idx)
            c.kind, c.extra = "decision", {**c.extra, **extra}
            return c
        refs = ", ".join(f"#{v.event.payload.get('source_seq')}" for v, _ in targets)
        return Candidate("decision", f"Cancelled an earlier instruction ({refs}).", "user", extra)

    def _write_revisions(
        self, ev: Event, revisions: list[tuple[MemoryView, str]]
    ) -> dict[str, str]:
        revised_ids: dict[str, str] = {}
        for v, revised in revisions:
            version = int(v.event.payload.get("version", 1)) + 1
            cand = Candidate(v.kind, revised, "user", {"revision_of": v.id, "version": version})
            revised_ids[v.id] = self._write(
                ev, cand, self._sources_of(v), key=f"revision:{v.id}:{ev.id}"
            )
        return revised_ids

    # ---------------------------------------------------------- supersession
    def _slot_targets(self, ev: Event, c: Candidate) -> list[MemoryView]:
        """Active memories the user's statement gives another value to (by setting)."""
        if c.role != "user" or c.kind == "artifact":
            return []
        ids = self.slot_index(ev.session_id).superseded_by(c.text)
        views = self._views.get(ev.session_id) or ViewSet()
        return [v for i in ids if (v := views.get(i)) is not None]

    def _supersede(
        self, ev: Event, c: Candidate, targets: list[MemoryView], sources: list[str]
    ) -> str:
        """Write ``c``; the memories it replaces keep their provenance, leave the model."""
        overturned = [{"memory": v.id, "text": v.text, "sources": self._sources_of(v)}
                      for v in targets]  # fmt: skip
        # what the replaced statements overturned stays overturned (a setting changed
        # twice must not bring its first value back)
        overturned += [o for v in targets for o in v.event.payload.get("overturned") or ()]
        c.extra = {
            **c.extra,
            "overturned": [*(c.extra.get("overturned") or ()), *overturned],
            "supersedes": [*(c.extra.get("supersedes") or ()), *(v.id for v in targets)],
        }
        nid = self._write(ev, c, sources)
        for v in targets:
            self.store.invalidate(
                [v.id], f"superseded by #{ev.seq}: {L.fold(c.text)[:120]}", by=nid
            )
            self._forget(ev.session_id, v.id)
        return nid

    def _sources_of(self, v: MemoryView) -> list[str]:
        linked = [e.dst for e in self.store.edges(event_id=v.id, types=[EdgeType.DERIVED_FROM])]
        return list(dict.fromkeys([*v.sources, *linked]))

    # ---------------------------------------------------------------- storing
    def _store(self, ev: Event, c: Candidate, sources: Sequence[str] | None = None) -> str | None:
        """Write ``c`` unless it repeats an active memory; version or flag conflicts."""
        sources = list(sources or [ev.id])
        views = self._views.setdefault(ev.session_id, ViewSet())
        new = MemoryView.of(
            Event(id="_", session_id=ev.session_id, type=EventType.MEMORY, content=c.text)
        )
        artifact = c.kind == "artifact"
        if (v := views.same_wording(artifact, new.fold)) is not None:
            # said again: one memory, one more source
            self.store.link([Edge(src=v.id, dst=s, type=EdgeType.DERIVED_FROM) for s in sources])
            return None
        if artifact:
            prior = (views.last_call(c.extra["tool"], c.extra.get("args"))
                     if c.extra.get("tool") is not None else None)  # fmt: skip
            if prior is not None:
                return self._new_version(ev, c, prior, sources)
            return self._write(ev, c, sources)
        near = views.near_terms(new.terms, False, NEAR_DUPLICATE)
        best_sim, best = max(((L.jaccard(new.terms, v.terms), v) for v in near),
                             key=lambda p: p[0], default=(0.0, None))  # fmt: skip
        if best is not None and best_sim >= NEAR_DUPLICATE and new.values >= best.values:
            return self._new_version(ev, c, best, sources)
        if targets := self._slot_targets(ev, c):
            return self._supersede(ev, c, targets, sources)
        if "supersedes" not in c.extra and c.kind in INSTRUCTION_KINDS:
            # instructions only: a series of measurements is not a contradiction
            rivals = [(L.jaccard(new.slot, v.slot), int(v.event.payload.get("source_seq", -1)), v.id)
                      for v in views.near_slot(new.slot, False, SAME_SUBJECT)
                      if v.kind in INSTRUCTION_KINDS and v.values and new.values
                      and v.values != new.values and L.jaccard(new.slot, v.slot) >= SAME_SUBJECT]  # fmt: skip
            if rivals:
                c.extra = {**c.extra, "conflicts_with": [max(rivals)[2]]}
        return self._write(ev, c, sources)

    def _new_version(self, ev: Event, c: Candidate, old: MemoryView, sources: list[str]) -> str:
        version = int(old.event.payload.get("version", 1)) + 1
        c.extra = {**c.extra, "version": version, "previous": old.id}
        for key in ("overturned", "supersedes"):  # what the old version overturned still is
            carried = [*(old.event.payload.get(key) or ()), *(c.extra.get(key) or ())]
            if carried:
                c.extra[key] = carried
        nid = self._write(ev, c, sources)
        self.store.invalidate([old.id], f"replaced by a newer version (#{ev.seq})", by=nid)
        self._forget(ev.session_id, old.id)
        return nid

    def _forget(self, session_id: str, memory_id: str) -> None:
        self._generation[session_id] = self._generation.get(session_id, 0) + 1
        if session_id in self._views:
            self._views[session_id].remove(memory_id)
        if session_id in self._slots:
            self._slots[session_id].forget(memory_id)

    def _write(
        self, ev: Event, c: Candidate, sources: Sequence[str], *, key: str | None = None
    ) -> str:
        kind = c.kind if c.kind in KINDS else "fact"
        payload: dict[str, Any] = {
            "kind": kind,
            "source_seq": ev.seq,
            "source_role": c.role,
            "source_ids": list(sources),
            "values": L.key_values(c.text),
            "half_life_days": HALF_LIFE_DAYS[kind],
            "version": 1,
            "extractor": "rules",
            **c.extra,
        }
        if kind == "decision" and (reason := L.reason_of(c.text)):
            payload["reason"] = reason
        mid = event_id_for(ev.tenant, ev.session_id, key or f"memory:{ev.id}:{L.fold(c.text)}")
        # a memory is of its source's scope (see scopes.py)
        meta = {k: ev.meta[k] for k in ("user_id", "agent_id", "scope") if ev.meta.get(k)}
        meta["tags"] = ["memory", kind]
        mem = Event(
            id=mid, tenant=ev.tenant, session_id=ev.session_id, type=EventType.MEMORY,
            content=c.text, payload=payload, ts=ev.ts,
            links={EdgeType.DERIVED_FROM: tuple(sources)}, meta=meta, source=_SOURCE,
        )  # fmt: skip
        self.store.append([mem])
        self._generation[ev.session_id] = self._generation.get(ev.session_id, 0) + 1
        self._viewset(ev.session_id).add(MemoryView.of(mem))
        if kind != "artifact":
            self.slot_index(ev.session_id).observe(mid, c.text, ev.seq, supersede=False)
        return mid


def conflicts(memories: Iterable[Event]) -> list[tuple[Event, Event]]:
    """Pairs of active memories that say different things about the same subject."""
    by_id = {m.id: m for m in memories}
    pairs = []
    for m in by_id.values():
        for other in m.payload.get("conflicts_with") or ():
            if other in by_id:
                pairs.append((by_id[other], m))
    return pairs
