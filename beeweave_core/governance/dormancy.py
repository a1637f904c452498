"""Dormancy: a long-term memory nobody has affirmed for a long time is asked about, not assumed.

A memory of a dormant kind (preferences and facts by default) whose last affirmation
is older than ``after_days`` (180 by default) turns dormant: the working state no
longer pins it and recall no longer offers it on its own.  When the query of an
assembly shares words with it, the working state lists it under "Needs confirmation"
with its age, so the agent asks before relying on it.

*Affirmed* means: stated (the memory's own time), restated by the user (the memory
writer then adds a DERIVED_FROM edge from the memory to the new message), or confirmed
with ``weave.confirm(memory_id)``.  Being injected into a context is not an
affirmation — a pinned preference would otherwise never go dormant.  Events are
immutable, so a confirmation is recorded as a small note event (type ``warning``,
``payload.kind == "memory_confirmed"``) that the memory gains a DERIVED_FROM edge to,
exactly as a restatement would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from beeweave_core.events import Edge, EdgeType, Event, EventType, new_event_id
from beeweave_core.store import EventStore, NotFound

DAY = 86_400.0
CONFIRMED = "memory_confirmed"


@dataclass(frozen=True)
class DormancyPolicy:
    """When a memory turns dormant; ``clock`` is injectable for tests and replays."""

    after_days: float = 180.0
    kinds: frozenset[str] = frozenset({"preference", "fact"})
    clock: Callable[[], float] = field(default=time.time, compare=False)

    def __post_init__(self) -> None:
        if not self.after_days > 0:
            raise ValueError(f"after_days must be positive, got {self.after_days!r}")


def last_affirmed(store: EventStore, memory: Event) -> float:
    """The newest of the memory's own time and those of the events it was restated in."""
    edges = store.edges(event_id=memory.id, types=[EdgeType.DERIVED_FROM])
    sources = store.get([e.dst for e in edges]) if edges else []
    return max([memory.ts, *(s.ts for s in sources)])


def dormant_ages(
    store: EventStore, memories: Iterable[Event], policy: DormancyPolicy
) -> dict[str, float]:
    """memory id -> days since last affirmed, for the dormant ones among ``memories``."""
    now = policy.clock()
    cutoff = now - policy.after_days * DAY
    out: dict[str, float] = {}
    for m in memories:
        if m.ts >= cutoff or m.payload.get("kind", "fact") not in policy.kinds:
            continue  # young, or a kind that does not sleep: no lookup needed
        seen = last_affirmed(store, m)
        if seen < cutoff:
            out[m.id] = (now - seen) / DAY
    return out


def confirm(writer: EventStore, memory_id: str, *, now: float | None = None) -> str:
    """Wake a memory: record the confirmation and link the memory to it; returns the note id."""
    found = writer.get([memory_id])
    if not found or found[0].type != EventType.MEMORY:
        raise NotFound(f"no active memory {memory_id!r}")
    memory = found[0]
    note = Event(
        id=new_event_id(),
        session_id=memory.session_id,
        type=EventType.WARNING,
        role="system",
        content=f"Memory confirmed: {memory.content}",
        payload={"kind": CONFIRMED, "memory_id": memory_id},
        ts=time.time() if now is None else now,
        meta={k: v for k, v in memory.meta.items() if k in ("user_id", "scope")},
        source={"framework": "beeweave", "component": "dormancy"},
    )
    writer.append([note])
    writer.link([Edge(src=memory_id, dst=note.id, type=EdgeType.DERIVED_FROM)])
    return note.id


def needs_confirmation_text(memory: Event, age_days: float) -> str:
    return f"{memory.content} (not confirmed for {age_days:.0f} days: confirm before relying on it)"
