"""``Snapshot``: what maintenance last published about one session, read by ``assemble``.

A snapshot never changes once published: the read path takes the newest one without a
lock (a dictionary read) and maintenance replaces it when a step is done.  It holds only
what maintenance derived — memories, which turns a later turn replaced, the working
state, compaction stats, the history's token count — never the turns themselves: those
are read verbatim from the store at each call, newest first and bounded by the budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from beeweave_core.context.working_state import WorkingState
from beeweave_core.events import Event
from beeweave_core.text import segment


def index_terms(text: str) -> set[str]:
    """The words recall scores on (BM25's terms, stopwords out)."""
    return {t for t in segment.tokens(text) if t not in segment.STOPWORDS}


@dataclass(frozen=True)
class Snapshot:
    """One session as maintenance last left it (see the module docstring)."""

    session_id: str
    #: the last seq maintenance has read (-1: nothing yet); newer events are the tail
    cursor: int = -1
    systems: tuple[Event, ...] = ()
    user_id: str | None = None
    #: active memories, oldest first (the working state's and dormancy's candidates)
    memories: tuple[Event, ...] = ()
    #: turn id -> ids of the later turns that gave what it said another value
    superseded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    working: WorkingState | None = None
    #: the newest tool results' ids, newest last (what the agent paid for: recall
    #: offers them after the retriever's hits)
    results: tuple[str, ...] = ()
    #: thrash level (how often compaction had to back off), capped
    level: int = 0
    #: encoding name -> tokens of the history up to ``cursor`` (as a plain buffer sends it)
    history_tokens: Mapping[str, int] = field(default_factory=dict)
    compaction: Mapping[str, object] = field(default_factory=dict)
    #: monotonic publish counter of the session (0: never maintained)
    version: int = 0

    @property
    def ready(self) -> bool:
        """Has maintenance read this session at all?"""
        return self.version > 0

    @cached_property
    def _postings(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for n, m in enumerate(self.memories):
            for t in index_terms(m.content):
                out.setdefault(t, []).append(n)
        return out

    def memories_matching(self, terms: set[str] | frozenset[str], limit: int = 64) -> list[Event]:
        """Memories sharing the most ``terms`` (newest first on ties)."""
        hits: dict[int, int] = {}
        for t in terms:
            for n in self._postings.get(t, ()):
                hits[n] = hits.get(n, 0) + 1
        best = sorted(hits, key=lambda n: (hits[n], n), reverse=True)[:limit]
        return [self.memories[n] for n in best]

    @cached_property
    def _by_id(self) -> dict[str, Event]:
        return {m.id: m for m in self.memories}

    def memories_of(self, ids: set[str] | frozenset[str]) -> list[Event]:
        """The active memories among ``ids``."""
        by_id = self._by_id
        return [by_id[i] for i in ids if i in by_id]


def empty(session_id: str) -> Snapshot:
    """The snapshot of a session maintenance has not read yet."""
    return Snapshot(session_id, working=WorkingState(session_id))


__all__ = ["Snapshot", "empty", "index_terms"]
