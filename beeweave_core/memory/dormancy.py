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

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from beeweave_core.events import Edge, EdgeType, Event, EventType, new_event_id
from beeweave_core.store import ChangeReader, EventReader, NotFound
from beeweave_core.store_writer import StoreWriter

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


def last_affirmed(store: EventReader, memory: Event) -> float:
    """The newest of the memory's own time and those of the events it was restated in."""
    edges = store.edges(event_id=memory.id, types=[EdgeType.DERIVED_FROM])
    sources = store.get([e.dst for e in edges]) if edges else []
    return max([memory.ts, *(s.ts for s in sources)])


class Affirmations:
    """memory id -> when it was last affirmed, read once per memory.

    Every assembly asks this of each old memory of the session; reading the memory's
    edges each time would make a call's cost grow with the memories older than the
    dormancy age.  A restatement or a confirmation adds an edge from the memory, so
    an entry lives until the store reports a link from that memory
    (:meth:`~beeweave_core.store.BaseEventStore.linked_since`).
    """

    def __init__(self, store: ChangeReader, *, max_entries: int = 200_000) -> None:
        self.store = store
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._at: dict[str, float] = {}
        self._mark = store.link_changes

    def last(self, memory: Event) -> float:
        with self._lock:
            self._follow()
            at, mark = self._at.get(memory.id), self._mark
        if at is not None:
            return at
        at = last_affirmed(self.store, memory)
        with self._lock:
            self._follow()
            if self._mark == mark:  # no link made meanwhile: the answer still holds
                if len(self._at) >= self.max_entries:
                    self._at.clear()
                self._at[memory.id] = at
        return at

    def _follow(self) -> None:
        now = self.store.link_changes
        if now == self._mark:
            return
        linked = self.store.linked_since(self._mark)
        if linked is None:
            self._at.clear()
        for src in linked or ():
            self._at.pop(src, None)
        self._mark = now


def dormant_ages(
    store: EventReader,
    memories: Iterable[Event],
    policy: DormancyPolicy,
    affirmed: Callable[[Event], float] | None = None,
) -> dict[str, float]:
    """memory id -> days since last affirmed, for the dormant ones among ``memories``
    (``affirmed``: a cache of :func:`last_affirmed`, such as :class:`Affirmations`)."""
    now = policy.clock()
    cutoff = now - policy.after_days * DAY
    out: dict[str, float] = {}
    for m in memories:
        if m.ts >= cutoff or m.payload.get("kind", "fact") not in policy.kinds:
            continue  # young, or a kind that does not sleep: no lookup needed
        seen = affirmed(m) if affirmed is not None else last_affirmed(store, m)
        if seen < cutoff:
            out[m.id] = (now - seen) / DAY
    return out


def confirm(writer: StoreWriter, memory_id: str, *, now: float | None = None) -> str:
    """Wake a memory: record the confirmation and link the memory to it; returns the note id.
    The memory is read from ``writer.store``; the note goes through the writer (redacted,
    scoped, indexed like every note BeeWeave writes)."""
    found = writer.store.get([memory_id])
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
