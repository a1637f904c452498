"""A session's active memories as the context engine keeps them between calls.

Every maintenance step needs the same few things of a session's memories: the newest of
each kind and the flagged conflicts (the working state), and the wording of turns the
memories overturned (edited out of verbatim turns, summaries rebuilt without it).  Reading
them from the store on each call would cost more with every memory stored, so a session
view (:class:`~beeweave_core.context.session_view.SessionView`) folds each memory in once
into a :class:`MemoryView` and keeps these indexes current as memories come and go.

A :class:`MemoryView` has no lock of its own: its holder's (``Views.lock``) guards it.
What it hands out of the overturned wording (:class:`Overturned`) never changes, so it
can be read after the lock is left.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from beeweave_core.events import Event


class Overturned(Mapping[str, tuple[str, ...]]):
    """An immutable map event id -> overturned wording: a ``base`` shared by many
    snapshots (never changed once made) and a small ``delta`` of later changes (an
    empty tuple there: the id is gone).  See :meth:`MemoryView.overturned`."""

    __slots__ = ("_base", "_delta")

    def __init__(self, base: Mapping[str, tuple[str, ...]], delta: Mapping[str, tuple[str, ...]]):
        self._base = base
        self._delta = delta

    def __getitem__(self, key: str) -> tuple[str, ...]:
        texts = self._delta.get(key)
        if texts is None:
            return self._base[key]
        if not texts:
            raise KeyError(key)
        return texts

    def __contains__(self, key: object) -> bool:
        delta = self._delta
        if key in delta:
            return bool(delta[key])  # type: ignore[index]
        return key in self._base

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in self._base if k not in self._delta)
        yield from (k for k, v in self._delta.items() if v)

    def __len__(self) -> int:
        return sum(1 for _k in self)

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None


@dataclass
class MemoryView:
    """One session's active memories with what each call looks them up by (see the
    module docstring); its holder folds memories in (:meth:`add`) and out (:meth:`drop`)."""

    memories: dict[str, Event] = field(default_factory=dict)  # active, oldest first
    kinds: dict[str, list[str]] = field(default_factory=dict)  # kind -> memory ids
    conflicting: list[str] = field(default_factory=list)  # memories flagged as conflicts
    #: event ids whose wording a memory overturned, in the order the memories came
    overturn_log: list[str] = field(default_factory=list)
    #: event id -> overturned wording: a base never changed once made and the changes
    #: since (see :meth:`overturned`)
    _ov_base: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _ov_delta: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _ov_snap: Overturned | None = None
    _ov_by_memory: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, ev: Event) -> None:
        """Fold in an active memory event (the holder checked its type and status)."""
        self.memories[ev.id] = ev
        self.kinds.setdefault(str(ev.payload.get("kind", "fact")), []).append(ev.id)
        if ev.payload.get("conflicts_with"):
            self.conflicting.append(ev.id)
        self._add_overturned(ev)

    def drop(self, memory_id: str) -> None:
        """Forget an active memory that stopped being one (and what it overturned); an
        id that is no active memory here is ignored."""
        if self.memories.pop(memory_id, None) is not None:
            self._drop_overturned(memory_id)

    def replaced(self) -> dict[str, tuple[str, ...]]:
        """turn id -> the turns of the memories that overturned what it said."""
        out: dict[str, list[str]] = {}
        for mid, pairs in self._ov_by_memory.items():
            mem = self.memories.get(mid)
            if mem is None:
                continue
            newer = [i for i in mem.payload.get("source_ids") or () if i != mid]
            for src, _text in pairs:
                have = out.setdefault(src, [])
                have += [i for i in newer if i not in have and i != src]
        return {k: tuple(v) for k, v in out.items() if v}

    def _add_overturned(self, memory: Event) -> None:
        pairs = [
            (src, item["text"])
            for item in memory.payload.get("overturned") or ()
            for src in item.get("sources") or ()
        ]
        if not pairs:
            return
        self._ov_by_memory[memory.id] = pairs
        for src, text in pairs:
            had = self._overturned_of(src)
            self._set_overturned(src, (*had, text))
            if text not in had:  # newly overturned (not carried over from a replaced memory)
                self.overturn_log.append(src)

    def _drop_overturned(self, memory_id: str) -> None:
        for src, text in self._ov_by_memory.pop(memory_id, ()):
            left = list(self._overturned_of(src))
            if text in left:
                left.remove(text)
            self._set_overturned(src, tuple(left))

    def _overturned_of(self, src: str) -> tuple[str, ...]:
        texts = self._ov_delta.get(src)
        return texts if texts is not None else self._ov_base.get(src, ())

    def _set_overturned(self, src: str, texts: tuple[str, ...]) -> None:
        """Change one entry: into the delta, folded into a new base once the delta
        outgrows an eighth of the base (a fold copies the base once per that many
        changes; a snapshot copies only the delta)."""
        self._ov_delta[src] = texts
        self._ov_snap = None
        if len(self._ov_delta) > max(256, len(self._ov_base) // 8):
            merged = {**self._ov_base, **self._ov_delta}
            self._ov_base = {k: v for k, v in merged.items() if v}
            self._ov_delta = {}

    def overturned(self) -> Overturned:
        """event id -> overturned wording, from the active memories (kept as memories
        come and go; immutable, so a snapshot handed out stays as it was)."""
        if self._ov_snap is None:
            self._ov_snap = Overturned(self._ov_base, dict(self._ov_delta))
        return self._ov_snap

    def newest_memories(self, n: int, kind: str) -> list[Event]:
        """The newest ``n`` active memories of ``kind``, oldest first."""
        out: list[Event] = []
        for i in reversed(self.kinds.get(kind, [])):
            m = self.memories.get(i)
            if m is not None:
                out.append(m)
                if len(out) >= n:
                    break
        return out[::-1]


def working_candidates(view: MemoryView, per_kind: int) -> list[Event]:
    """The newest memories of each kind, plus those flagged as conflicting."""
    picked: dict[str, Event] = {}
    for kind in view.kinds:
        for m in view.newest_memories(per_kind, kind):
            picked[m.id] = m
    for i in view.conflicting[-per_kind:]:
        flagged = view.memories.get(i)
        if flagged is not None:
            picked[flagged.id] = flagged
            for other in flagged.payload.get("conflicts_with") or ():
                if other in view.memories:
                    picked[other] = view.memories[other]
    return sorted(picked.values(), key=lambda m: m.seq)
