"""Messages → events: the one writer every integration records a conversation through.

A framework sees the same conversation many times — every model call re-sends it, a
chat history, a memory and a callback handler each observe it — and every observer
must mint the same event id for the same message, or the store keeps copies.  So
there is one key scheme, one set of role names and one place that wires a tool call
to its result; the LangChain and LlamaIndex packages only turn their message objects
into :class:`Message` and call :class:`Transcript`.

Keys (``event_id_for(tenant, session, key)``; ``scope:`` in front when the observer
has a scope, e.g. a LlamaIndex run — system prompts are never scoped, they are
configuration and kept once per distinct text):

* a message with the framework's own id → ``msg:<id>``;
* a tool call → ``tool_call:<answer event id>:<tool_call_id>`` (the answer that asked
  scopes it: some servers reuse ids such as ``call_0`` every turn); its result →
  ``tool_result:<answer event id>:<tool_call_id>``;
* otherwise ``msg:<role>:<digest of the text>:<n>``, ``n`` counting the earlier
  messages of that role and text the observer has seen — the same words said twice
  are two events.

Parents (CAUSED_BY): a tool result → its invocation → the answer that asked; an
answer → the tool results it read (all of them, after parallel calls), else the
message before it; user and system messages have none.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from beeweave_core.events import Event, EventType, event_id_for, new_event_id
from beeweave_core.refs import ValueRefLinker
from beeweave_core.scopes import with_scope
from beeweave_core.store import EventGraph, EventReader, EventStore

if TYPE_CHECKING:
    from beeweave_core.capture import ContextBus

#: Role names frameworks and providers use, mapped onto BeeWeave's four.
ROLE_ALIASES = {
    "human": "user",
    "ai": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "developer": "system",
    "function": "tool",
}
EVENT_BY_ROLE = {
    "system": EventType.SYSTEM_PROMPT,
    "user": EventType.USER_MESSAGE,
    "assistant": EventType.ASSISTANT_MESSAGE,
    "tool": EventType.TOOL_RESULT,
}
ROLE_BY_EVENT = {v: k for k, v in EVENT_BY_ROLE.items()}
#: Event types that are a chat message (a tool invocation travels inside its answer).
MESSAGE_TYPES = frozenset(EVENT_BY_ROLE.values())

MAX_SESSIONS = 1_024
MAX_KEYS_PER_SESSION = 50_000
#: Tool invocations read back from the store to parent results whose call came earlier.
RECALLED_CALLS = 200


def canonical_role(role: str, default: str | None = None) -> str:
    """``role`` as one of system / user / assistant / tool (aliases folded)."""
    r = ROLE_ALIASES.get(role, role)
    if r in EVENT_BY_ROLE:
        return r
    if default is not None:
        return default
    raise ValueError(f"unknown role {role!r}: expected user, assistant, system or tool")


def digest(text: str) -> str:
    """A short digest of a message's text (an occurrence key, an answer's lookup: one
    message asks up to three times, and a short text is remembered)."""
    return _short_digest(text) if len(text) <= DIGESTS_KEPT_UP_TO else _digest(text)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


#: Texts up to this many characters have their digest remembered (4,096 of them).
DIGESTS_KEPT_UP_TO = 2_048
_short_digest = functools.lru_cache(maxsize=4_096)(_digest)


def scoped(scope: str | None, key: str) -> str:
    return f"{scope}:{key}" if scope else key


def tool_call_key(tool_call_id: str, owner: str | None = None) -> str:
    return f"tool_call:{owner}:{tool_call_id}" if owner else f"tool_call:{tool_call_id}"


def tool_result_key(tool_call_id: str, owner: str | None = None) -> str:
    return f"tool_result:{owner}:{tool_call_id}" if owner else f"tool_result:{tool_call_id}"


def args_text(args: object) -> str:
    """Tool arguments as the text a model reads (JSON unless already text)."""
    if isinstance(args, str):
        return args
    return json.dumps(args, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class ToolCall:
    """One tool call an answer asks for."""

    id: str | None
    name: str
    args: object = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name, "args": self.args}


@dataclass(slots=True)
class Message:
    """A chat message in BeeWeave's neutral form: what an integration converts into.

    ``id`` is the framework's own id of the message (it keys the event); ``stored`` the
    event a message was rebuilt from (BeeWeave handed it out: not new) and
    ``assembled`` marks such a message — with ``stored`` ``None`` for a synthetic
    block that stands for no event.  ``payload`` (and ``extras``) is what the event
    keeps besides the text so the framework can rebuild the message exactly; ``value``
    a tool's structured output (stored in canonical form instead of ``content``).
    """

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    id: str | None = None
    stored: str | None = None
    assembled: bool = False
    payload: Mapping[str, object] = field(default_factory=dict)
    value: object = None
    #: More of ``payload``, computed only if the message becomes a new event (a prompt
    #: re-sends the whole conversation; most of it is known already).
    extras: Callable[[], Mapping[str, object]] | None = None

    def __post_init__(self) -> None:
        self.role = canonical_role(self.role)

    def event_payload(self) -> dict[str, object]:
        """The event payload: tool wiring first, the framework's extras on top."""
        out: dict[str, object] = {}
        if self.tool_calls:
            out["tool_calls"] = [c.as_dict() for c in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            if self.name:
                out["name"] = self.name
        out.update(self.payload)
        if self.extras is not None:
            out.update(self.extras())
        return out


class Occurrences:
    """How often one observer has seen each (role, text): the ``n`` of occurrence keys.

    Owned by the observer, not the writer: two observers of one conversation (a memory
    and an instrumentation, a handler and a history) each count what *they* saw, so
    both arrive at the same ``n`` for the same message.
    """

    def __init__(self) -> None:
        self._n: dict[tuple[str, str], int] = {}

    def count(self, role: str, text: str) -> None:
        """Count an earlier message toward the ``n`` of later ones."""
        k = (role, digest(text))
        self._n[k] = self._n.get(k, 0) + 1

    def take(self, role: str, text: str) -> int:
        """The ``n`` of this message (and count it)."""
        k = (role, digest(text))
        n = self._n.get(k, 0)
        self._n[k] = n + 1
        return n


class Sink(Protocol):
    """Where events go: a :class:`~beeweave_core.weave.Weave` (its bus) or a collector."""

    tenant: str

    def emit(
        self,
        type: EventType | str,
        content: Any = "",
        *,
        session_id: str,
        role: str | None = None,
        payload: Mapping[str, Any] | None = None,
        parents: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> str: ...


@dataclass
class _Thread:
    """What the writer knows of one conversation (session and scope) in this process."""

    ids: dict[str, str] = field(default_factory=dict)  # key → event id (saves hashing)
    seen: set[str] = field(default_factory=set)  # event ids already emitted or stored
    answers: dict[str, list[str]] = field(default_factory=dict)  # text digest → answers,
    # in order: an answer re-sent without the id it was recorded with is the n-th of these
    owners: dict[str, str] = field(default_factory=dict)  # tool_call_id → answer that asked
    calls: dict[str, str] = field(default_factory=dict)  # tool_call_id → its invocation
    by_name: dict[str, str] = field(default_factory=dict)  # tool name → latest invocation
    nameless: dict[tuple[str, str], int] = field(default_factory=dict)  # calls without id
    last: str | None = None  # latest message event
    last_answer: str | None = None
    results: list[str] = field(default_factory=list)  # tool results since the last answer


@dataclass
class _Walk:
    """Position while recording a list of messages: what the next message follows."""

    prev: str | None
    results: list[str]


class Transcript:
    """The one writer of messages as events (one per weave; see :func:`transcript_for`).

    Thread-safe: every write holds ``lock``.  ``store`` (optional) lets :meth:`append`
    and :func:`record_messages` read what a session already holds.
    """

    def __init__(self, sink: Sink, store: EventReader | None = None) -> None:
        self.sink = sink
        self.store = store
        self.tenant = sink.tenant
        self.lock = threading.RLock()
        self._threads: OrderedDict[tuple[str, str | None], _Thread] = OrderedDict()

    # ------------------------------------------------------------ state
    def _thread(self, session_id: str, scope: str | None) -> _Thread:
        k = (session_id, scope)
        th = self._threads.get(k)
        if th is None:
            th = self._threads[k] = _Thread()
            if len(self._threads) > MAX_SESSIONS:
                self._threads.popitem(last=False)
        return th

    def forget(self, session_id: str) -> None:
        """Drop what this process remembers of a session (it was cleared)."""
        with self.lock:
            for k in [k for k in self._threads if k[0] == session_id]:
                del self._threads[k]

    def key_id(self, session_id: str, key: str, scope: str | None = None) -> str:
        """The event id ``key`` gets in this session and scope."""
        with self.lock:
            return self._id(self._thread(session_id, scope), session_id, key, scope)

    def mark(self, session_id: str, event_id: str, scope: str | None = None) -> None:
        """Note an event recorded outside the writer as the conversation's latest."""
        with self.lock:
            th = self._thread(session_id, scope)
            th.seen.add(event_id)
            th.last = event_id

    def last(self, session_id: str, scope: str | None = None) -> str | None:
        th = self._threads.get((session_id, scope))
        return th.last if th is not None else None

    def invocation(
        self, session_id: str, call_id: str | None, scope: str | None = None
    ) -> str | None:
        """The invocation event recorded for ``call_id`` in this conversation, if any."""
        th = self._threads.get((session_id, scope))
        return th.calls.get(call_id) if th is not None and call_id else None

    def learn(
        self,
        session_id: str,
        events: Iterable[Event],
        *,
        scope: str | None = None,
        position: bool = True,
    ) -> None:
        """Take in stored events (after a restart, or written by another process):
        which answers asked for which tool calls, which invocations exist and — with
        ``position`` — where the conversation stands."""
        with self.lock:
            th = self._thread(session_id, scope)
            for ev in events:
                th.seen.add(ev.id)
                self._learn_one(th, ev, position)

    @staticmethod
    def _learn_one(th: _Thread, ev: Event, position: bool) -> None:
        if ev.type == EventType.TOOL_INVOCATION:
            cid = ev.payload.get("tool_call_id")
            if cid:
                th.calls[str(cid)] = ev.id
            return
        for tc in ev.payload.get("tool_calls") or ():
            if isinstance(tc, Mapping) and tc.get("id"):
                th.owners[str(tc["id"])] = ev.id
        if position and ev.type in MESSAGE_TYPES:
            _advance(th, ev.type, ev.id)

    # ------------------------------------------------------------ keys
    def _key(self, th: _Thread, m: Message, occ: Occurrences) -> tuple[str | None, str | None]:
        """(key, an event this message already is) by the rules in the module docstring."""
        if m.role == "tool":
            if m.tool_call_id:
                return tool_result_key(m.tool_call_id, th.owners.get(m.tool_call_id)), None
            inv = th.by_name.get(m.name or "")
            if inv is not None:
                return f"tool_result:{inv}", None
        if m.id:
            return f"msg:{m.id}", None
        n = occ.take(m.role, m.content)
        if m.role == "assistant":
            answers = th.answers.get(digest(m.content))
            if answers and n < len(answers):
                return None, answers[n]
        return f"msg:{m.role}:{digest(m.content)}:{n}", None

    def _id(self, th: _Thread, session_id: str, key: str, scope: str | None) -> str:
        eid = th.ids.get(key)
        if eid is None:
            if len(th.ids) > MAX_KEYS_PER_SESSION:
                th.ids.clear()
            eid = th.ids[key] = event_id_for(self.tenant, session_id, scoped(scope, key))
        return eid

    @staticmethod
    def _scope_for(m: Message, scope: str | None) -> str | None:
        return None if m.role == "system" else scope

    # ------------------------------------------------------------ parents
    def _parents(
        self, th: _Thread, m: Message, walk: _Walk, session_id: str, scope: str | None
    ) -> tuple[str, ...]:
        if m.role == "tool":
            return self._call_of(th, m, session_id, scope)
        if m.role == "assistant":
            if walk.results:
                return tuple(walk.results)
            before = walk.prev or th.last
            return (before,) if before else ()
        return ()

    def _call_of(
        self, th: _Thread, m: Message, session_id: str, scope: str | None
    ) -> tuple[str, ...]:
        cid = m.tool_call_id
        if not cid:
            inv = th.by_name.get(m.name or "")
            return (inv,) if inv else ()
        inv = th.calls.get(cid)
        if inv is None:  # not seen yet: the id its invocation gets
            inv = self._id(th, session_id, tool_call_key(cid, th.owners.get(cid)), scope)
        return (inv,)

    # ------------------------------------------------------------ writes
    def message(
        self,
        session_id: str,
        message: Message,
        *,
        scope: str | None = None,
        key: str | None = None,
        parents: Sequence[str] | None = None,
        occurrences: Occurrences | None = None,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        """Record one message (an answer also records its tool calls); returns its id.

        ``key`` overrides the scheme when the caller has a stronger identity (a run
        id); ``parents`` overrides the rules (a model call the answer came from).
        """
        occ = occurrences if occurrences is not None else Occurrences()
        with self.lock:
            th = self._thread(session_id, scope)
            walk = _Walk(None, list(th.results))
            eid = self._one(th, session_id, message, walk, occ, scope, key, parents, meta, source)
        return eid or ""

    def record(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        scope: str | None = None,
        occurrences: Occurrences | None = None,
        prev: str | None = None,
        key: str | None = None,
        parents: Sequence[str] | None = None,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> list[str | None]:
        """Event ids of ``messages`` in order (``None`` for synthetic blocks), recording
        the ones not seen before.  ``messages`` may be a whole conversation re-sent:
        what is known maps to its event and is not written again."""
        occ = occurrences if occurrences is not None else Occurrences()
        out: list[str | None] = []
        with self.lock:
            th = self._thread(session_id, scope)
            fresh = prev is None or prev == th.last
            walk = _Walk(prev, list(th.results) if fresh else [])
            for m in messages:
                eid = self._one(th, session_id, m, walk, occ, scope, key, parents, meta, source)
                out.append(eid)
                if eid is not None:
                    _step(walk, m.role, eid)
        return out

    def _one(
        self,
        th: _Thread,
        session_id: str,
        m: Message,
        walk: _Walk,
        occ: Occurrences,
        scope: str | None,
        key: str | None,
        parents: Sequence[str] | None,
        meta: Mapping[str, Any] | None,
        source: Mapping[str, Any] | None,
    ) -> str | None:
        if m.assembled:  # handed out by BeeWeave: an occurrence, never new
            if m.stored:
                occ.count(m.role, m.content)
                th.seen.add(m.stored)
                self._own(th, m, m.stored)
            return m.stored
        known = None
        if key is None:
            key, known = self._key(th, m, occ)
        if known is not None:
            self._own(th, m, known)
            return known
        assert key is not None
        eid = self._id(th, session_id, key, self._scope_for(m, scope))
        if eid in th.seen:
            self._own(th, m, eid)
            return eid
        ps = self._parents(th, m, walk, session_id, scope) if parents is None else parents
        self._emit(th, session_id, m, eid, key, ps, scope, meta, source)
        return eid

    def _emit(
        self,
        th: _Thread,
        session_id: str,
        m: Message,
        eid: str,
        key: str,
        parents: Sequence[str],
        scope: str | None,
        meta: Mapping[str, Any] | None,
        source: Mapping[str, Any] | None,
    ) -> None:
        etype = EVENT_BY_ROLE[m.role]
        self.sink.emit(
            etype,
            m.value if m.value is not None else m.content,
            session_id=session_id,
            role=m.role,
            payload=m.event_payload(),
            parents=_unique(parents),
            meta=meta,
            source=source,
            key=scoped(self._scope_for(m, scope), key),
        )
        th.seen.add(eid)
        _advance(th, etype, eid)
        if m.role == "assistant":
            th.answers.setdefault(digest(m.content), []).append(eid)
            for call in m.tool_calls:
                if call.id:
                    th.owners[call.id] = eid
                self._tool_call(th, session_id, call, (eid,), None, scope, meta, source)

    @staticmethod
    def _own(th: _Thread, m: Message, answer_id: str) -> None:
        for call in m.tool_calls:
            if call.id:
                th.owners[call.id] = answer_id

    def tool_call(
        self,
        session_id: str,
        call: ToolCall,
        *,
        scope: str | None = None,
        parents: Sequence[str] | None = None,
        key: str | None = None,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        """Record a tool call once (keyed by its id, scoped by the answer that asked);
        without ``parents`` it hangs off that answer, else the latest one."""
        with self.lock:
            th = self._thread(session_id, scope)
            if parents is None:
                asker = (th.owners.get(call.id) if call.id else None) or th.last_answer
                parents = (asker,) if asker else ((th.last,) if th.last else ())
            return self._tool_call(th, session_id, call, parents, key, scope, meta, source)

    def _tool_call(
        self,
        th: _Thread,
        session_id: str,
        call: ToolCall,
        parents: Sequence[str],
        key: str | None,
        scope: str | None,
        meta: Mapping[str, Any] | None,
        source: Mapping[str, Any] | None,
    ) -> str:
        if call.id:
            key = tool_call_key(call.id, th.owners.get(call.id))
        elif key is None:  # no id: the n-th nameless call of this tool after that cause
            asker = parents[0] if parents else ""
            n = th.nameless[(asker, call.name)] = th.nameless.get((asker, call.name), -1) + 1
            key = f"tool_call:{asker}:{call.name}:{n}"
        eid = self._id(th, session_id, key, scope)
        if eid not in th.seen:
            self.sink.emit(
                EventType.TOOL_INVOCATION,
                args_text(call.args),
                session_id=session_id,
                role="assistant",
                parents=_unique(parents),
                meta=meta,
                source=source,
                payload={"name": call.name, "args": call.args, "tool_call_id": call.id},
                key=scoped(scope, key),
            )
            th.seen.add(eid)
        if call.id:
            th.calls[call.id] = eid
        th.by_name[call.name] = eid
        return eid

    def event(
        self,
        session_id: str,
        type_: EventType,
        content: object,
        *,
        kind: str,
        identity: str,
        scope: str | None = None,
        role: str | None = None,
        parents: Sequence[str] = (),
        payload: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> str:
        """A run event beside the messages (model call, retrieval, error), keyed by the
        same scheme: ``[scope:]kind:identity``."""
        return self.sink.emit(
            type_,
            content,
            session_id=session_id,
            role=role,
            payload=payload,
            parents=_unique(parents),
            meta=meta,
            source=source,
            key=scoped(scope, f"{kind}:{identity}"),
        )

    # ------------------------------------------------------------ appending
    def append(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> list[str | None]:
        """Add ``messages`` after what the session already holds (a chat history's or a
        memory's ``add``), reading the store so the keys survive restarts.

        Earlier id-less messages added by the same component (``source["component"]``)
        count as occurrences, deleted ones too — so words said again after a ``clear``
        get a new key; a copy another observer recorded from this very prompt does not
        count, so the key matches that observer's and the message is kept once.
        """
        if self.store is None:
            raise ValueError("append() needs a writer with a store to read the session from")
        events = self.store.timeline(session_id, include_inactive=True)
        component = (source or {}).get("component")
        occ = Occurrences()
        for ev in events:
            by_occurrence = "message_id" not in ev.payload
            if (
                ev.type in MESSAGE_TYPES
                and ev.source.get("component") == component
                and by_occurrence
            ):
                occ.count(ROLE_BY_EVENT[ev.type], ev.content)
        self.learn(session_id, events)
        return self.record(
            session_id,
            messages,
            occurrences=occ,
            meta=meta,
            source=source,
            prev=events[-1].id if events else None,
        )

    def recall_calls(self, session_id: str, call_ids: Iterable[str], scope: str | None) -> None:
        """Learn the stored invocations of ``call_ids`` (results whose call came earlier)."""
        wanted = {c for c in call_ids if c}
        if not wanted or self.store is None:
            return
        found = self.store.timeline(
            session_id, types=(EventType.TOOL_INVOCATION,), last=RECALLED_CALLS
        )
        mine = [e for e in found if str(e.payload.get("tool_call_id") or "") in wanted]
        self.learn(session_id, mine, scope=scope, position=False)


def _advance(th: _Thread, etype: EventType, eid: str) -> None:
    """Move a conversation past a message event."""
    th.last = eid
    if etype == EventType.TOOL_RESULT:
        th.results.append(eid)
    else:
        th.results = []
        if etype == EventType.ASSISTANT_MESSAGE:
            th.last_answer = eid


def _step(walk: _Walk, role: str, eid: str) -> None:
    walk.prev = eid
    if role == "tool":
        walk.results.append(eid)
    else:
        walk.results = []


def _unique(ids: Iterable[str | None]) -> tuple[str, ...]:
    if isinstance(ids, (tuple, list)) and len(ids) < 2:  # most events have one parent
        return (ids[0],) if ids and ids[0] else ()
    return tuple(i for i in dict.fromkeys(ids) if i)


# ---------------------------------------------------------------- one writer per weave
class TranscriptOwner(Protocol):
    """What owns a conversation writer: a weave builds its one :class:`Transcript` on first
    use (``Weave.transcript``), so every integration on it records through the same one."""

    @property
    def transcript(self) -> Transcript: ...


def transcript_for(weave: TranscriptOwner) -> Transcript:
    """The one writer of ``weave``: every integration on one weave shares it, so they never
    record a message twice."""
    return weave.transcript


def bus_transcript(bus: ContextBus) -> Transcript:
    """A writer whose events go through ``bus`` with the scope its store writes (as
    ``Weave.emit``), and whose tool calls are linked to the values they reuse by a
    REFERS_TO linker subscribed to that bus (what ``Weave.transcript`` is built from)."""
    bus.subscribe(ValueRefLinker(bus.store))
    return Transcript(_BusSink(bus), bus.store)


class _BusSink:
    """A capture bus as a :class:`Sink`: its ``emit``, with the write scope of its store."""

    def __init__(self, bus: ContextBus) -> None:
        self.tenant = bus.store.tenant
        self._emit = bus.emit
        self._scopes = bus.store.scopes

    def emit(self, *args: Any, meta: Mapping[str, Any] | None = None, **kw: Any) -> str:
        """The bus's ``emit``, with the scope the weave writes (as ``Weave.emit``)."""
        return self._emit(*args, meta=with_scope(meta, self._scopes), **kw)


# ---------------------------------------------------------------- OpenAI-style lists
class _Collector:
    """A sink that builds events for one ``store.append`` (spaced 1 ms apart from ``t0``)."""

    def __init__(self, tenant: str, t0: float) -> None:
        self.tenant = tenant
        self.t0 = t0
        self.events: list[Event] = []

    def emit(
        self,
        type: EventType | str,
        content: Any = "",
        *,
        session_id: str,
        role: str | None = None,
        payload: Mapping[str, Any] | None = None,
        parents: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> str:
        eid = event_id_for(self.tenant, session_id, key) if key else new_event_id()
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        self.events.append(
            Event(
                id=eid,
                tenant=self.tenant,
                session_id=session_id,
                type=EventType(type),
                role=role,
                content=text,
                payload=dict(payload or {}),
                ts=self.t0 + len(self.events) * 1e-3,
                parents=tuple(parents),
                meta=dict(meta or {}),
                source=dict(source or {}),
            )
        )
        return eid


def from_openai(message: Mapping[str, Any], index: int = 0) -> Message:
    """An OpenAI-style (or LangChain tool-call shaped) message dict as a :class:`Message`."""
    if not isinstance(message, Mapping):
        raise TypeError(f"message {index} is {type(message).__name__}, expected a dict with 'role'")
    role = str(message.get("role") or "")
    try:
        role = canonical_role(role)
    except ValueError:
        raise ValueError(f"message {index}: unknown role {role!r}") from None
    content = message.get("content")
    if not isinstance(content, str):
        content = "" if content is None else json.dumps(content, ensure_ascii=False)
    calls = tuple(_openai_call(c, j) for j, c in enumerate(message.get("tool_calls") or ()))
    tcid = message.get("tool_call_id")
    return Message(
        role=role,
        content=content,
        tool_calls=calls,
        name=message.get("name"),
        tool_call_id=str(tcid) if tcid is not None else None,
    )


def _openai_call(call: Mapping[str, Any], j: int) -> ToolCall:
    fn = call.get("function")
    if isinstance(fn, Mapping):
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) and raw else (raw or {})
        except ValueError:
            args = raw
        return ToolCall(str(call.get("id") or f"call_{j}"), str(fn.get("name") or "tool"), args)
    args = call.get("args", call.get("arguments", {}))
    return ToolCall(str(call.get("id") or f"call_{j}"), str(call.get("name") or "tool"), args)


class Capturing(Protocol):
    """What :func:`record_messages` sends a conversation through: a weave (its bus)."""

    store: EventGraph
    bus: ContextBus

    def flush(self, timeout: float = ..., wait_index: bool = ...) -> bool: ...


def record_messages(
    target: Capturing | EventStore,
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    key_prefix: str | None = None,
    ts: float | None = None,
    scope: str | None = None,
) -> list[str]:
    """Store an OpenAI-style conversation as events; returns the event ids in order.
    ``scope``: their business line (default: the writer's one scope; see ``scopes.py``).

    ``target`` is a :class:`~beeweave_core.Weave` (events go through its capture bus)
    or an :class:`EventStore` (appended at once).  ``key_prefix`` scopes the keys, so
    recording the same transcript twice with it stores it once; without it every call
    is a new conversation.  Results whose calls were recorded by an earlier call are
    wired to those invocations.
    """
    converted = [from_openai(m, i) for i, m in enumerate(messages)]
    weave: Capturing | None
    store: EventGraph
    weave, store = (None, target) if isinstance(target, EventStore) else (target, target.store)
    sink = _Collector(store.tenant, ts if ts is not None else time.time())
    writer = Transcript(sink, store)
    prefix = key_prefix or f"r-{uuid.uuid4().hex}"
    asked = {c.id for m in converted for c in m.tool_calls}
    earlier = {m.tool_call_id for m in converted if m.tool_call_id} - asked
    if earlier and weave is not None:
        weave.flush()  # the earlier calls may still be on the bus
    writer.recall_calls(session_id, earlier, prefix)
    meta = {k: v for k, v in (("user_id", user_id), ("agent_id", agent_id)) if v}
    meta = dict(with_scope(meta, store.scopes, scope) or {})
    src = {"framework": "beeweave", "via": "record_messages"}
    writer.record(session_id, converted, scope=prefix, meta=meta, source=src)
    if weave is None:
        store.append(sink.events)
    else:
        for ev in sink.events:
            weave.bus.submit(ev)
    return [ev.id for ev in sink.events]
