"""Chroma as BeeWeave's vector index, through ``langchain-chroma``.

Embedded by default (a ``PersistentClient`` directory beside the SQLite file, or an
in-memory client for ``:memory:`` stores); a Chroma server when given an
``http://host:port`` URL.  Each (tenant, embedding identity) pair gets its own
collection, so two tenants never share vectors and two models never get compared;
every vector also carries its event id, session, seq, time, type, user, agent and
the model name + version in its metadata.

The LangChain wrapper (:attr:`ChromaVectorIndex.vectorstore`) is exposed, so the same
collection can be used as any LangChain ``VectorStore``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from beeweave_core.index.base import (
    Chunk,
    EmbeddingIdentity,
    EmbeddingMismatch,
    IndexFilter,
    IndexState,
    check_vector,
    chunk_metadata,
    safe_name,
)
from beeweave_core.private import make_tree_private, private_dir

#: Collection-level metadata keys (what a listing needs to find stale identities).
META_TENANT = "beeweave_tenant"
META_KIND = "beeweave_kind"
META_MODEL = "embedding_model"
META_VERSION = "embedding_version"
META_RECIPE = "index_recipe"
STATE_ID = "beeweave-index-state"
_PAGE = 1000


def _settings() -> Any:
    from chromadb.config import Settings

    # Chroma's telemetry would phone home; BeeWeave never touches the network itself.
    return Settings(anonymized_telemetry=False, allow_reset=False)


#: chromadb shares one "system" per location between clients and builds it without a
#: lock: two threads creating clients at once can both fail.  Creation is serialised.
_CLIENT_LOCK = threading.Lock()


def make_client(location: str | os.PathLike[str] | None) -> Any:
    """A chromadb client for a directory, an ``http(s)://host:port`` URL, or ``None`` (memory)."""
    with _CLIENT_LOCK:
        return _make_client(location)


def _make_client(location: str | os.PathLike[str] | None) -> Any:
    import chromadb

    if location is None:
        return chromadb.EphemeralClient(settings=_settings())
    text = str(location)
    parts = urlsplit(text)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise ValueError(f"bad Chroma URL {text!r}: expected http://host:port")
        return chromadb.HttpClient(
            host=parts.hostname,
            port=parts.port or (443 if parts.scheme == "https" else 8000),
            ssl=parts.scheme == "https",
            settings=_settings(),
        )
    if parts.scheme and len(parts.scheme) > 1 and parts.scheme != "file":
        raise ValueError(
            f"unsupported Chroma location {text!r}: use a directory or http://host:port"
        )
    path = Path(parts.path if parts.scheme == "file" else text).expanduser()
    private_dir(path)
    client = chromadb.PersistentClient(path=str(path), settings=_settings())
    make_tree_private(path)  # chroma.sqlite3 and segments: readable by the user only
    return client


def _where(filters: IndexFilter | None) -> tuple[dict[str, Any] | None, bool]:
    """Chroma ``where`` for ``filters``; the bool is False when nothing can match."""
    if filters is None:
        return None, True
    conds: list[dict[str, Any]] = []
    if filters.session_ids is not None:
        sids = list(dict.fromkeys(filters.session_ids))
        if not sids:
            return None, False
        conds.append({"session_id": {"$in": sids}} if len(sids) > 1 else {"session_id": sids[0]})
    if filters.user_id is not None:
        conds.append({"user_id": str(filters.user_id)})
    if filters.agent_id is not None:
        conds.append({"agent_id": str(filters.agent_id)})
    if filters.types is not None:
        tv = sorted({t.value if hasattr(t, "value") else str(t) for t in filters.types})
        if not tv:
            return None, False
        conds.append({"type": {"$in": tv}} if len(tv) > 1 else {"type": tv[0]})
    if filters.since is not None:
        conds.append({"ts": {"$gte": float(filters.since)}})
    if filters.until is not None:
        conds.append({"ts": {"$lte": float(filters.until)}})
    if not conds:
        return None, True
    return (conds[0] if len(conds) == 1 else {"$and": conds}), True


class ChromaVectorIndex:
    """A tenant's vectors for one embedding identity, in one Chroma collection.

    Args:
        tenant: the BeeWeave tenant (part of the collection name and metadata).
        identity: the embedding identity of every vector written or queried.
        location: a directory (embedded), ``http(s)://host:port`` (server), or
            ``None`` (in-memory, for ``:memory:`` stores and throwaway runs).
        client: an existing chromadb client instead of ``location`` (not closed here).
        embeddings: optional LangChain ``Embeddings``, only so that
            :attr:`vectorstore` can also search by text.
        prefix: start of the collection names (keeps stores sharing a server apart).
        temporary: drop the collections on :meth:`close` (in-memory stores).
    """

    def __init__(
        self,
        *,
        tenant: str,
        identity: EmbeddingIdentity,
        location: str | os.PathLike[str] | None = None,
        client: Any = None,
        embeddings: Any = None,
        prefix: str = "beeweave",
        temporary: bool = False,
    ) -> None:
        from langchain_chroma import Chroma

        self.tenant = tenant
        self.identity = identity
        self.location = str(location) if location is not None else None
        self._owns_client = client is None
        self._client = client if client is not None else make_client(location)
        self._prefix = prefix
        self._temporary = temporary
        self._lock = threading.RLock()
        self.collection_name = self._name_for(identity)
        self.vectorstore = Chroma(
            collection_name=self.collection_name,
            embedding_function=embeddings,
            client=self._client,
            collection_metadata={
                META_TENANT: tenant,
                META_KIND: "vectors",
                META_MODEL: identity.name,
                META_VERSION: identity.version,
                META_RECIPE: identity.recipe,
            },
            # Inner product: vectors may be sums of unit vectors (the context recipe),
            # whose dot product with a unit query is the sum of the cosines.
            collection_configuration={"hnsw": {"space": "ip"}},
        )
        self._check_collection_identity()
        self._state_collection: Any = None
        self._dimension: int | None = None

    # ------------------------------------------------------------- helpers
    def _name_for(self, identity: EmbeddingIdentity) -> str:
        return safe_name(self._prefix, self.tenant, identity.key)

    @property
    def _collection(self) -> Any:
        return self.vectorstore._collection

    def _check_collection_identity(self) -> None:
        meta = self._collection.metadata or {}
        got = (meta.get(META_MODEL), meta.get(META_VERSION), meta.get(META_RECIPE, ""))
        want = (self.identity.name, self.identity.version, self.identity.recipe)
        if got != want or meta.get(META_TENANT) != self.tenant:
            raise EmbeddingMismatch(
                f"Chroma collection {self.collection_name!r} holds vectors of "
                f"{EmbeddingIdentity(*map(str, got))} (tenant {meta.get(META_TENANT)!r}), "
                f"not {self.identity} for tenant {self.tenant!r}"
            )

    @property
    def dimension(self) -> int | None:
        """Size of the stored vectors (``None`` while the collection is empty)."""
        if self._dimension is None:
            got = self._collection.get(limit=1, include=["embeddings"])
            embs = got.get("embeddings")
            if embs is not None and len(embs):
                self._dimension = len(embs[0])
        return self._dimension

    # -------------------------------------------------------------- writes
    def upsert(self, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> int:
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        if not chunks:
            return 0
        dim = self.dimension
        for v in vectors:
            check_vector(self.identity, dim, v)
            dim = len(v)
        with self._lock:
            limit = max(1, int(self._client.get_max_batch_size() or 1000))
            for i in range(0, len(chunks), limit):
                part = chunks[i : i + limit]
                self._collection.upsert(
                    ids=[c.id for c in part],
                    embeddings=[list(map(float, v)) for v in vectors[i : i + limit]],
                    metadatas=[chunk_metadata(c, self.identity) for c in part],
                    documents=[c.text for c in part],
                )
        self._dimension = dim
        return len(chunks)

    def delete(self, event_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return 0
        n = 0
        with self._lock:
            for i in range(0, len(ids), _PAGE):
                part = ids[i : i + _PAGE]
                found = self._collection.get(where={"event_id": {"$in": part}}, include=[])
                if found["ids"]:
                    self._collection.delete(ids=found["ids"])
                    n += len(found["ids"])
        return n

    # --------------------------------------------------------------- reads
    def query(
        self, vector: Sequence[float], *, k: int = 10, filters: IndexFilter | None = None
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        check_vector(self.identity, self.dimension, vector)
        where, possible = _where(filters)
        total = self._collection.count()
        if not possible or total == 0:
            return []
        fetch = min(total, k * 3 + 10)
        results = self.vectorstore.similarity_search_by_vector_with_relevance_scores(
            list(map(float, vector)), k=fetch, filter=where
        )
        best: dict[str, float] = {}
        for doc, distance in results:
            meta = doc.metadata
            if (meta.get(META_VERSION), meta.get(META_RECIPE, "")) != (
                self.identity.version,
                self.identity.recipe,
            ):
                continue  # never mix versions, even if someone wrote into our collection
            if filters is not None and not filters.accepts(meta):
                continue
            eid = meta["event_id"]
            sim = 1.0 - float(distance)
            if sim > best.get(eid, -2.0):
                best[eid] = sim
        return sorted(best.items(), key=lambda p: -p[1])[:k]

    def ids(self, event_ids: Sequence[str] | None = None) -> set[str]:
        out: set[str] = set()
        if event_ids is not None:
            wanted = list(dict.fromkeys(event_ids))
            for i in range(0, len(wanted), _PAGE):
                got = self._collection.get(
                    where={"event_id": {"$in": wanted[i : i + _PAGE]}}, include=["metadatas"]
                )
                out.update(m["event_id"] for m in got["metadatas"] or [])
            return out
        offset = 0
        while True:
            got = self._collection.get(limit=_PAGE, offset=offset, include=["metadatas"])
            metas = got["metadatas"] or []
            out.update(m["event_id"] for m in metas)
            if len(metas) < _PAGE:
                return out
            offset += _PAGE

    def count(self) -> int:
        return int(self._collection.count())

    # ---------------------------------------------------- identities, state
    def _tenant_collections(self) -> list[Any]:
        out = []
        for col in self._client.list_collections():
            meta = col.metadata or {}
            if meta.get(META_TENANT) == self.tenant and meta.get(META_KIND) == "vectors":
                out.append(col)
        return out

    def other_identities(self) -> dict[EmbeddingIdentity, int]:
        found: dict[EmbeddingIdentity, int] = {}
        for col in self._tenant_collections():
            meta = col.metadata or {}
            ident = EmbeddingIdentity(
                str(meta.get(META_MODEL)),
                str(meta.get(META_VERSION)),
                str(meta.get(META_RECIPE, "")),
            )
            if ident != self.identity:
                n = col.count()
                if n:
                    found[ident] = n
        return found

    def drop_identity(self, identity: EmbeddingIdentity) -> None:
        if identity == self.identity:
            raise ValueError("drop_identity() is for other identities; use reset() for this one")
        name = self._name_for(identity)
        for n in (name, name + "-state"):
            with contextlib.suppress(Exception):  # already gone
                self._client.delete_collection(n)

    def _state(self) -> Any:
        if self._state_collection is None:
            self._state_collection = self._client.get_or_create_collection(
                self.collection_name + "-state",
                embedding_function=None,
                metadata={META_TENANT: self.tenant, META_KIND: "state"},
            )
        return self._state_collection

    def load_state(self) -> IndexState:
        got = self._state().get(ids=[STATE_ID], include=["documents"])
        docs = got.get("documents") or []
        return IndexState.from_json(json.loads(docs[0]) if docs else None)

    def save_state(self, state: IndexState) -> None:
        # Chroma keeps documents only beside a vector; a 1-d constant one is enough here.
        self._state().upsert(
            ids=[STATE_ID], embeddings=[[1.0]], documents=[json.dumps(state.to_json())]
        )

    def reset(self) -> None:
        with self._lock:
            self.vectorstore.reset_collection()
            self._dimension = None
            with contextlib.suppress(Exception):  # never created
                self._client.delete_collection(self.collection_name + "-state")
            self._state_collection = None

    def close(self) -> None:
        if self._temporary:  # an in-memory store's vectors go with it
            for name in (self.collection_name, self.collection_name + "-state"):
                with contextlib.suppress(Exception):
                    self._client.delete_collection(name)
        if self._owns_client:
            close = getattr(self._client, "close", None)
            if callable(close):
                close()

    def __repr__(self) -> str:
        where = self.location or "memory"
        return f"ChromaVectorIndex({where!r}, collection={self.collection_name!r})"
