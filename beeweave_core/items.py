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
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from beeweave_core.events import EdgeType, Event, EventType, new_event_id
from beeweave_core.payloads import decode_payload, dumps, to_jsonable

if TYPE_CHECKING:
    from beeweave_core.weave import Weave

#: Joins namespace labels in the index (labels may not contain it).
NS_SEP = "\x1f"
#: Session ids are capped at 512 characters by the event stores.
MAX_SESSION_CHARS = 400
#: Payload key that marks a memory event as a store item.
ITEM_KEY = "lg_store"
SOURCE = {"framework": "langgraph", "component": "store"}
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
    sid = f"store:{json.dumps(list(namespace), ensure_ascii=False)}:{key}"
    if len(sid) <= MAX_SESSION_CHARS:
        return sid
    digest = hashlib.sha256(sid.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{sid[: MAX_SESSION_CHARS - 40]}…#{digest}"


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

    @property
    def path(self) -> str:
        return ns_path(self.namespace)


@runtime_checkable
class ItemIndex(Protocol):
    """Current-version pointers of one tenant's items (one per backend)."""

    tenant: str

    def setup(self) -> None: ...
    def get(self, path: str, key: str, *, now: float) -> ItemRow | None: ...
    def upsert(self, row: ItemRow) -> None: ...
    def remove(self, path: str, key: str) -> None: ...
    def scan(
        self, prefix: str | None, *, now: float, limit: int | None = None
    ) -> Iterator[ItemRow]: ...
    def paths(self, *, now: float) -> list[str]: ...
    def touch(self, path: str, key: str, expires_at: float) -> None: ...
    def expired(self, *, now: float) -> list[ItemRow]: ...
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
class ItemStore:
    """Items of one weave's tenant: versions in the event graph, pointers in ``index``."""

    def __init__(
        self,
        weave: Weave,
        index: ItemIndex | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock`` is the time of writes and TTL checks (a test passes its own)."""
        self.weave = weave
        self.events = weave.store
        self.index = index if index is not None else weave.backend.items()
        self.clock = clock
        self._lock = threading.Lock()

    # ------------------------------------------------------------- writes
    def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        text: str = "",
        ttl_minutes: float | None = None,
    ) -> ItemRow:
        """Store a new version: a memory event that supersedes the current one."""
        namespace = tuple(namespace)
        path = ns_path(namespace)
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty string, got {key!r}")
        body = encode_value(value)
        now = self.clock()
        with self._lock:
            prev = self.index.get(path, key, now=now)
            event = Event(
                id=new_event_id(),
                tenant=self.events.tenant,
                session_id=session_for(namespace, key),
                type=EventType.MEMORY,
                content=text,
                payload={ITEM_KEY: {"namespace": list(namespace), "key": key},
                         "value": json.loads(body), "kind": "item"},
                ts=now,
                links={EdgeType.SUPERSEDES: (prev.event_id,)} if prev else {},
                source=SOURCE,
            )  # fmt: skip
            self.events.append([event])
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
            )
            self.index.upsert(row)
        self._reindex([event], gone=[prev.event_id] if prev else [])
        return row

    def delete(self, namespace: Sequence[str], key: str) -> bool:
        """Invalidate the current version (history stays in the graph); False if absent."""
        path = ns_path(tuple(namespace))
        with self._lock:
            prev = self.index.get(path, key, now=self.clock())
            if prev is None:
                return False
            self.events.invalidate([prev.event_id], "deleted from the store")
            self.index.remove(path, key)
        self._reindex([], gone=[prev.event_id])
        return True

    def sweep(self, now: float | None = None) -> int:
        """Delete items whose TTL ran out; returns how many."""
        now = self.clock() if now is None else now
        gone = self.index.expired(now=now)
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
        row = self.index.get(ns_path(tuple(namespace)), key, now=now)
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
    ) -> list[tuple[ItemRow, float | None]]:
        """Items under ``prefix`` passing ``filter``; ranked by recall when ``query`` is given.

        Without a query: newest update first.  With one: the weave's fused recall
        (semantic + lexical over the items' memory events) orders the items it finds;
        the rest follow unscored, as in LangGraph's own stores.
        """
        now = self.clock()
        path = ns_path(tuple(prefix)) or None
        pushdown = offset + limit if not filter and not query else None
        rows = [
            r for r in self.index.scan(path, now=now, limit=pushdown) if matches(r.value, filter)
        ]
        ranked: list[tuple[ItemRow, float | None]] = [(r, None) for r in rows]
        if query and query.strip() and rows:
            scores = self._recall(query, {r.event_id for r in rows}, offset + limit)
            ranked.sort(key=lambda p: -scores.get(p[0].event_id, float("-inf")))
            ranked = [(r, scores.get(r.event_id)) for r, _ in ranked]
        page = ranked[offset : offset + limit]
        return [(self._refreshed(r, refresh_ttl, now), s) for r, s in page]

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
        spaces = [ns_from_path(p) for p in self.index.paths(now=self.clock())]
        spaces = [ns for ns in spaces if all(namespace_matches(t, p, ns) for t, p in conditions)]
        if max_depth is not None:
            spaces = list({ns[:max_depth] for ns in spaces})
        return sorted(set(spaces))[offset : offset + limit]
