"""Long-term memory: durable decisions, constraints, preferences, facts and artifacts,
kept current.

The writer reads a session's events in order (maintenance drives it from a cursor) and
stores what a turn *states* (:mod:`.extract`: by speech act, never by sentence shape) as
``memory`` events with DERIVED_FROM edges to the turns they came from.  No model call per
message; an optional LLM can add what the classifier misses.

Keeping memory *current*:

* said again word for word → the existing memory gains a DERIVED_FROM edge (no copy);
  an assistant's reply that repeats a value the user just set is linked the same way,
  so a confirmation is as overturned as what it confirms when the value changes;
* another value for the same setting (:mod:`.supersession`: by meaning, whatever the
  wording) → a new memory that SUPERSEDES the old one, which is invalidated with its
  provenance (the ``overturned`` payload names the turns that said the old value);
* a proposal the user turns down → recorded as rejected (invalid from the start: never
  current), with the reply that turned it down;
* a tool called again with the same arguments → a new version of its result.

Each kind has a lifespan: recall weight halves every ``HALF_LIFE_DAYS[kind]`` and a
memory older than ``EXPIRE_HALF_LIVES`` half-lives is no longer recalled.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.errors import StoreClosed
from beeweave_core.events import (
    Edge,
    EdgeType,
    Event,
    EventType,
    event_id_for,
    tool_args,
    tool_name,
)
from beeweave_core.llm import TextLLM, as_text_llm
from beeweave_core.memory.acts import STATEMENTS, classify
from beeweave_core.memory.extract import Statement, Turn, statements
from beeweave_core.memory.kinds import KINDS, expired
from beeweave_core.memory.supersession import Index, prepare
from beeweave_core.memory.supersession import warm as warm_vectors
from beeweave_core.ranking import HALF_LIFE_DAYS
from beeweave_core.store_writer import StoreWriter
from beeweave_core.text import language as L
from beeweave_core.text import segment

log = logging.getLogger("beeweave.memory")

_SOURCE = {"framework": "beeweave", "component": "memory"}
#: Earlier wordings a memory carries as overturned (the newest; a setting restated
#: all session long would otherwise copy a growing list into every new version).
OVERTURNED_KEPT = 32
#: Events whose sentences are classified (and statements embedded) in one model run.
WARM_EVENTS = 32
_TURNS = (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_RESULT)
_READ = (*_TURNS, EventType.TOOL_INVOCATION)

MEMORY_EXTRACT_PROMPT = """Extract durable facts, decisions (with reasons), preferences and \
constraints from the user's message below, for an assistant's long-term memory.  Copy values \
(numbers, units, names, identifiers) exactly.  Reply with JSON lines only, one object per item: \
{"kind": "fact|decision|preference|constraint", "text": "..."}.  Reply with nothing if there is \
nothing durable."""


#: One line saying what a tool call did and found, from its result and invocation (the
#: context engine passes its context editing's digest, so a memory reads as the
#: prompt would show the call).
Digest = Callable[[Event, Event | None], str]


def _plain_digest(result: Event, invocation: Event | None) -> str:
    args = tool_args(invocation) if invocation is not None else ""
    return f"{tool_name(invocation or result)}({args}) → {result.content[:300]}"


@dataclass
class _Session:
    """What the writer keeps of one session between events (rebuilt from the store)."""

    cursor: int = -1
    #: conversation turns read (user, assistant, tool result): how far apart two
    #: statements were said, whatever else the session stored between them
    turns: int = 0
    index: Index = field(default_factory=Index)
    wording: dict[str, str] = field(default_factory=dict)  # folded text -> memory id
    calls: dict[str, str] = field(default_factory=dict)  # tool call -> artifact memory id
    #: the assistant message a user's next turn answers
    before: Turn | None = None
    #: memories written from the newest user turn, and their values (a confirmation
    #: that repeats one is linked to it)
    last_user: list[tuple[str, set[str]]] = field(default_factory=list)


class MemoryWriter:
    """Extracts and maintains ``memory`` events for the sessions of one store.

    Maintenance calls :meth:`process` from its worker; a lock serialises callers, and a
    per-session cursor means every event is read once.
    """

    def __init__(
        self,
        writer: StoreWriter,
        *,
        llm: TextLLM | Callable[[str], str] | None = None,
        digest: Digest | None = None,
        clock: Callable[[], float] = time.time,
        outside_changes: Callable[[], int] = lambda: 0,
    ) -> None:
        #: Memories, edges and invalidations go through it (indexed at once, and the
        #: engine's views follow the invalidations).
        self.writer = writer
        #: What the writer reads (the writer's store).
        self.store = writer.store
        #: bumped when the store changed behind the writer (a purge, a status change
        #: not made through ``writer``): its per-session state is then read again
        self.outside_changes = outside_changes
        self.llm = as_text_llm(llm) if llm is not None else None
        self.digest = digest or _plain_digest
        self.clock = clock
        self._lock = threading.RLock()
        self._sessions: dict[str, _Session] = {}
        self._epoch = outside_changes()

    # --------------------------------------------------------------- driving
    def cursor(self, session_id: str) -> int:
        """The last seq of ``session_id`` the writer has read."""
        with self._lock:
            return self._session(session_id).cursor

    def process(
        self,
        session_id: str,
        *,
        use_llm: bool = True,
        upto: int | None = None,
        pause: Callable[[], None] | None = None,
    ) -> list[str]:
        """Read the session's new events (up to seq ``upto``, every event up to it being
        stored) and write the memories they yield (``pause`` is called between events:
        maintenance gives way to reads there)."""
        written: list[str] = []
        with self._lock:
            st = self._session(session_id)
            events = self.store.timeline(
                session_id, seq_from=st.cursor + 1, seq_to=upto, types=_READ
            )
            invocations = {e.id: e for e in events if e.type == EventType.TOOL_INVOCATION}
            for i in range(0, len(events), WARM_EVENTS):
                if pause is not None:
                    pause()
                _warm(events[i : i + WARM_EVENTS])
            for ev in events:
                if pause is not None:
                    pause()
                try:
                    written += self._process_event(st, ev, invocations, use_llm)
                except StoreClosed:
                    raise  # nothing more can be written: not a bad event
                except Exception:  # a bad event must not stop memory for the rest
                    log.exception("beeweave: memory extraction failed for event %s", ev.id)
                st.cursor = max(st.cursor, ev.seq)
            if upto is not None:
                st.cursor = max(st.cursor, upto)
        return written

    def warm(self, session_id: str) -> None:
        """Read the session's state now (a background catch-up), not at its first event."""
        with self._lock:
            self._session(session_id)

    def _session(self, session_id: str) -> _Session:
        """(lock held) the session's state, read from the store on first use."""
        epoch = self.outside_changes()
        if epoch != self._epoch:  # a change behind the writer: read every session again
            self._epoch = epoch
            self._sessions.clear()
        st = self._sessions.get(session_id)
        if st is None:
            st = self._sessions[session_id] = self._read_state(session_id)
        return st

    def _read_state(self, session_id: str) -> _Session:
        mems = self.store.timeline(session_id, types=(EventType.MEMORY,), include_inactive=True)
        newest = max(mems, key=lambda m: int(m.payload.get("source_seq", -1)), default=None)
        st = _Session(
            cursor=int(newest.payload.get("source_seq", -1)) if newest else -1,
            turns=_turn_of(newest) if newest else 0,
        )
        active = [m for m in mems if m.status.value == "active"]
        for m in active:
            if m.payload.get("kind") == "artifact":
                key = m.payload.get("call_key")
                if key:
                    st.calls[str(key)] = m.id
            else:
                st.wording[L.fold(m.content)] = m.id
        said = prepare(
            [
                (m.id, m.content, _turn_of(m), m.payload.get("source_role") == "user")
                for m in active
                if m.payload.get("kind") != "artifact"
            ]
        )
        for s in said:
            st.index.add(s)
        return st

    # ---------------------------------------------------------------- reading
    def active(self, session_id: str, *, include_expired: bool = True) -> list[Event]:
        """Active memory events of a session, oldest first."""
        mems = self.store.timeline(session_id, types=(EventType.MEMORY,))
        if include_expired:
            return mems
        now = self.clock()
        return [m for m in mems if not expired(m, now)]

    def overturned_index(self, session_id: str) -> dict[str, list[str]]:
        """event id → wording the user later overturned (summaries are rebuilt without it)."""
        out: dict[str, list[str]] = {}
        for m in self.store.timeline(session_id, types=(EventType.MEMORY,)):
            for item in m.payload.get("overturned") or ():
                for src in item.get("sources") or ():
                    out.setdefault(src, []).append(item["text"])
        return out

    # ------------------------------------------------------------- extraction
    def _process_event(
        self, st: _Session, ev: Event, invocations: dict[str, Event], use_llm: bool
    ) -> list[str]:
        if ev.type in _TURNS:
            st.turns += 1
        if ev.type == EventType.TOOL_RESULT:
            return self._artifact(st, ev, invocations)
        if ev.type not in (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE):
            return []
        role = "user" if ev.type == EventType.USER_MESSAGE else "assistant"
        turn = Turn(ev.id, st.turns, role, ev.content or "")
        if role == "assistant":
            self._confirmations(st, ev)
            if turn.text.strip():
                st.before = turn
            return []
        found = statements(turn, st.before)
        st.before = None
        if use_llm and self.llm is not None:
            found += self._llm_statements(self.llm, turn)
        st.last_user = []
        written: list[str] = []
        for s in found:
            mid = self._remember(st, ev, s)
            if mid is not None:
                written.append(mid)
                st.last_user.append((mid, {v.casefold() for v in L.key_values(s.text)}))
        return written

    def _llm_statements(self, llm: TextLLM, turn: Turn) -> list[Statement]:
        out: list[Statement] = []
        try:
            reply = llm.complete(MEMORY_EXTRACT_PROMPT, turn.text)
        except Exception:  # the optional LLM failing must not lose the classifier's memories
            return out
        for line in reply.splitlines():
            try:
                obj = json.loads(line.strip().rstrip(","))
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("text") and obj.get("kind") in KINDS:
                out.append(
                    Statement(
                        str(obj["text"]),
                        str(obj["kind"]),
                        (turn.id,),
                        turn.seq,
                        True,
                        extractor="llm",
                    )
                )
        return out

    def _confirmations(self, st: _Session, ev: Event) -> None:
        """An assistant reply repeating a value the user just set says it again."""
        text = L.fold(ev.content or "")
        for mid, vals in st.last_user:
            if vals and any(v in text for v in vals):
                self.writer.link([Edge(src=mid, dst=ev.id, type=EdgeType.DERIVED_FROM)])
        st.last_user = []

    # ---------------------------------------------------------------- storing
    def _remember(self, st: _Session, ev: Event, s: Statement) -> str | None:
        """Write ``s`` unless it repeats an active memory; supersede what it replaces."""
        key = L.fold(s.text)
        same = st.wording.get(key)
        if same is not None and not s.rejected:  # said again: one memory, more sources
            self.writer.link([Edge(src=same, dst=i, type=EdgeType.DERIVED_FROM) for i in s.sources])
            return None
        if s.rejected:
            return self._rejected(st, ev, s)
        (said,) = prepare([("_", s.text, s.seq, s.by_user)])
        replaced = st.index.replaced_by(said)
        extra = self._overturns(replaced) if replaced else {}
        role = "user" if s.by_user else "assistant"
        if whole := _whole_turn(ev, s):
            extra["said"] = whole
        mid = self._write(
            ev,
            st.turns,
            s.kind,
            s.text,
            s.sources,
            {"source_role": role, "extractor": s.extractor, **extra},
        )
        for old in replaced:
            self.writer.invalidate([old], f"superseded by #{ev.seq}: {key[:120]}", by=mid)
            self._forget(st, old)
        said.id = mid
        st.index.add(said)
        st.wording[key] = mid
        return mid

    def _overturns(self, replaced: Sequence[str]) -> dict[str, Any]:
        """The payload naming what a new memory replaces (and what those replaced: a
        setting changed twice never brings its first value back)."""
        olds = self.store.get(list(replaced), include_inactive=True)
        overturned = [
            {"memory": m.id, "text": m.content, "sources": self._sources_of(m)} for m in olds
        ]
        overturned += [o for m in olds for o in m.payload.get("overturned") or ()]
        return {"overturned": overturned[:OVERTURNED_KEPT], "supersedes": list(replaced)}

    def _rejected(self, st: _Session, ev: Event, s: Statement) -> str:
        """A proposal the user turned down: stored, invalid from the start, with the reply."""
        proposal, reply = s.sources[0], s.sources[-1]
        mid = self._write(
            ev,
            st.turns,
            "decision",
            s.text,
            s.sources,
            {
                "source_role": "assistant",
                "rejected": True,
                "rejected_by": reply,
                "overturned": [{"memory": None, "text": s.text, "sources": [proposal]}],
            },
            key=f"rejected:{proposal}:{L.fold(s.text)}",
        )
        self.writer.invalidate([mid], f"turned down by the user at #{ev.seq}", by=reply)
        return mid

    def _artifact(self, st: _Session, ev: Event, invocations: dict[str, Event]) -> list[str]:
        inv = next((invocations[p] for p in ev.parents if p in invocations), None)
        if inv is None and ev.parents:
            found = [
                e for e in self.store.get(list(ev.parents)) if e.type == EventType.TOOL_INVOCATION
            ]
            inv = found[0] if found else None
        text = self.digest(ev, inv)
        call = json.dumps(
            [tool_name(inv or ev), tool_args(inv) if inv else None], sort_keys=True, default=str
        )
        sources = [ev.id] + ([inv.id] if inv else [])
        prior = st.calls.get(call)
        extra: dict[str, Any] = {
            "tool": tool_name(inv or ev),
            "call_key": call,
            "args": tool_args(inv) if inv else None,
            "source_role": "tool",
        }
        if prior is not None:
            extra.update(previous=prior, supersedes=[prior])
        mid = self._write(ev, st.turns, "artifact", text, sources, extra)
        if prior is not None:
            self.writer.invalidate([prior], f"replaced by a newer version (#{ev.seq})", by=mid)
        st.calls[call] = mid
        return [mid]

    def _forget(self, st: _Session, memory_id: str) -> None:
        st.index.forget(memory_id)
        for k, v in list(st.wording.items()):
            if v == memory_id:
                del st.wording[k]

    def _sources_of(self, m: Event) -> list[str]:
        linked = [e.dst for e in self.store.edges(event_id=m.id, types=[EdgeType.DERIVED_FROM])]
        return list(dict.fromkeys([*(m.payload.get("source_ids") or ()), *linked]))

    def _write(
        self,
        ev: Event,
        turn: int,
        kind: str,
        text: str,
        sources: Sequence[str],
        extra: dict[str, Any],
        *,
        key: str | None = None,
    ) -> str:
        kind = kind if kind in KINDS else "fact"
        payload: dict[str, Any] = {
            "kind": kind,
            "source_seq": ev.seq,
            "source_turn": turn,
            "source_ids": list(sources),
            "values": L.key_values(text),
            "half_life_days": HALF_LIFE_DAYS[kind],
            "version": 1,
            "extractor": "acts",
            **extra,
        }
        if kind == "decision" and (reason := L.reason_of(text)):
            payload["reason"] = reason
        mid = event_id_for(ev.tenant, ev.session_id, key or f"memory:{ev.id}:{L.fold(text)}")
        # a memory is of its source's scope (see scopes.py)
        meta = {k: ev.meta[k] for k in ("user_id", "agent_id", "scope") if ev.meta.get(k)}
        meta["tags"] = ["memory", kind]
        mem = Event(
            id=mid,
            tenant=ev.tenant,
            session_id=ev.session_id,
            type=EventType.MEMORY,
            content=text,
            payload=payload,
            ts=ev.ts,
            links={EdgeType.DERIVED_FROM: tuple(sources)},
            meta=meta,
            source=_SOURCE,
        )
        self.writer.append([mem])
        return mid


#: Longest user turn (in words; a Chinese word counts as one) a memory shows whole.
SAID_WHOLE_WORDS = 40


def _whole_turn(ev: Event, s: Statement) -> str | None:
    """The user's turn a statement was one sentence of, when the turn is short: the
    sentences around it are what make it readable ("the Sunday one isn't working" needs
    the instruction after it), and the working state shows what the user said, not a
    piece of it."""
    text = (ev.content or "").strip()
    if s.sources != (ev.id,) or L.fold(text) == L.fold(s.text):
        return None
    return text if len(segment.tokens(text)) <= SAID_WHOLE_WORDS else None


def _warm(events: Sequence[Event]) -> None:
    """Decide the acts of a chunk's user sentences, and embed its statements, in one
    model run each (the writer then reads them one event at a time from the caches; an
    assistant's sentences are read only when a user's reply takes them up)."""
    sents = [
        s for e in events if e.type == EventType.USER_MESSAGE for s in L.sentences(e.content or "")
    ]
    if not sents:
        return
    kinds = classify(sents)
    warm_vectors(
        [s for s, k in zip(sents, kinds, strict=True) if k in STATEMENTS or k == "question"]
    )


def _turn_of(memory: Event) -> int:
    """The conversation turn a memory was said at (stores written before turns were
    counted have only the event's seq)."""
    return int(memory.payload.get("source_turn", memory.payload.get("source_seq", memory.seq)))


__all__ = ["Digest", "MemoryWriter"]
