"""A scope's vectors held in process, for exact search without a vector-store round trip.

Recall almost always asks about a few sessions (one session, or one user's), a few
thousand vectors at most.  Chroma answers such a filtered query in about 13 ms
(metadata filter, then HNSW with an allow-list); the same search as one float32
matrix product over the scope's vectors takes well under a millisecond, and is exact.
So the Chroma index keeps, per session, the vectors it has already read or written:

* filled from Chroma's stored vectors the first time a session is searched;
* appended when the index writes vectors of a session it holds, and emptied of an
  event before (and again after) the index deletes it, so what was deleted or purged
  never comes back from here;
* used only for queries that name their sessions (a tenant-wide search, or a scope
  larger than ``max_rows``, goes to Chroma's HNSW), with every other filter (user,
  agent, types, time, the reader's scopes) applied to the cached metadata inside the
  search, exactly as Chroma's ``where`` would.

Chroma stays the store of record: the cache is a copy of what this process wrote or
read, so it is only used where this process is the only writer (an embedded directory
held by its :class:`~beeweave_core.index.chroma.DirectoryLock`, or an in-memory
collection), never for a Chroma server other processes write to.

Concurrency: a fill reads Chroma outside the lock and is kept only if no write began
or ended meanwhile (a write generation counter); otherwise the query just goes to
Chroma.  Sessions not searched for longest are dropped past ``max_bytes``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from beeweave_core.index.base import IndexFilter

#: Default memory for cached vectors (about 43,000 MiniLM vectors of 384 floats).
MAX_BYTES = 64 * 1024 * 1024
#: Larger scopes are searched by the vector store's own index (also the bound on the
#: joined copies of multi-session scopes kept for the next query).
MAX_ROWS = 20_000

#: What a fill returns: per chunk its id, metadata and vector.
Rows = Sequence[tuple[str, Mapping[str, Any], Sequence[float]]]
Loader = Callable[[list[str]], Rows]


@dataclass
class _Row:
    meta: Mapping[str, Any]
    vector: np.ndarray


@dataclass(frozen=True)
class _Packed:
    """Rows of one or more sessions as arrays (never changed: rebuilt after a write)."""

    event_ids: list[str]
    matrix: np.ndarray  # (n, dim) float32
    ts: np.ndarray  # float64, NaN where unknown
    fields: dict[str, list[Any]]  # user_id, agent_id, type, scope per row

    @classmethod
    def of(cls, rows: Iterable[_Row], dim: int) -> _Packed:
        rows = list(rows)
        matrix = np.empty((len(rows), dim), dtype=np.float32)
        for i, r in enumerate(rows):
            matrix[i] = r.vector
        ts = np.array([_float(r.meta.get("ts")) for r in rows], dtype=np.float64)
        # a vector written before scopes has no "scope": a scoped reader skips it, as
        # Chroma's where does (None is never among the readable values)
        fields = {
            key: [r.meta.get(key) for r in rows] for key in ("user_id", "agent_id", "type", "scope")
        }
        return cls([str(r.meta["event_id"]) for r in rows], matrix, ts, fields)

    @classmethod
    def join(cls, parts: Sequence[_Packed], dim: int) -> _Packed:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls([], np.empty((0, dim), np.float32), np.empty(0), {})
        return cls(
            [e for p in parts for e in p.event_ids],
            np.concatenate([p.matrix for p in parts]),
            np.concatenate([p.ts for p in parts]),
            {key: [v for p in parts for v in p.fields[key]] for key in parts[0].fields},
        )

    def mask(self, flt: IndexFilter) -> np.ndarray:
        """Rows ``flt`` admits (sessions were chosen already): Chroma's ``where``, here."""
        n = len(self.event_ids)
        keep = np.ones(n, dtype=bool)
        for key, wanted in (("user_id", flt.user_id), ("agent_id", flt.agent_id)):
            if wanted is not None:
                keep &= np.fromiter((v == wanted for v in self.fields[key]), bool, n)
        if flt.types is not None:
            types = {getattr(t, "value", str(t)) for t in flt.types}
            keep &= np.fromiter((v in types for v in self.fields["type"]), bool, n)
        scopes = flt.scope_values()
        if scopes is not None:
            allowed = set(scopes)
            keep &= np.fromiter((v in allowed for v in self.fields["scope"]), bool, n)
        with np.errstate(invalid="ignore"):  # NaN (no time) fails both bounds
            if flt.since is not None:
                keep &= self.ts >= flt.since
            if flt.until is not None:
                keep &= self.ts <= flt.until
        return keep


def _float(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else float("nan")


@dataclass
class _Session:
    rows: dict[str, _Row] = field(default_factory=dict)  # chunk id -> row
    packed: _Packed | None = None


class Write:
    """What one write changes in the cache (applied when the write ends)."""

    def __init__(self) -> None:
        self.added: list[tuple[str, Mapping[str, Any], Sequence[float]]] = []
        self.removed: list[str] = []

    def add(self, rows: Rows) -> None:
        """Chunks written: (chunk id, the metadata stored with it, its vector)."""
        self.added.extend(rows)


class VectorCache:
    """Per-session copies of one collection's vectors, searched exactly in process."""

    def __init__(self, *, max_bytes: int = MAX_BYTES, max_rows: int = MAX_ROWS) -> None:
        self.max_bytes = max_bytes
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # least recent first
        self._by_event: dict[str, set[str]] = {}  # event id -> sessions holding it
        self._gen = 0  # moves when a write begins or ends
        self._writing = 0
        self._rows = 0
        self._dim: int | None = None
        self._joined: dict[tuple[str, ...], tuple[int, _Packed]] = {}
        #: Scopes found too large to hold: asked of the store without reading them again.
        self._too_large: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self.enabled = True
        #: Queries answered here (not by the store).
        self.answered = 0

    # ----------------------------------------------------------- writes
    @contextmanager
    def writing(self) -> Iterator[Write]:
        """Wrap a write to the store of record: removals apply before and after it,
        additions after it, and no fill that overlaps it is kept."""
        w = Write()
        with self._lock:
            self._gen += 1
            self._writing += 1
        ok = False
        try:
            yield w
            ok = True
        finally:
            with self._lock:
                self._gen += 1
                self._writing -= 1
                self._remove(w.removed)
                if ok:
                    self._add(w.added)
                else:  # what reached the store is unknown: those sessions reload
                    self._drop({str(meta.get("session_id")) for _, meta, _ in w.added})

    def remove_now(self, w: Write, event_ids: Iterable[str]) -> None:
        """Remove events at once (and again when ``w`` ends)."""
        ids = list(event_ids)
        w.removed.extend(ids)
        with self._lock:
            self._remove(ids)

    def clear(self) -> None:
        with self._lock:
            self._gen += 1
            self._sessions.clear()
            self._by_event.clear()
            self._joined.clear()
            self._too_large.clear()
            self._rows = 0
            self._dim = None

    def disable(self) -> None:
        """Stop using the cache (the collection was handed out: writes may bypass it)."""
        self.enabled = False
        self.clear()

    def _remove(self, event_ids: Iterable[str]) -> None:
        for eid in event_ids:
            for sid in self._by_event.pop(eid, ()):
                sess = self._sessions.get(sid)
                if sess is None:
                    continue
                gone = [cid for cid, r in sess.rows.items() if r.meta.get("event_id") == eid]
                for cid in gone:
                    del sess.rows[cid]
                self._rows -= len(gone)
                sess.packed = None
        self._joined.clear()

    def _add(self, added: Rows) -> None:
        for cid, meta, vector in added:
            sid = str(meta.get("session_id"))
            sess = self._sessions.get(sid)
            if sess is None:
                continue  # not cached: its first search reads everything from the store
            self._put(sid, sess, cid, meta, vector)
        self._joined.clear()
        self._trim()

    def _put(
        self, sid: str, sess: _Session, cid: str, meta: Mapping[str, Any], vector: Sequence[float]
    ) -> None:
        vec = np.asarray(vector, dtype=np.float32)
        if self._dim is None:
            self._dim = len(vec)
        if len(vec) != self._dim:
            raise ValueError(f"cached vectors have {self._dim} dimensions, got {len(vec)}")
        old = sess.rows.get(cid)
        if old is None:
            self._rows += 1
        elif old.meta.get("event_id") != meta["event_id"]:
            self._by_event.get(str(old.meta.get("event_id")), set()).discard(sid)
        sess.rows[cid] = _Row(meta, vec)
        sess.packed = None
        self._by_event.setdefault(str(meta["event_id"]), set()).add(sid)

    def _drop(self, sessions: Iterable[str]) -> None:
        for sid in sessions:
            sess = self._sessions.pop(sid, None)
            if sess is None:
                continue
            self._rows -= len(sess.rows)
            for r in sess.rows.values():
                self._by_event.get(str(r.meta.get("event_id")), set()).discard(sid)
        self._joined.clear()

    def _trim(self) -> None:
        """Drop the sessions searched longest ago while over ``max_bytes``."""
        width = 4 * (self._dim or 0) + 200  # the vector, and its metadata roughly
        while self._sessions and self._rows * width > self.max_bytes:
            self._drop([next(iter(self._sessions))])

    # ------------------------------------------------------------ reads
    def search(
        self, vector: Sequence[float], k: int, flt: IndexFilter, load: Loader
    ) -> list[tuple[str, float]] | None:
        """``(event_id, similarity)`` best first, one per event; ``None``: ask the store."""
        if not self.enabled or flt.session_ids is None:
            return None
        sids = tuple(sorted(set(flt.session_ids)))
        packed = self._packed(sids, load)
        if packed is None:
            return None
        self.answered += 1
        if not packed.event_ids:
            return []
        q = np.asarray(vector, dtype=np.float32)
        if self._dim is not None and len(q) != self._dim:
            return None  # the store reports the mismatch
        keep = packed.mask(flt)
        rows = np.flatnonzero(keep)
        if not len(rows):
            return []
        sims = (packed.matrix if len(rows) == len(keep) else packed.matrix[rows]) @ q
        best: dict[str, float] = {}
        for i in np.argsort(-sims, kind="stable"):
            eid = packed.event_ids[rows[i]]
            if eid not in best:
                best[eid] = float(sims[i])
                if len(best) >= k:
                    break
        return list(best.items())

    def _packed(self, sids: tuple[str, ...], load: Loader) -> _Packed | None:
        with self._lock:
            hit = self._joined.get(sids)
            if hit is not None and hit[0] == self._gen:
                for sid in sids:
                    self._sessions.move_to_end(sid)
                return hit[1]
            if sids in self._too_large:
                return None
            missing = [sid for sid in sids if sid not in self._sessions]
            gen, busy = self._gen, self._writing
        if missing and (busy or not self._fill(sids, missing, gen, load)):
            return None
        with self._lock:
            if any(sid not in self._sessions for sid in sids):
                return None  # dropped meanwhile (trimmed, or a failed write)
            if sum(len(self._sessions[s].rows) for s in sids) > self.max_rows:
                self._mark_too_large(sids)
                return None
            parts = []
            for sid in sids:
                sess = self._sessions[sid]
                self._sessions.move_to_end(sid)
                if sess.packed is None:
                    sess.packed = _Packed.of(sess.rows.values(), self._dim or 0)
                if sess.rows:
                    parts.append(sess.packed)
            joined = _Packed.join(parts, self._dim or 0)
            if len(parts) > 1:  # kept for the next query of the same scope, within bounds
                self._joined[sids] = (self._gen, joined)
                while sum(len(p.event_ids) for _, p in self._joined.values()) > self.max_rows:
                    del self._joined[next(iter(self._joined))]
            return joined

    def _fill(self, sids: tuple[str, ...], missing: list[str], gen: int, load: Loader) -> bool:
        """Read ``missing`` sessions from the store; kept only if no write overlapped."""
        rows = load(missing)
        with self._lock:
            if gen != self._gen or self._writing:
                return False
            if len(rows) > self.max_rows:
                self._mark_too_large(sids)
                return False
            for sid in missing:
                self._sessions.setdefault(sid, _Session())
            for cid, meta, vector in rows:
                sid = str(meta.get("session_id"))
                if sid in self._sessions:
                    self._put(sid, self._sessions[sid], cid, meta, vector)
            for sid in sids:  # the scope asked about is the most recent one
                if sid in self._sessions:
                    self._sessions.move_to_end(sid)
            self._joined.clear()
            self._trim()
            if any(sid not in self._sessions for sid in sids):
                self._mark_too_large(sids)  # it does not fit in max_bytes
            return True

    def _mark_too_large(self, sids: tuple[str, ...]) -> None:
        self._too_large[sids] = None
        while len(self._too_large) > 256:
            self._too_large.popitem(last=False)

    @property
    def rows(self) -> int:
        """Vectors held now."""
        return self._rows
