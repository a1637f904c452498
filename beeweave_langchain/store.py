"""``BeeWeaveStore``: LangGraph's long-term memory store on the event graph.

A thin translator over :class:`beeweave_core.items.ItemStore`: every ``put`` becomes
a ``memory`` event (a new version that SUPERSEDES the previous one), ``delete``
invalidates it (the versions stay for audit; :meth:`BeeWeaveStore.purge` erases them), and ``search(query=…)`` is the weave's fused recall (semantic +
lexical) over those events — so what an agent saves with ``store.put`` is recalled
by BeeWeave's context assembly like any other memory, with its history intact.

    with BeeWeaveStore.from_conn_string("agent.db") as store:
        graph = builder.compile(checkpointer=saver, store=store)

    store = BeeWeaveStore(weave, index={"fields": ["text"]}, ttl={"default_ttl": 60})

``index`` is LangGraph's: ``fields`` picks the text that is embedded and searched (JSON
paths; default ``["$"]``: the whole value); with ``embed`` (and ``dims``) the store
embeds each item on ``put`` with it and ranks a query by cosine similarity, as
``InMemoryStore``; without, the weave's fused recall ranks.  ``SearchItem.score`` is
always the cosine similarity in [-1, 1]; the fused recall score, when it ranked, is
``item.rank`` (a :class:`BeeWeaveSearchItem`).  Without a query, items come in
insertion order.  Item sessions (``store:…``) stay out of ``beeweave sessions``.  TTL
is in minutes, refreshed on read unless told otherwise; expired items are never
returned and are swept on writes.  :meth:`BeeWeaveStore.key_value` gives a LangChain
``BaseStore[str, V]`` (docstores, ``CacheBackedEmbeddings``) over one namespace.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore as KeyValueStore
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from beeweave_core.embedding_base import Embedder
from beeweave_core.items import Found, ItemRow, ItemStore
from beeweave_core.weave import Weave, require_weave
from beeweave_langchain.checkpoint import open_weave
from beeweave_langchain.embeddings import BeeWeaveEmbeddings

__all__ = ["BeeWeaveKeyValueStore", "BeeWeaveSearchItem", "BeeWeaveStore"]


def _time(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def _tokenized(fields: Sequence[str]) -> list[tuple[str, Any]]:
    """LangGraph's field paths, tokenized once (``"$"``, the whole value, stays as is)."""
    return [(f, f if f == "$" else tokenize_path(f)) for f in fields]


def _item(row: ItemRow) -> Item:
    return Item(
        value=row.value,
        key=row.key,
        namespace=row.namespace,
        created_at=_time(row.created_at),
        updated_at=_time(row.updated_at),
    )


class BeeWeaveSearchItem(SearchItem):
    """A ``SearchItem`` whose ``score`` is cosine similarity, plus ``rank``: the weave's
    fused recall score that ordered it (None when similarity ordered, or no query)."""

    __slots__ = ("rank",)

    def __init__(self, found: Found) -> None:
        row = found.row
        super().__init__(
            namespace=row.namespace,
            key=row.key,
            value=row.value,
            created_at=_time(row.created_at),
            updated_at=_time(row.updated_at),
            score=found.score,
        )
        self.rank = found.rank


class BeeWeaveStore(BaseStore):
    """LangGraph ``BaseStore`` whose items are BeeWeave memory events (SQLite or Neo4j)."""

    supports_ttl: bool = True

    def __init__(
        self,
        weave: Weave,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        items: ItemStore | None = None,
        clock: Callable[[], float] = time.time,
        scope: str | None = None,
    ) -> None:
        """Put LangGraph's long-term memory on ``weave``'s event graph.

        Args:
            weave: The open weave the items live in.
            index: LangGraph's index config: ``fields`` (the JSON paths embedded and
                searched), ``embed`` and ``dims`` (embed each item on ``put`` and rank by
                cosine similarity; without, the weave's fused recall ranks).
            ttl: LangGraph's TTL config (minutes; ``sweep_interval_minutes``).
            items: A ready item store (default: one on ``weave``).
            clock: Dates versions and runs TTLs (a test passes its own instead of sleeping).
            scope: The business line new items are put in (``beeweave_core.scopes``).

        Raises:
            TypeError: ``weave`` is not an open weave.
        """
        self.weave = weave = require_weave(weave, type(self).__name__)
        embed = (index or {}).get("embed")
        if isinstance(embed, Embedder) and not isinstance(embed, Embeddings):
            embed = BeeWeaveEmbeddings(embed)  # a BeeWeave model: LangGraph takes Embeddings
        self.items = items or ItemStore(
            weave,
            clock=clock,
            embeddings=ensure_embeddings(embed) if embed else None,
            dims=(index or {}).get("dims"),
            scope=scope,
        )
        self._fields = _tokenized((index or {}).get("fields") or ["$"])
        self.index_config = index
        self.ttl_config = ttl
        self._owned_weave: Weave | None = None
        self._next_sweep = 0.0

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str | None = None,
        *,
        tenant: str = "default",
        auth: Any = None,
        database: str | None = None,
        weave_options: dict[str, Any] | None = None,
        **kw: Any,
    ) -> Iterator[BeeWeaveStore]:
        """Open a weave (file path or BeeWeave URL) and yield a store on it; close after.

        Args:
            conn_string: A file path, a BeeWeave URL or None (the default file).
            tenant: Whose records the weave reads and writes.
            auth: Neo4j credentials (see :meth:`Weave.open`).
            database: The Neo4j database (``None``: the server's default).
            weave_options: More keyword arguments for :meth:`Weave.open`.
            **kw: The store's keyword arguments (``index``, ``ttl``, ``scope`` ...).

        Yields:
            The store, closed with its weave when the block ends.

        Raises:
            ValueError: A bad URL or option.
        """
        weave = open_weave(
            conn_string, tenant=tenant, auth=auth, database=database, weave_options=weave_options
        )
        try:
            store = cls(weave, **kw)
            store._owned_weave = weave
            yield store
        finally:
            weave.close()

    # ---------------------------------------------------------------- text
    def _texts(self, op: PutOp) -> list[str]:
        """The texts embedded and searched for an item (LangGraph's field paths)."""
        if op.index is False or op.value is None:
            return []
        fields = self._fields if op.index is None else _tokenized(op.index)
        texts: list[str] = []
        for _, tokens in fields:
            texts += get_text_at_path(op.value, tokens)
        return [t if isinstance(t, str) else json.dumps(t) for t in texts]

    # --------------------------------------------------------------- batch
    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Delete an item as LangGraph sees it: ``get``/``search`` no longer return it.

        Not an erasure: its versions stay in the event graph, invalidated, for audit
        (``include_inactive`` reads show them).  To erase an item for good, every
        version and its vectors, call :meth:`purge`; ``weave.purge(user_id=u)`` erases
        every item under ``("users", u)``.

        Args:
            namespace: The item's namespace.
            key: The item's key.
        """
        super().delete(namespace, key)

    def purge(self, namespace: tuple[str, ...], key: str) -> int:
        """Erase an item for good: every version, from the graph and the vector index,
        with a tombstone that keeps copies of them out.

        Args:
            namespace: The item's namespace.
            key: The item's key.

        Returns:
            The number of events removed.
        """
        return self.items.purge(namespace, key)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph's store operations: every ``get``/``search``/``put`` goes through here.

        Reads see the store as it was before the batch; puts apply last, last one wins.

        Args:
            ops: ``GetOp``, ``SearchOp``, ``ListNamespacesOp`` and ``PutOp`` (a ``None``
                value deletes).

        Returns:
            One result per op, in order (``None`` for a put).

        Raises:
            ValueError: An unknown operation.
        """
        ops = list(ops)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                row = self.items.get(op.namespace, op.key, refresh_ttl=op.refresh_ttl)
                results.append(_item(row) if row is not None else None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(
                    self.items.list_namespaces(
                        conditions=[(c.match_type, c.path) for c in op.match_conditions or ()],
                        max_depth=op.max_depth,
                        limit=op.limit,
                        offset=op.offset,
                    )
                )
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise ValueError(f"unknown store operation {type(op).__name__}")
        for (namespace, key), op in puts.items():
            if op.value is None:
                self.items.delete(namespace, key)
            else:
                texts = self._texts(op)
                self.items.put(
                    namespace, key, op.value, text="\n".join(texts), texts=texts, ttl_minutes=op.ttl
                )
        if puts:
            self._maybe_sweep()
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch` (on a worker thread).

        Args:
            ops: The store operations.

        Returns:
            One result per op, in order.
        """
        return await asyncio.to_thread(self.batch, list(ops))

    def _search(self, op: SearchOp) -> list[BeeWeaveSearchItem]:
        found = self.items.search(
            op.namespace_prefix,
            filter=op.filter,
            query=op.query,
            limit=op.limit,
            offset=op.offset,
            refresh_ttl=op.refresh_ttl,
        )
        return [BeeWeaveSearchItem(f) for f in found]

    # ----------------------------------------------------------------- TTL
    def sweep_ttl(self) -> int:
        """Delete expired items now (invalidating their events), rather than at the next
        write's sweep.

        Returns:
            How many items expired.
        """
        return self.items.sweep()

    def _maybe_sweep(self) -> None:
        minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + minutes * 60
            self.items.sweep()

    # ------------------------------------------------------------ key/value
    def key_value(self, namespace: Sequence[str]) -> BeeWeaveKeyValueStore:
        """A LangChain ``BaseStore[str, V]`` over one namespace of this store (docstores,
        ``CacheBackedEmbeddings``).

        Args:
            namespace: The namespace its keys live in.

        Returns:
            The key-value store.
        """
        return BeeWeaveKeyValueStore(self.items, tuple(namespace))


class BeeWeaveKeyValueStore(KeyValueStore[str, Any]):
    """``mget``/``mset``/``mdelete``/``yield_keys`` over one namespace of BeeWeave items.

    Values may be anything BeeWeave's payload rules keep (JSON, bytes, datetimes …);
    each key's history stays in the event graph like every item's.

    Args:
        items: The item store (:meth:`BeeWeaveStore.key_value` passes its own).
        namespace: The namespace its keys live in.
    """

    def __init__(self, items: ItemStore, namespace: tuple[str, ...]) -> None:
        self.items = items
        self.namespace = namespace

    def mget(self, keys: Sequence[str]) -> list[Any | None]:
        """Read values by key.

        Args:
            keys: The keys.

        Returns:
            Each key's value, ``None`` for a missing one.
        """
        out: list[Any | None] = []
        for key in keys:
            row = self.items.get(self.namespace, key)
            out.append(row.value["value"] if row is not None else None)
        return out

    def mset(self, key_value_pairs: Sequence[tuple[str, Any]]) -> None:
        """Write values (each a new version of its key).

        Args:
            key_value_pairs: ``(key, value)`` pairs.
        """
        for key, value in key_value_pairs:
            self.items.put(self.namespace, key, {"value": value})

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete keys (their versions stay in the graph, invalidated).

        Args:
            keys: The keys.
        """
        for key in keys:
            self.items.delete(self.namespace, key)

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        """List the namespace's keys (not those of namespaces below it).

        Args:
            prefix: Only keys starting with this.

        Yields:
            Each key.
        """
        rows = self.items.search(self.namespace, limit=2**31, refresh_ttl=False)
        for row in (f.row for f in rows):
            if row.namespace == self.namespace and (prefix is None or row.key.startswith(prefix)):
                yield row.key

    async def amget(self, keys: Sequence[str]) -> list[Any | None]:
        """Async twin of :meth:`mget` (on a worker thread).

        Args:
            keys: The keys.

        Returns:
            Each key's value, ``None`` for a missing one.
        """
        return await asyncio.to_thread(self.mget, keys)

    async def amset(self, key_value_pairs: Sequence[tuple[str, Any]]) -> None:
        """Async twin of :meth:`mset` (on a worker thread).

        Args:
            key_value_pairs: ``(key, value)`` pairs.
        """
        await asyncio.to_thread(self.mset, key_value_pairs)

    async def amdelete(self, keys: Sequence[str]) -> None:
        """Async twin of :meth:`mdelete` (on a worker thread).

        Args:
            keys: The keys.
        """
        await asyncio.to_thread(self.mdelete, keys)
