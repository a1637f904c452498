"""Long-term items (LangGraph's ``BaseStore`` data) as memory events plus a current-version index.

Every ``put`` is a new ``memory`` event in the event graph — in the item's session
``store:["ns", …]:key``, with ``{namespace, key, value}`` in its payload —
that SUPERSEDES the previous version, which is invalidated; ``delete`` invalidates
the current one.  So an item's history, provenance and semantic recall are the event
graph's.  What the graph cannot do quickly — "the current value of (namespace, key)",
"all items under this prefix" — a small per-backend :class:`ItemIndex` does: one row
per live item pointing at its current event, with the value inline for reads.

Writes go to the store synchronously (a ``get`` right after ``put`` sees it; nothing
waits in the capture bus) and are handed to the weave's vector indexer directly.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from beeweave_core.events import EdgeType, Event, EventType, new_event_id
from beeweave_core.payloads import decode_payload, dumps, to_jsonable
from beeweave_core.scopes import META_KEY, refuse, visible, write_scope
from beeweave_core.store import ITEM_SESSION_PREFIX as ITEM_SESSION_PREFIX  # its home: store.py
from beeweave_core.store import Erasure, EventGraph, EventReader, SessionDirectory

if TYPE_CHECKING:
    from beeweave_core.index.base import Embedder

T = TypeVar("T")

#: Joins namespace labels in the index (labels may not contain it).
NS_SEP = "\x1f"
#: Session ids are capped at 512 characters by the event stores.
MAX_SESSION_CHARS = 400
#: Payload key that marks a memory event as a store item.
ITEM_KEY = "lg_store"
SOURCE = {"framework": "langgraph", "component": "store"}
#: Payload key of the vectors the store's own embeddings made for a version.
VECTORS_KEY = "item_vectors"
#: Sessions holding store items start with this (kept out of session listings).
#: First label of the namespace of a user's items (see :func:`user_namespace`).
USERS = "users"
#: Seconds a search waits for the items' vectors (InMemoryStore embeds on put).
ITEM_INDEX_WAIT = 30.0


def ns_path(namespace: Sequence[str]) -> str:
    """The index form of a namespace; a bad label is a ``ValueError`` saying which."""
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise ValueError(f"namespace labels must be non-empty strings, got {label!r}")
        if NS_SEP in label:
            raise ValueError(f"namespace label {label!r} contains the reserved character \\x1f")
    return NS_SEP.join(namespace)


def ns_from_path(path: str) -> tuple[str, ...]:
    return tuple(path.split(NS_SEP)) if path else ()


def session_for(namespace: Sequence[str], key: str) -> str:
    """The event-graph session holding one item's versions: ``store:["a","b"]:key``.

    One session per item, not per namespace: recall treats a session as a
    conversation (an event is found through its neighbour's words too), and
    unrelated items must not lend each other matches.  Over-long names are hashed.
    """
    sid = f"{ITEM_SESSION_PREFIX}{json.dumps(list(namespace), ensure_ascii=False)}:{key}"
    if len(sid) <= MAX_SESSION_CHARS:
        return sid
    digest = hashlib.sha256(sid.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{sid[: MAX_SESSION_CHARS - 40]}…#{digest}"


def session_prefix(namespace: Sequence[str]) -> str:
    """The start of every item session under ``namespace`` (itself and deeper ones): the
    namespace's JSON without its closing bracket, so ``("users", "u1")`` does not reach
    ``("users", "u10")``."""
    return f"{ITEM_SESSION_PREFIX}{json.dumps(list(namespace), ensure_ascii=False)[:-1]}"


def user_namespace(user_id: str) -> tuple[str, str]:
    """The namespace of a user's items, ``("users", user_id)``: ``purge(user_id=)`` erases
    every item under it (the common LangGraph layout; other layouts purge per key)."""
    return (USERS, user_id)


class NamespaceEraser(SessionDirectory, Erasure, Protocol):
    """What a purge of a namespace asks of the store: the sessions of its items, and
    erasing them."""


def purge_namespace(
    store: NamespaceEraser, index: ItemIndex, namespace: Sequence[str], *, tombstone: bool = True
) -> list[str]:
    """Erase every item under ``namespace``, every version, deleted and expired ones too:
    the pointers first (they hold the value), then the items' sessions.  Returns the
    event ids deleted (the vectors to drop)."""
    for row in list(index.scan(ns_path(namespace), now=-math.inf, scopes=store.scopes)):
        index.remove(row.path, row.key)
    gone: list[str] = []
    for sid in store.session_ids_starting(session_prefix(namespace)):
        gone += store.purge(session_id=sid, tombstone=tombstone)
    return gone


def encode_value(value: Mapping[str, Any]) -> str:
    """Canonical JSON (``payloads`` rules: datetimes, bytes … kept recoverably)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"an item value must be a dict, got {type(value).__name__}")
    return dumps(to_jsonable(dict(value)))


def decode_value(text: str) -> dict[str, Any]:
    return decode_payload(json.loads(text))


@dataclass(frozen=True, slots=True)
class ItemRow:
    """The current version of one item."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    event_id: str
    created_at: float
    updated_at: float
    expires_at: float | None = None
    ttl_minutes: float | None = None
    #: The item's scope (``None``: unscoped; see ``scopes.py``).
    scope: str | None = None

    @property
    def path(self) -> str:
        return ns_path(self.namespace)


@dataclass(frozen=True, slots=True)
class Found:
    """One search result: the item, how similar it is to the query, where recall ranked it."""

    row: ItemRow
    #: Cosine similarity of the query and the item's text, in [-1, 1] (None: no query,
    #: or the item is not indexed) — what LangGraph's ``SearchItem.score`` is.
    score: float | None = None
    #: The weave's fused recall score that ordered the item (semantic + lexical; None
    #: when the store's own ``embed`` ordered by similarity, as ``InMemoryStore`` does).
    rank: float | None = None


@runtime_checkable
class ItemIndex(Protocol):
    """Current-version pointers of one tenant's items (one per backend)."""

    tenant: str

    def setup(self) -> None: ...
    def get(self, path: str, key: str, *, now: float) -> ItemRow | None: ...
    def upsert(self, row: ItemRow) -> None: ...
    def remove(self, path: str, key: str) -> None: ...
    def scan(
        self,
        prefix: str | None,
        *,
        now: float,
        limit: int | None = None,
        scopes: frozenset[str] | None = None,
    ) -> Iterator[ItemRow]: ...
    def paths(self, *, now: float, scopes: frozenset[str] | None = None) -> list[str]: ...
    def touch(self, path: str, key: str, expires_at: float) -> None: ...
    def expired(self, *, now: float, scopes: frozenset[str] | None = None) -> list[ItemRow]: ...
    def close(self) -> None: ...


# ------------------------------------------------------------------ matching
def _apply(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(arg)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"unsupported filter operator {op!r}: use $eq $ne $gt $gte $lt $lte")


def _compare(value: Any, wanted: Any) -> bool:
    """LangGraph's filter rule (``InMemoryStore``): nested dicts, lists, ``$`` operators."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_apply(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return value == wanted


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(_compare(value.get(k), v) for k, v in filter.items())


def namespace_matches(match_type: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    """A ``MatchCondition``: prefix or suffix, ``"*"`` matching any one label."""
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {match_type!r}: use 'prefix' or 'suffix'")
    return all(p == "*" or n == p for n, p in pairs)


# --------------------------------------------------------------------- store
class _ItemsHome(Protocol):
    def items(self) -> ItemIndex: ...


class _ItemIndexer(Protocol):
    """The weave's vector indexer, as items use it: told of writes, waited for by reads."""

    @property
    def embeddings(self) -> Embedder: ...
    def on_stored(self, events: list[Event]) -> None: ...
    def forget(self, event_ids: Sequence[str]) -> None: ...
    def sync(self, timeout: float = 30.0) -> bool: ...


class _Ranked(Protocol):
    @property
    def event(self) -> Event: ...
    @property
    def score(self) -> float: ...


class ItemHost(Protocol):
    """What an :class:`ItemStore` asks of its weave (a ``Weave`` is one): its events, the
    item index beside them, its indexer and redactor, purge and fused recall.  Typed here,
    so this module sits below the weave that builds item stores."""

    @property
    def store(self) -> EventGraph: ...
    @property
    def backend(self) -> _ItemsHome: ...
    @property
    def indexer(self) -> _ItemIndexer | None: ...
    def redact(self, value: T) -> T: ...
    def purge(self, *, session_id: str | None = None) -> int: ...
    def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: str,
        filters: Mapping[str, Sequence[EventType]],
        paths: Sequence[str],
    ) -> Sequence[_Ranked]: ...


class ItemStore:
    """Items of one weave's tenant: versions in the event graph, pointers in ``index``."""

    def __init__(
        self,
        weave: ItemHost,
        index: ItemIndex | None = None,
        *,
        clock: Callable[[], float] = time.time,
        embeddings: Embedder | None = None,
        dims: int | None = None,
        scope: str | None = None,
    ) -> None:
        """``clock`` is the time of writes and TTL checks (a test passes its own).

        ``embeddings`` (a LangChain ``Embeddings``; LangGraph's ``index["embed"]``) makes
        the store embed each item's texts on ``put`` — vectors kept with the version — and
        rank a query by cosine similarity, as ``InMemoryStore`` does; ``dims`` is checked
        against what it returns.  Without it, the weave's fused recall ranks and its
        embeddings give the similarity."""
        self.weave = weave
        self.events = weave.store
        self.index = index if index is not None else weave.backend.items()
        self.clock = clock
        self.embeddings = embeddings
        self.dims = dims
        #: The scope new items get unless ``put`` names one (see ``scopes.py``).
        self.scope = scope
        self._lock = threading.Lock()
        self._similar = _SimilarityCache()

    # ------------------------------------------------------------- writes
    def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        text: str = "",
        texts: Sequence[str] | None = None,
        ttl_minutes: float | None = None,
        scope: str | None = None,
    ) -> ItemRow:
        """Store a new version: a memory event that supersedes the current one.

        ``text`` is what the weave indexes; ``texts`` (default ``[text]``) what the
        store's own ``embeddings`` embed, one vector each.  ``scope``: the item's
        (default: the weave's one scope; an item of another scope is never replaced)."""
        namespace = tuple(namespace)
        path = ns_path(namespace)
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty string, got {key!r}")
        scope = write_scope(scope or self.scope, self.events.scopes)
        # redacted before anything is stored or embedded (namespace and key are ids: kept)
        redact = self.weave.redact
        value, text = redact(value), redact(text)
        texts = redact(list(texts)) if texts is not None else None
        body = encode_value(value)
        vectors = self._embed_documents(texts if texts is not None else [text] if text else [])
        now = self.clock()
        with self._lock:
            prev = self._mine(self.index.get(path, key, now=now))
            event = Event(
                id=new_event_id(),
                tenant=self.events.tenant,
                session_id=session_for(namespace, key),
                type=EventType.MEMORY,
                content=text,
                payload={ITEM_KEY: {"namespace": list(namespace), "key": key},
                         "value": json.loads(body), "kind": "item",
                         **({VECTORS_KEY: vectors} if vectors else {})},
                ts=now,
                links={EdgeType.SUPERSEDES: (prev.event_id,)} if prev else {},
                source=SOURCE, meta={META_KEY: scope} if scope else {},
            )  # fmt: skip
            self._append_version(event, namespace, key)
            if prev is not None:
                self.events.invalidate([prev.event_id], "superseded by a newer version (put)")
            row = ItemRow(
                namespace=namespace,
                key=key,
                value=decode_value(body),
                event_id=event.id,
                created_at=prev.created_at if prev else now,
                updated_at=now,
                expires_at=now + ttl_minutes * 60 if ttl_minutes is not None else None,
                ttl_minutes=ttl_minutes,
                scope=scope,
            )
            self.index.upsert(row)
        self._reindex([event], gone=[prev.event_id] if prev else [])
        return row

    def _append_version(self, event: Event, namespace: tuple[str, ...], key: str) -> None:
        """Store a version; one the store refuses as a copy of purged data (dated at or
        before the item's purge: a ``clock`` behind the wall clock) is an error, not a
        put that returns as if it were kept."""
        if event.id in self.events.append([event]).purged:
            raise ValueError(
                f"put {key!r} in {list(namespace)} is dated at or before this item's purge "
                f"(clock {event.ts:.3f}): the store refuses it as a copy of erased data"
            )

    def delete(self, namespace: Sequence[str], key: str) -> bool:
        """Invalidate the current version; False if absent.  Not an erasure: the
        versions stay in the graph for audit (:meth:`purge` erases them)."""
        path = ns_path(tuple(namespace))
        with self._lock:
            prev = self._mine(self.index.get(path, key, now=self.clock()))
            if prev is None:
                return False
            self.events.invalidate([prev.event_id], "deleted from the store")
            self.index.remove(path, key)
        self._reindex([], gone=[prev.event_id])
        return True

    def purge(self, namespace: Sequence[str], key: str) -> int:
        """Remove an item for good, every version and its vectors (``delete`` keeps
        history for audit); returns the events removed."""
        path = ns_path(tuple(namespace))
        with self._lock:
            self._mine(self.index.get(path, key, now=self.clock()))
            self.index.remove(path, key)
        return self.weave.purge(session_id=session_for(namespace, key))

    def sweep(self, now: float | None = None) -> int:
        """Delete items whose TTL ran out; returns how many."""
        now = self.clock() if now is None else now
        gone = self.index.expired(now=now, scopes=self.events.scopes)
        with self._lock:
            if gone:
                self.events.invalidate([r.event_id for r in gone], "expired (TTL)")
            for r in gone:
                self.index.remove(r.path, r.key)
        self._reindex([], gone=[r.event_id for r in gone])
        return len(gone)

    def _reindex(self, stored: list[Event], gone: list[str]) -> None:
        indexer = self.weave.indexer
        if indexer is None:
            return
        if stored:
            indexer.on_stored(stored)
        if gone:
            indexer.forget(gone)

    # -------------------------------------------------------------- reads
    def _mine(self, row: ItemRow | None) -> ItemRow | None:
        """``row`` if this weave may see it; an item of another scope is refused."""
        if row is not None and not visible(row.scope, self.events.scopes):
            refuse([row.event_id], self.events.scopes)
        return row

    def _refreshed(self, row: ItemRow, refresh: bool, now: float) -> ItemRow:
        if not refresh or row.ttl_minutes is None:
            return row
        expires = now + row.ttl_minutes * 60
        self.index.touch(row.path, row.key, expires)
        return replace(row, expires_at=expires)

    def get(
        self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = True
    ) -> ItemRow | None:
        now = self.clock()
        row = self._mine(self.index.get(ns_path(tuple(namespace)), key, now=now))
        return self._refreshed(row, refresh_ttl, now) if row is not None else None

    def search(
        self,
        prefix: Sequence[str],
        *,
        filter: Mapping[str, Any] | None = None,
        query: str | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = True,
    ) -> list[Found]:
        """Items under ``prefix`` passing ``filter``; ranked for ``query`` when given.

        Without a query: insertion order (an update keeps the item's place), as
        ``InMemoryStore``.  With one: by similarity under the store's own embeddings,
        else by the weave's fused recall (semantic + lexical); unscored items follow,
        as in LangGraph's own stores.
        """
        now = self.clock()
        path = ns_path(tuple(prefix)) or None
        # stored values hold placeholders: a filter or query naming the raw value matches them
        filter, query = self.weave.redact(filter), self.weave.redact(query)
        pushdown = offset + limit if not filter and not query else None
        rows = [
            r
            for r in self.index.scan(path, now=now, limit=pushdown, scopes=self.events.scopes)
            if matches(r.value, filter)
        ]
        if not (query and query.strip() and rows):
            found = [Found(r) for r in rows[offset : offset + limit]]
        elif self.embeddings is not None:
            found = self._by_similarity(query, rows)[offset : offset + limit]
        else:
            found = self._by_recall(query, rows, offset + limit)[offset : offset + limit]
        return [replace(f, row=self._refreshed(f.row, refresh_ttl, now)) for f in found]

    def _by_similarity(self, query: str, rows: list[ItemRow]) -> list[Found]:
        """InMemoryStore's ranking: the best cosine of the query and the item's vectors."""
        q = self._checked(self.embeddings.embed_query(query))
        stored = {
            e.id: e.payload.get(VECTORS_KEY) for e in self.events.get([r.event_id for r in rows])
        }
        found = [Found(r, _best_cosine(q, stored.get(r.event_id))) for r in rows]
        return sorted(found, key=lambda f: -2.0 if f.score is None else -f.score)

    def _by_recall(self, query: str, rows: list[ItemRow], want: int) -> list[Found]:
        ranks = self._recall(query, {r.event_id for r in rows}, want)
        rows = sorted(rows, key=lambda r: -ranks.get(r.event_id, float("-inf")))
        embeddings = getattr(self.weave.indexer, "embeddings", None)
        page = [r for r in rows[:want] if r.event_id in ranks]
        sims = self._similar.scores(embeddings, query, page, self.events) if embeddings else {}
        return [Found(r, sims.get(r.event_id), ranks.get(r.event_id)) for r in rows]

    def _embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        texts = [t for t in texts if t]
        if self.embeddings is None or not texts:
            return []
        return [self._checked(v) for v in self.embeddings.embed_documents(list(texts))]

    def _checked(self, vector: Sequence[float]) -> list[float]:
        out = [float(x) for x in vector]
        if self.dims is not None and len(out) != self.dims:
            raise ValueError(f"index dims={self.dims} but embed returned {len(out)} numbers")
        return out

    def _recall(self, query: str, live: set[str], want: int) -> dict[str, float]:
        indexer = self.weave.indexer
        if indexer is not None:  # read your writes: an item put a moment ago is found by meaning
            indexer.sync(ITEM_INDEX_WAIT)
        hits = self.weave.retrieve(
            query,
            k=max(want * 4, 20),
            scope="tenant",
            filters={"types": [EventType.MEMORY]},
            paths=("semantic", "lexical"),
        )
        return {h.event.id: h.score for h in hits if h.event.id in live}

    def list_namespaces(
        self,
        *,
        conditions: Sequence[tuple[str, Sequence[str]]] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        paths = self.index.paths(now=self.clock(), scopes=self.events.scopes)
        spaces = [ns_from_path(p) for p in paths]
        spaces = [ns for ns in spaces if all(namespace_matches(t, p, ns) for t, p in conditions)]
        if max_depth is not None:
            spaces = list({ns[:max_depth] for ns in spaces})
        return sorted(set(spaces))[offset : offset + limit]


def _best_cosine(query: Sequence[float], vectors: Any) -> float | None:
    """The highest cosine similarity of ``query`` and any of ``vectors`` (None: none)."""
    if not vectors:
        return None
    m = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    if m.ndim != 2 or m.shape[1] != q.shape[0] or not norms.any():
        return None
    sims = (m @ q) / np.where(norms == 0, 1.0, norms)
    return float(np.clip(sims.max(), -1.0, 1.0))


class _SimilarityCache:
    """Item-text vectors under the weave's embeddings, by version: a fused search reports
    cosine similarity without embedding the same version twice."""

    MAX = 4096

    def __init__(self) -> None:
        self._vectors: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def scores(
        self, embeddings: Embedder, query: str, rows: Sequence[ItemRow], events: EventReader
    ) -> dict[str, float]:
        with self._lock:
            missing = [r.event_id for r in rows if r.event_id not in self._vectors]
        if missing:
            texts = {e.id: e.content for e in events.get(missing) if e.content}
            ids = list(texts)
            vectors = embeddings.embed_documents([texts[i] for i in ids]) if ids else []
            with self._lock:
                if len(self._vectors) > self.MAX:
                    self._vectors.clear()
                self._vectors.update(zip(ids, (list(v) for v in vectors), strict=True))
        q = embeddings.embed_query(query)
        with self._lock:
            have = {r.event_id: self._vectors.get(r.event_id) for r in rows}
        out = {eid: _best_cosine(q, [v]) for eid, v in have.items() if v is not None}
        return {eid: s for eid, s in out.items() if s is not None}
