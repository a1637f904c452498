"""The event record: one immutable fact about what an agent run did.

Everything BeeWeave knows is an :class:`Event`.  Stores add the session order
(``seq``) and the lifecycle ``status``; nothing else about an event changes after
it is written, so a redelivered hook can be recognised by its id alone.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
import uuid
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EventType(str, Enum):
    """Kinds of events (docs/concepts.md: the event model)."""

    SYSTEM_PROMPT = "system_prompt"
    USER_MESSAGE = "user_message"
    MODEL_CALL = "model_call"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_INVOCATION = "tool_invocation"
    TOOL_RESULT = "tool_result"
    INTERNAL_THOUGHT = "internal_thought"
    RETRIEVAL = "retrieval"
    SUMMARY = "summary"
    MEMORY = "memory"
    ERROR = "error"
    CHECKPOINT = "checkpoint"
    WARNING = "warning"


class EdgeType(str, Enum):
    """Relationship types of the event graph (docs/concepts.md: the event model)."""

    NEXT = "NEXT"
    CAUSED_BY = "CAUSED_BY"
    REFERS_TO = "REFERS_TO"
    SUMMARIZES = "SUMMARIZES"
    DERIVED_FROM = "DERIVED_FROM"
    SUPERSEDES = "SUPERSEDES"


class Status(str, Enum):
    """Lifecycle of a stored event.  Only ``active`` events are read by default."""

    ACTIVE = "active"
    DELETED = "deleted"
    INVALIDATED = "invalidated"


#: Types whose loss the user would notice: never dropped or merged by the bus.
HIGH_PRIORITY_TYPES = frozenset(
    {
        EventType.SYSTEM_PROMPT,
        EventType.USER_MESSAGE,
        EventType.ASSISTANT_MESSAGE,
        EventType.TOOL_INVOCATION,
        EventType.TOOL_RESULT,
        EventType.MODEL_CALL,
        EventType.SUMMARY,
        EventType.MEMORY,
        EventType.RETRIEVAL,
        EventType.ERROR,
        EventType.CHECKPOINT,
        EventType.WARNING,
    }
)

#: What a search looks through (and what gets a vector) unless its caller names types:
#: what was said and done.  Bookkeeping is left out: an assembly's audit record (its
#: text is the query it answered: a search would find its own earlier questions), a
#: checkpoint, a model call's marker, a warning.  Named explicitly, they are searched too.
SEARCHED_TYPES = frozenset(
    {
        EventType.USER_MESSAGE,
        EventType.ASSISTANT_MESSAGE,
        EventType.TOOL_INVOCATION,
        EventType.TOOL_RESULT,
        EventType.INTERNAL_THOUGHT,
        EventType.SUMMARY,
        EventType.MEMORY,
        EventType.SYSTEM_PROMPT,
        EventType.ERROR,
    }
)

#: Label used for each type in graph stores (``:Event:ToolResult``).
TYPE_LABELS = {t: "".join(p.title() for p in t.value.split("_")) for t in EventType}

_NS = uuid.UUID("6f1c5a8e-2b7d-4c0a-9f3e-5b6a7c8d9e0f")
_NS_BYTES = _NS.bytes


@functools.lru_cache(maxsize=4_096)  # a writer checks an id, then the bus mints it again
def event_id_for(tenant: str, session_id: str, key: str) -> str:
    """Deterministic id for an event that a hook may deliver more than once.

    Framework integrations pass a key built from what identifies the hook call
    (run id, hook name, message position), so a redelivery maps to the same id and
    the store keeps one copy.  The same text said twice gets two keys, two ids.
    """
    # uuid.uuid5, spelled out: the same ids at a third of the cost (one per message seen)
    h = bytearray(hashlib.sha1(_NS_BYTES + f"{tenant}\x1f{session_id}\x1f{key}".encode()).digest())
    h[6] = (h[6] & 0x0F) | 0x50  # version 5
    h[8] = (h[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = h[:16].hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def new_event_id() -> str:
    """A fresh id for an event nobody will redeliver."""
    return str(uuid.uuid4())


class Edge(BaseModel):
    """A typed, directed link between two events of one tenant.

    Attributes:
        src: The id of the event the edge starts from.
        dst: The id of the event it points to.
        type: What the link means (caused by, refers to, summarizes ...).
        meta: Free-form details of the link.
    """

    model_config = ConfigDict(frozen=True)

    src: str
    dst: str
    type: EdgeType
    meta: dict[str, Any] = Field(default_factory=dict)


class Event(BaseModel):
    """One immutable record of something an agent run did.

    Attributes:
        id: The event's id (deterministic when emitted with a ``key``).
        tenant: The tenant the event belongs to.
        session_id: The session (thread, conversation) it happened in.
        seq: Its position in the session, given by the store (-1 before it is stored).
        type: What kind of event it is.
        role: Who produced it (``"user"``, ``"assistant"``, ``"tool"`` ...), if anyone.
        content: The text a model would read.
        payload: Structure (tool args and output, usage, model name) in BeeWeave's
            canonical JSON form (see :mod:`beeweave_core.payloads`).
        ts: When it happened, in seconds since the epoch.
        parents: The events that caused this one (CAUSED_BY edges).
        links: Other edge types, each to its target ids.
        meta: Who and where: ``user_id``, ``agent_id``, ``scope``, ``tags`` ...
        source: Where the event was captured (framework, run id, graph node ...).
        status: Its lifecycle state, set by the store.
        status_reason: Why it was deleted or invalidated, if it was.
    """

    model_config = ConfigDict(frozen=True, use_enum_values=False)

    id: str
    tenant: str = "default"
    session_id: str
    seq: int = -1
    type: EventType
    role: str | None = None
    content: str = ""
    payload: dict[Any, Any] = Field(default_factory=dict)
    ts: float = Field(default_factory=time.time)
    parents: tuple[str, ...] = ()
    links: dict[EdgeType, tuple[str, ...]] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    source: dict[str, Any] = Field(default_factory=dict)
    status: Status = Status.ACTIVE
    status_reason: str | None = None

    @property
    def time(self) -> datetime:
        """The event's time as an aware UTC datetime (``ts`` is seconds since the epoch)."""
        return datetime.fromtimestamp(self.ts, tz=timezone.utc)

    @property
    def user_id(self) -> str | None:
        """The user the event belongs to (``meta["user_id"]``; ``None``: no user)."""
        return self.meta.get("user_id")

    @property
    def agent_id(self) -> str | None:
        """The agent that produced it (``meta["agent_id"]``; ``None``: not named)."""
        return self.meta.get("agent_id")

    @property
    def scope(self) -> str | None:
        """The business line this event belongs to (``None``: unscoped; see ``scopes.py``)."""
        return self.meta.get("scope")

    @property
    def tags(self) -> list[str]:
        """The free-form labels the event was emitted with (``meta["tags"]``)."""
        return list(self.meta.get("tags", ()))

    def edge_targets(self) -> list[tuple[EdgeType, str]]:
        """(type, target) of each outgoing edge this event declares: CAUSED_BY from
        ``parents``, then ``links`` (plain pairs: a bulk write needs no model each).

        Returns:
            One ``(edge type, target id)`` pair per declared edge.
        """
        out = [(EdgeType.CAUSED_BY, p) for p in self.parents]
        for etype, targets in self.links.items():
            out.extend((EdgeType(etype), t) for t in targets)
        return out

    def edges(self) -> list[Edge]:
        """The outgoing edges this event declares (CAUSED_BY from ``parents`` + ``links``).

        Returns:
            One :class:`Edge` from this event per declared target.
        """
        return [Edge(src=self.id, dst=d, type=t) for t, d in self.edge_targets()]

    def to_record(self) -> dict[str, Any]:
        """Plain-JSON form used by export, the spool and the stores.

        Returns:
            The event's fields as JSON-ready values (enums as their strings).
        """
        return self.model_dump(mode="json")

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Event:
        """Read back what :meth:`to_record` wrote (an export, a spool line, a store row).

        Args:
            record: The event's fields.

        Returns:
            The validated event.

        Raises:
            pydantic.ValidationError: A field is missing or of the wrong type.
        """
        return cls.model_validate(record)


class SessionStats(BaseModel):
    """What a session holds, for listings and dashboards.

    Attributes:
        session_id: The session.
        events: How many events it holds.
        counts: Events per event type.
        first_ts: When its first event happened (``None``: no events).
        last_ts: When its last event happened.
        last_seq: The highest ``seq`` in it.
        tokens: The tokens of its events' content.
        user_ids: The users whose events it holds.
    """

    session_id: str
    events: int
    counts: dict[str, int]
    first_ts: float | None
    last_ts: float | None
    last_seq: int
    tokens: int
    user_ids: list[str] = Field(default_factory=list)


class AppendResult(BaseModel):
    """What one ``append`` did: new rows vs redeliveries that were already stored.

    Attributes:
        inserted: Events written now.
        duplicates: Events that were already stored (a redelivery).
        ids: The ids of the events written now.
        purged: Events refused because a purge erased them.
    """

    inserted: int = 0
    duplicates: int = 0
    ids: list[str] = Field(default_factory=list)
    #: events refused because a purge erased them (see ``beeweave_core.tombstones``)
    purged: list[str] = Field(default_factory=list)


def tool_name(ev: Event) -> str:
    """The tool a tool invocation or result names (``tool`` when it names none)."""
    p = ev.payload or {}
    return str(p.get("name") or p.get("tool") or "tool")


def tool_args(ev: Event) -> Any:
    """A tool invocation's arguments: the payload's, else its content read as JSON."""
    p = ev.payload or {}
    if "args" in p:
        return p["args"]
    try:
        return json.loads(ev.content) if ev.content else {}
    except ValueError:
        return ev.content
