"""Memory the agent keeps on purpose: remember, recall, update, forget, list.

The memory writer (:mod:`beeweave_core.memory.writer`) extracts memories on its own;
these operations are what an agent calls when it *decides* something must outlive the
window.  Both write the same ``memory`` events, so recall, assembly, the audit trail and
purges treat them alike.

Memories live in *namespaces*: one per (tenant, user, scope), stored as a session named
``memory:<user>:<scope>`` so they are shared by every agent of that user and scope, and
survive every conversation.  The scope ``shared`` is the explicit namespace for
cross-agent notes: every agent reads it whatever scope it was given.  Each memory keeps
who wrote it (``meta.agent_id``) and where it came from (DERIVED_FROM edges to the
conversation turn it was taken from).

Keeping memory true over time reuses the writer's machinery: a new memory that gives
another value to a setting already remembered supersedes it (the scorer of
:mod:`beeweave_core.memory.supersession`), an update is a new version with
a SUPERSEDES edge, and nothing is ever deleted by these tools -- superseded and
forgotten memories are invalidated with a reason, kept for audit, and never recalled.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, Field, ValidationError

from beeweave_core.errors import invalid_line, shown
from beeweave_core.events import Edge, EdgeType, Event, EventType, Status, new_event_id
from beeweave_core.memory.kinds import KINDS
from beeweave_core.memory.supersession import Index, prepare
from beeweave_core.ranking import HALF_LIFE_DAYS
from beeweave_core.scopes import META_KEY as SCOPE_KEY
from beeweave_core.scopes import ScopeError, derived, write_scope
from beeweave_core.text import language as L
from beeweave_core.tokens import DEFAULT_MODEL, TokenCounter

if TYPE_CHECKING:
    from beeweave_core.retrieval import Hit
    from beeweave_core.store_writer import StoreWriter
    from beeweave_core.weave import Weave

#: The namespace every agent reads: notes one agent leaves for the others.
SHARED_SCOPE = "shared"
DEFAULT_SCOPE = "default"
NAMESPACE_PREFIX = "memory:"
#: A memory is a statement, not a document (files go through ``memory_files``).
MAX_MEMORY_CHARS = 4000
DEFAULT_BUDGET_TOKENS = 400
#: Seconds a recall waits for the vector index to embed recent memories: an agent that
#: just remembered something expects to find it (read your writes).
RECALL_INDEX_WAIT = 15.0
_SCOPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SOURCE = {"framework": "beeweave", "component": "memory_tools"}


class OpsOptions(TypedDict, total=False):
    """Keyword options of :class:`MemoryOps` (for the framework tool factories)."""

    user_id: str | None
    agent_id: str | None
    scope: str
    budget_tokens: int
    model: str | None


Kind = Literal["fact", "decision", "preference", "constraint", "artifact"]


class MemoryOpError(ValueError):
    """A memory operation was asked something it cannot do; the message says why."""


def check_scope(scope: str) -> str:
    if not isinstance(scope, str) or not _SCOPE_RE.match(scope):
        raise MemoryOpError(
            f"bad scope {shown(scope)}: use 1-64 letters, digits, '_', '.', '-' "
            "(starting with a letter or digit)"
        )
    return scope


def namespace(user_id: str | None, scope: str) -> str:
    """The session that holds the memories of ``user_id`` (or the tenant) in ``scope``."""
    return f"{NAMESPACE_PREFIX}{user_id or '~'}:{check_scope(scope)}"


def is_namespace(session_id: str) -> bool:
    return session_id.startswith(NAMESPACE_PREFIX)


def scope_of(session_id: str) -> str:
    return session_id.rsplit(":", 1)[-1]


# ------------------------------------------------------------------ tool arguments
class RememberArgs(BaseModel):
    """Store a fact, decision, preference or constraint worth keeping across sessions."""

    text: str = Field(description="The statement to keep, self-contained (who, what, values).")
    kind: Kind = Field("fact", description="fact, decision, preference, constraint or artifact.")
    tags: list[str] = Field(default_factory=list, description="Optional labels for filtering.")
    scope: str | None = Field(None, description="Namespace; default: the agent's scope.")
    shared: bool = Field(False, description="Write to the shared namespace every agent reads.")


class RecallArgs(BaseModel):
    """Find remembered memories relevant to a query (by meaning and by exact words)."""

    query: str = Field(description="What to look for.")
    k: int = Field(5, ge=1, le=20, description="How many memories at most.")
    scope: str | None = Field(None, description="Namespace; default: the agent's scope.")


class UpdateArgs(BaseModel):
    """Replace a memory with a corrected version (the old one is kept for audit only)."""

    memory_id: str = Field(description="Id of the memory to replace (from recall or list).")
    text: str = Field(description="The corrected statement, in full.")
    reason: str | None = Field(None, description="Why it changed.")


class ForgetArgs(BaseModel):
    """Stop using a memory that is wrong or obsolete (kept for audit, never recalled)."""

    memory_id: str = Field(description="Id of the memory to forget (from recall or list).")
    reason: str = Field(description="Why it no longer holds.")


class ListArgs(BaseModel):
    """List current memories, newest first."""

    scope: str | None = Field(None, description="Namespace; default: the agent's scope.")
    kind: Kind | None = Field(None, description="Only memories of this kind.")
    tag: str | None = Field(None, description="Only memories with this tag.")
    limit: int = Field(20, ge=1, le=100, description="How many at most.")


@dataclass(frozen=True)
class ToolSpec:
    """One operation as frameworks expose it: its name, what it is for, its arguments."""

    name: str
    description: str
    args: type[BaseModel]


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "remember",
        "Remember a fact, decision, preference or constraint for later "
        "sessions. Returns the memory id.",
        RememberArgs,
    ),
    ToolSpec(
        "recall",
        "Recall remembered memories relevant to a query, with their ids and sources.",
        RecallArgs,
    ),
    ToolSpec(
        "update_memory",
        "Correct a remembered memory: stores a new version that supersedes the old one.",
        UpdateArgs,
    ),
    ToolSpec("forget", "Forget a memory that is wrong or obsolete, with a reason.", ForgetArgs),
    ToolSpec(
        "list_memories",
        "List current memories (newest first), optionally by kind or tag.",
        ListArgs,
    ),
)


# ------------------------------------------------------------------ the operations
@dataclass
class MemoryOps:
    """The memory operations of one agent (and user) over a weave.

    ``scope`` is the namespace the agent writes to and reads from by default (the
    ``shared`` namespace is always read too).  ``budget_tokens`` bounds every result,
    counted with ``model``'s tokenizer.  ``session_of`` names the conversation a call
    belongs to, so a new memory can point at the turn it was taken from.
    ``scope_fixed``: the caller of a tool cannot pick another namespace (a server whose
    clients are not trusted with the choice): a ``scope`` argument naming another is
    refused in one line, and a memory id of another namespace is not found.
    """

    weave: Weave
    user_id: str | None = None
    agent_id: str | None = None
    scope: str = DEFAULT_SCOPE
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    model: str | None = DEFAULT_MODEL
    clock: Callable[[], float] = time.time
    scope_fixed: bool = False
    _counter: TokenCounter | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from beeweave_core.weave import require_weave  # weave.py imports this module's users

        require_weave(self.weave, "MemoryOps")
        check_scope(self.scope)
        if self.budget_tokens <= 0:
            raise ValueError(f"budget_tokens must be positive, got {self.budget_tokens!r}")

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter(self.model)
        return self._counter

    @property
    def writer(self) -> StoreWriter:
        """The weave's synchronous writer (a new memory is recallable at once, and the
        context engine's views follow what the tools invalidate); reads go to the store."""
        return self.weave.writer

    # ------------------------------------------------------------ dispatch
    def call(self, op: str, args: Mapping[str, Any], *, session_id: str | None = None) -> str:
        """Run tool ``op`` with raw ``args``; bad input comes back as one ``error:`` line,
        so a model's mistake never crashes the host agent."""
        spec = next((s for s in TOOL_SPECS if s.name == op), None)
        if spec is None:
            return f"error: unknown memory operation {shown(op)}"
        try:
            parsed = spec.args.model_validate(dict(args))
        except ValidationError as exc:
            return f"error: {op}: {invalid_line(exc)}"
        asked = parsed.scope if isinstance(parsed, RememberArgs | RecallArgs | ListArgs) else None
        if self.scope_fixed and asked is not None and asked != self.scope:
            return (
                f"error: {op}: the scope is fixed to {shown(self.scope)} here; "
                f"this call named {shown(asked)}"
            )
        try:
            return self._run(parsed, session_id)
        except (MemoryOpError, ScopeError) as exc:  # a memory of another business line
            return f"error: {exc}"

    def _run(self, a: BaseModel, session_id: str | None) -> str:
        if isinstance(a, RememberArgs):
            return self.remember(
                a.text,
                kind=a.kind,
                tags=a.tags,
                scope=a.scope,
                shared=a.shared,
                session_id=session_id,
            ).text
        if isinstance(a, RecallArgs):
            return self.recall(a.query, k=a.k, scope=a.scope).text
        if isinstance(a, UpdateArgs):
            return self.update(a.memory_id, a.text, reason=a.reason, session_id=session_id).text
        if isinstance(a, ForgetArgs):
            return self.forget(a.memory_id, a.reason).text
        assert isinstance(a, ListArgs)
        return self.list(scope=a.scope, kind=a.kind, tag=a.tag, limit=a.limit).text

    # ------------------------------------------------------------ writing
    def remember(
        self,
        text: str,
        *,
        kind: str = "fact",
        tags: Sequence[str] = (),
        scope: str | None = None,
        shared: bool = False,
        source_ids: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> OpResult:
        """Store ``text``; a repeat links to the existing memory, and a new value for a
        setting already remembered supersedes the old memory."""
        text = _statement(text)
        kind = _kind(kind)
        ns = namespace(self.user_id, SHARED_SCOPE if shared else (scope or self.scope))
        sources = self.sources_for(source_ids, session_id)
        active = self._active(ns)
        same = next((m for m in active if _said(m.content) == _said(text)), None)
        if same is not None:
            if sources:
                self.writer.link(_derived(same.id, sources))
            return OpResult(f"already remembered as {same.id}: {same.content}", [same.id])
        settings = [m for m in active if "path" not in m.payload]  # files are documents
        newest = max((m.seq for m in settings), default=0)  # said right after them
        said = prepare(
            [(m.id, m.content, m.seq, True) for m in settings] + [("_new", text, newest + 1, True)]
        )
        index = Index()
        for item in said[:-1]:
            index.add(item)
        replaced = index.replaced_by(said[-1])
        mem = self.write_memory(ns, text, kind, list(tags), sources, replaced)
        for old in replaced:
            self.writer.invalidate([old], f"superseded by {mem.id}: {text[:120]}", by=mem.id)
        note = f"; supersedes {', '.join(replaced)}" if replaced else ""
        return OpResult(
            f"remembered {mem.id} ({kind}, scope {scope_of(ns)}){note}", [mem.id, *replaced]
        )

    def update(
        self,
        memory_id: str,
        text: str,
        *,
        reason: str | None = None,
        kind: str | None = None,
        session_id: str | None = None,
    ) -> OpResult:
        """A new version of ``memory_id`` that SUPERSEDES it; the old one is invalidated."""
        old = self._current(memory_id)
        text = _statement(text)
        sources = [*(old.payload.get("source_ids") or ()), *self.sources_for(None, session_id)]
        mem = self.write_memory(
            old.session_id,
            text,
            _kind(kind or old.payload.get("kind", "fact")),
            _user_tags(old),
            list(dict.fromkeys(sources)),
            [old.id],
            previous=old,
        )
        why = f": {' '.join(reason.split())[:120]}" if reason else ""
        self.writer.invalidate([old.id], f"updated by {mem.id}{why}", by=mem.id)
        return OpResult(
            f"updated {old.id} -> {mem.id} (version {mem.payload['version']})", [mem.id, old.id]
        )

    def forget(self, memory_id: str, reason: str) -> OpResult:
        """Invalidate ``memory_id`` with ``reason`` (kept for audit, never recalled)."""
        reason = " ".join(str(reason or "").split())
        if not reason:
            raise MemoryOpError("forget needs a reason (why the memory no longer holds)")
        old = self._current(memory_id)
        self.writer.invalidate([old.id], f"forgotten: {reason[:200]}")
        return OpResult(f"forgot {old.id}: {old.content[:80]}", [old.id])

    def write_memory(
        self,
        ns: str,
        text: str,
        kind: str,
        tags: list[str],
        sources: list[str],
        supersedes: Sequence[str],
        *,
        previous: Event | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> Event:
        """Append one memory event (synchronously, so it is recallable at once)."""
        version = int(previous.payload.get("version", 1)) + 1 if previous is not None else 1
        body: dict[str, Any] = {
            "kind": kind,
            "version": version,
            "source_ids": sources,
            "values": L.key_values(text),
            "half_life_days": HALF_LIFE_DAYS.get(kind, 30.0),
            "scope": scope_of(ns),
            "extractor": "tool",
            **(payload or {}),
        }
        if previous is not None:
            body["previous"] = previous.id
        meta: dict[str, Any] = {"tags": list(dict.fromkeys(["memory", kind, *tags]))}
        if self.user_id:
            meta["user_id"] = self.user_id
        if self.agent_id:
            meta["agent_id"] = self.agent_id
        # a memory is of its sources' scope (never of two), else the writer's (scopes.py)
        store = self.weave.store
        origin = derived(e.scope for e in store.get(sources, include_inactive=True))
        scope = origin if origin is not None else write_scope(None, store.scopes)
        if scope is not None:
            meta[SCOPE_KEY] = scope
        links: dict[EdgeType, tuple[str, ...]] = {}
        if sources:
            links[EdgeType.DERIVED_FROM] = tuple(sources)
        if supersedes:
            links[EdgeType.SUPERSEDES] = tuple(supersedes)
        mem = Event(
            id=new_event_id(),
            tenant=self.weave.tenant,
            session_id=ns,
            type=EventType.MEMORY,
            role="system",
            content=text,
            payload=body,
            ts=self.clock(),
            links=links,
            meta=meta,
            source=_SOURCE,
        )
        self.writer.append([mem])
        return mem

    # ------------------------------------------------------------ reading
    def recall(self, query: str, *, k: int = 5, scope: str | None = None) -> OpResult:
        """The ``k`` memories that best match ``query`` (fused semantic + lexical search)
        in the agent's scope and the shared namespace, within the token budget."""
        if not isinstance(query, str) or not query.strip():
            raise MemoryOpError("recall needs a non-empty query")
        hits: list[Hit] = []
        config = replace(self.weave.retriever.config, index_wait=RECALL_INDEX_WAIT)
        for ns in self.readable(scope):
            hits += self.weave.retrieve(
                query,
                session_id=ns,
                scope="session",
                k=k,
                filters={"types": ["memory"]},
                paths=("semantic", "lexical", "temporal"),
                config=config,
            )
        hits.sort(key=lambda h: -h.score)
        events = [h.event for h in hits[:k]]
        if not events:
            return OpResult(f"no memories match {query[:80]!r}", [])
        return self._render(f"{len(events)} memories for {query[:80]!r}:", events)

    def list(
        self,
        *,
        scope: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        limit: int = 20,
    ) -> OpResult:
        """Current memories of the agent's scope and the shared namespace, newest first."""
        found = [m for ns in self.readable(scope) for m in self._active(ns)]
        found = [
            m
            for m in found
            if (kind is None or m.payload.get("kind") == kind) and (tag is None or tag in m.tags)
        ]
        found.sort(key=lambda m: -m.ts)
        if not found:
            return OpResult("no memories", [])
        return self._render(f"{len(found)} memories, newest first:", found[:limit])

    def readable(self, scope: str | None = None) -> list[str]:
        """The namespaces a read covers: the scope asked for, and the shared one."""
        return list(
            dict.fromkeys(
                [
                    namespace(self.user_id, scope or self.scope),
                    namespace(self.user_id, SHARED_SCOPE),
                ]
            )
        )

    def _active(self, ns: str) -> list[Event]:
        return self.weave.store.timeline(ns, types=(EventType.MEMORY,))

    def _current(self, memory_id: str) -> Event:
        """The active memory ``memory_id`` of a namespace this agent may touch."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise MemoryOpError("a memory id is needed (from recall or list_memories)")
        found = self.weave.store.get([memory_id.strip()], include_inactive=True)
        mem = found[0] if found else None
        allowed = (
            set(self.readable())
            if self.scope_fixed
            else {namespace(self.user_id, scope_of(mem.session_id))}
            if mem
            else set()
        )
        if mem is None or mem.type != EventType.MEMORY or mem.session_id not in allowed:
            raise MemoryOpError(f"no memory {shown(memory_id)} (use recall or list_memories)")
        if mem.status != Status.ACTIVE:
            newer = [
                e.src
                for e in self.weave.store.edges(
                    event_id=mem.id, types=[EdgeType.SUPERSEDES], direction="in"
                )
            ]
            hint = f"; current version: {newer[-1]}" if newer else ""
            raise MemoryOpError(
                f"memory {mem.id} is no longer current "
                f"({mem.status_reason or mem.status.value}){hint}"
            )
        return mem

    def sources_for(self, source_ids: Sequence[str] | None, session_id: str | None) -> list[str]:
        """What a memory is derived from: the ids given, else the latest user turn of the
        conversation the call came from (what the agent was told)."""
        if source_ids:
            return [str(s) for s in source_ids]
        if not session_id or is_namespace(session_id):
            return []
        self.weave.flush(5.0)
        turns = self.weave.store.timeline(session_id, last=50, types=(EventType.USER_MESSAGE,))
        return [turns[-1].id] if turns else []

    def _render(self, header: str, events: Sequence[Event]) -> OpResult:
        """One line per memory, citing its id, the whole within the token budget."""
        footer = f"({len(events)} more not shown: token budget)"
        budget = self.budget_tokens - self.counter.count_text(footer) - 1
        lines = [header]
        used = self.counter.count_text(header)
        for m in events:
            line = _line(m)
            cost = self.counter.count_text(line) + 1
            if used + cost > budget:
                room = budget - used - 2
                if len(lines) == 1 and room > 8:  # always show something of the best one
                    lines.append(self.counter.truncate_to_tokens(line, room) + " …")
                break
            lines.append(line)
            used += cost
        ids = [m.id for m in events[: len(lines) - 1]]
        if len(ids) < len(events):
            lines.append(f"({len(events) - len(ids)} more not shown: token budget)")
        return OpResult("\n".join(lines), ids)


@dataclass
class OpResult:
    """What an operation did: the short text a model reads, and the memory ids it cites."""

    text: str
    ids: list[str]


def _line(m: Event) -> str:
    p = m.payload
    bits = [str(p.get("kind", "fact")), f"scope {scope_of(m.session_id)}"]
    if int(p.get("version", 1)) > 1:
        bits.append(f"v{p['version']}")
    if m.agent_id:
        bits.append(f"by {m.agent_id}")
    sources = list(p.get("source_ids") or ())[:2]
    if sources:
        bits.append("from " + ", ".join(sources))
    label = f"{p['path']}: " if p.get("path") else ""
    text = " ".join(m.content.split())
    return f"- [{m.id}] ({'; '.join(bits)}) {label}{text}"


def checked_text(text: str, limit: int, what: str) -> str:
    """``text`` if it can be stored as ``what``: no NUL, at most ``limit`` characters."""
    if "\x00" in text:
        raise MemoryOpError(f"{what} contains a NUL character")
    if len(text) > limit:
        raise MemoryOpError(f"{what} is {len(text):,} characters; the limit is {limit:,}")
    return text


def _statement(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise MemoryOpError("a memory needs non-empty text")
    return checked_text(text.strip(), MAX_MEMORY_CHARS, "memory text (one statement per memory)")


def _said(text: str) -> str:
    """What a statement says, for spotting a repeat: case, spacing, end punctuation aside."""
    return L.fold(text).rstrip(" .!;。！；")


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise MemoryOpError(f"unknown kind {shown(kind)}; use one of {', '.join(KINDS)}")
    return kind


def _user_tags(m: Event) -> list[str]:
    kind = m.payload.get("kind")
    return [t for t in m.tags if t not in ("memory", kind)]


def _derived(memory_id: str, sources: Sequence[str]) -> list[Edge]:
    return [Edge(src=memory_id, dst=s, type=EdgeType.DERIVED_FROM) for s in sources]


__all__ = [
    "DEFAULT_SCOPE",
    "SHARED_SCOPE",
    "TOOL_SPECS",
    "ForgetArgs",
    "ListArgs",
    "MemoryOpError",
    "MemoryOps",
    "OpResult",
    "OpsOptions",
    "RecallArgs",
    "RememberArgs",
    "ToolSpec",
    "UpdateArgs",
    "namespace",
]
