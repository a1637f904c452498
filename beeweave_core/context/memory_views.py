"""The active memories a writer compares new statements with, indexed for lookup.

Comparing each new statement with every active memory makes catching up a long
session quadratic.  :class:`ViewSet` keeps the memories in force with inverted
indexes (exact wording, tool call, term, slot term), so each comparison reads only
the memories that can match.  The answers are exactly those of a full scan: a
memory whose term set reaches Jaccard ``t`` with a set ``A`` shares at least
``ceil(t·|A|)`` of ``A``'s terms, so it holds at least one of *any*
``|A| - ceil(t·|A|) + 1`` of them; the index reads the postings of the rarest ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.events import Event
from beeweave_core.text import language as L


@dataclass
class MemoryView:
    """What the writer compares a new statement with (one active memory)."""

    event: Event
    fold: str
    terms: set[str]
    slot: set[str]
    values: set[str]
    sources: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.event.id

    @property
    def kind(self) -> str:
        return str(self.event.payload.get("kind", "fact"))

    @property
    def text(self) -> str:
        return self.event.content

    @property
    def is_artifact(self) -> bool:
        return self.kind == "artifact"

    @classmethod
    def of(cls, ev: Event) -> MemoryView:
        text = ev.content
        return cls(
            event=ev,
            fold=L.fold(text),
            terms=set(L.terms(text)),
            slot=L.slot_terms(text),
            values={L.bare_number(L.fold(v)) for v in L.key_values(text)},
            sources=list(ev.payload.get("source_ids") or ()),
        )


def tool_key(tool: object, args: object) -> str:
    """One string per (tool, arguments) pair: equal dicts give equal keys."""
    return json.dumps([tool, args], sort_keys=True, default=str)


class _Postings:
    """word → ids of the views holding it, with insertion order kept per word."""

    def __init__(self) -> None:
        self._by: dict[str, dict[str, None]] = {}

    def add(self, words: set[str], vid: str) -> None:
        for w in words:
            self._by.setdefault(w, {})[vid] = None

    def drop(self, words: set[str], vid: str) -> None:
        for w in words:
            ids = self._by.get(w)
            if ids is not None:
                ids.pop(vid, None)
                if not ids:
                    del self._by[w]

    def reaching(self, words: set[str], threshold: float) -> set[str]:
        """Ids of every view that can reach Jaccard ``threshold`` with ``words``."""
        if not words:
            return set()
        need = math.ceil(threshold * len(words) - 1e-9)
        k = max(1, len(words) - need + 1)
        rarest = sorted(words, key=lambda w: len(self._by.get(w, ())))[:k]
        out: set[str] = set()
        for w in rarest:
            out.update(self._by.get(w, ()))
        return out


class ViewSet:
    """A session's active memory views, in the order they were added, with indexes."""

    def __init__(self, views: list[MemoryView] | None = None) -> None:
        self._views: dict[str, MemoryView] = {}
        self._order: dict[str, int] = {}
        self._next = 0
        self._by_fold: dict[tuple[bool, str], dict[str, None]] = {}
        self._by_tool: dict[str, dict[str, None]] = {}
        self._terms = _Postings()
        self._slots = _Postings()
        for v in views or ():
            self.add(v)

    def __iter__(self) -> Iterator[MemoryView]:
        return iter(list(self._views.values()))

    def __len__(self) -> int:
        return len(self._views)

    def get(self, vid: str) -> MemoryView | None:
        return self._views.get(vid)

    def add(self, v: MemoryView) -> None:
        self.remove(v.id)
        self._views[v.id] = v
        self._order[v.id] = self._next
        self._next += 1
        self._by_fold.setdefault((v.is_artifact, v.fold), {})[v.id] = None
        if v.is_artifact:
            payload: dict[str, Any] = v.event.payload or {}
            if payload.get("tool") is not None:
                key = tool_key(payload.get("tool"), payload.get("args"))
                self._by_tool.setdefault(key, {})[v.id] = None
        self._terms.add(v.terms, v.id)
        self._slots.add(v.slot, v.id)

    def remove(self, vid: str) -> None:
        v = self._views.pop(vid, None)
        if v is None:
            return
        del self._order[vid]
        _drop(self._by_fold, (v.is_artifact, v.fold), vid)
        payload: dict[str, Any] = v.event.payload or {}
        if v.is_artifact and payload.get("tool") is not None:
            _drop(self._by_tool, tool_key(payload.get("tool"), payload.get("args")), vid)
        self._terms.drop(v.terms, vid)
        self._slots.drop(v.slot, vid)

    # ------------------------------------------------------------- lookups
    def same_wording(self, artifact: bool, fold: str) -> MemoryView | None:
        """The first view of the group saying ``fold`` word for word."""
        ids = self._by_fold.get((artifact, fold))
        return self._views[next(iter(ids))] if ids else None

    def last_call(self, tool: object, args: object) -> MemoryView | None:
        """The newest artifact of the same tool call."""
        ids = self._by_tool.get(tool_key(tool, args))
        return self._views[next(reversed(ids))] if ids else None

    def near_terms(self, terms: set[str], artifact: bool, threshold: float) -> list[MemoryView]:
        """Views of the group that can reach Jaccard ``threshold`` by terms, in order."""
        return self._in_order(self._terms.reaching(terms, threshold), artifact)

    def near_slot(self, slot: set[str], artifact: bool, threshold: float) -> list[MemoryView]:
        """Views of the group that can reach Jaccard ``threshold`` by slot terms."""
        return self._in_order(self._slots.reaching(slot, threshold), artifact)

    def _in_order(self, ids: set[str], artifact: bool) -> list[MemoryView]:
        views = [self._views[i] for i in sorted(ids, key=self._order.__getitem__)]
        return [v for v in views if v.is_artifact == artifact]


def _drop(index: dict[Any, dict[str, None]], key: Any, vid: str) -> None:
    ids = index.get(key)
    if ids is not None:
        ids.pop(vid, None)
        if not ids:
            del index[key]
