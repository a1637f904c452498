"""Chroma as BeeWeave's vector index, through ``chromadb``.

Embedded by default (a ``PersistentClient`` directory beside the SQLite file, or an
in-memory client for ``:memory:`` stores); a Chroma server when given an
``http://host:port`` URL.  Each (tenant, embedding identity) pair gets its own
collection, so two tenants never share vectors and two models never get compared;
every vector also carries its event id, session, seq, time, type, user, agent and
the model name + version in its metadata.

LangChain code searches these vectors through ``beeweave_langchain.BeeWeaveRetriever``
(text comes from the event store); the core imports no LangChain.

Chroma is given vectors and metadata, never the text: the event store holds the text,
and whatever Chroma keeps (its write-ahead queue, its full-text tables) would outlive a
purge.  An embedded directory is held by one process at a time (:class:`DirectoryLock`);
the others store events in the graph as usual and leave embedding to the holder or
to the next process that gets the directory (its gap check).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from beeweave_core.heap import overwrite_reused_memory
from beeweave_core.index.base import (
    Chunk,
    EmbeddingIdentity,
    EmbeddingMismatch,
    IndexBusy,
    IndexFilter,
    IndexState,
    check_vector,
    chunk_metadata,
    safe_name,
)
from beeweave_core.index.vector_cache import Rows, VectorCache, Write
from beeweave_core.private import make_tree_private, private_dir

#: Collection-level metadata keys (what a listing needs to find stale identities).
META_TENANT = "beeweave_tenant"
META_KIND = "beeweave_kind"
META_MODEL = "embedding_model"
META_VERSION = "embedding_version"
META_RECIPE = "index_recipe"
STATE_ID = "beeweave-index-state"
_PAGE = 1000

#: One cache per collection per process (several index objects may open one collection).
_CACHES: weakref.WeakValueDictionary[tuple[str, str], VectorCache] = weakref.WeakValueDictionary()
_CACHES_LOCK = threading.Lock()


def _shared_cache(place: str, collection: str) -> VectorCache:
    with _CACHES_LOCK:
        cache = _CACHES.get((place, collection))
        if cache is None:
            cache = _CACHES[(place, collection)] = VectorCache()
        return cache


def _settings() -> Any:
    from chromadb.config import Settings

    # Chroma's telemetry would phone home; BeeWeave never touches the network itself.
    return Settings(anonymized_telemetry=False, allow_reset=False)


#: chromadb shares one "system" per location between clients and builds it without a
#: lock: two threads creating clients at once can both fail.  Creation is serialised.
_CLIENT_LOCK = threading.Lock()


class DirectoryLock:
    """An exclusive, non-blocking lock on an embedded Chroma directory, per process.

    Chroma shares one system per directory inside a process, so several indexes of one
    process (tenants, embedding models) may use it together: the lock is counted per
    process and held by the OS file lock against other processes.  ``flock`` is
    released by the kernel when the holder dies, even by SIGKILL, so a crashed process
    never leaves the directory locked.
    """

    _held: dict[Path, list[int]] = {}  # directory -> [fd, users in this process]
    _guard = threading.Lock()

    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        with self._guard:
            entry = self._held.get(self.directory)
            if entry is None:
                entry = self._held[self.directory] = [self._acquire(self.directory), 0]
            entry[1] += 1
        self._released = False

    @staticmethod
    def _acquire(directory: Path) -> int:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(directory / ".beeweave-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise IndexBusy(
                f"another process holds the embedded vector index at {directory}; this one "
                "stores events and leaves their vectors to it (use a Chroma server, "
                "vector_url='http://host:port', for semantic recall in every process)"
            ) from None
        return fd

    def release(self) -> None:
        with self._guard:
            if self._released:
                return
            self._released = True
            entry = self._held[self.directory]
            entry[1] -= 1
            if entry[1] == 0:
                os.close(entry[0])  # closing the descriptor drops the flock
                del self._held[self.directory]


def local_directory(location: str | os.PathLike[str] | None) -> Path | None:
    """The directory of an embedded location (``None`` for memory or a server URL)."""
    if location is None:
        return None
    text = str(location)
    parts = urlsplit(text)
    if parts.scheme in ("http", "https"):
        return None
    return Path(parts.path if parts.scheme == "file" else text).expanduser()


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
    overwrite_reused_memory()  # hnswlib writes unused heap bytes into its files
    client = chromadb.PersistentClient(path=str(path), settings=_settings())
    make_tree_private(path)  # chroma.sqlite3 and segments: readable by the user only
    return client


def close_client(client: Any) -> None:
    """Close a client of :func:`make_client`, the connections of an HTTP one too.

    chromadb's ``Client.close()`` stops its systems but leaves the ``httpx`` pools of an
    ``HttpClient`` and of its inner admin client open (chroma-core/chroma#2702): every
    closed index on a server kept its sockets until garbage collection.
    """
    admin = getattr(client, "_admin_client", None)
    sessions = [getattr(getattr(c, "_server", None), "_session", None) for c in (client, admin)]
    close = getattr(client, "close", None)
    if callable(close):
        close()
    for session in sessions:
        if callable(getattr(session, "close", None)):
            session.close()


@dataclass
class _CacheWrite:
    """One Chroma write as the in-process copy sees it (nothing when there is none)."""

    cache: VectorCache | None
    write: Write | None

    def add(self, rows: Rows) -> None:
        if self.write is not None:
            self.write.add(rows)

    def remove(self, event_ids: Sequence[str]) -> None:
        if self.cache is not None and self.write is not None:
            self.cache.remove_now(self.write, event_ids)


def _event_key(chunk_id: str) -> str:
    """The event part of a chunk id (``<event id>#<part>``; the whole id otherwise)."""
    return chunk_id.rpartition("#")[0] or chunk_id


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
    scopes = filters.scope_values()
    if scopes is not None:  # the reader's scopes, inside the query (see scopes.py)
        conds.append({"scope": {"$in": scopes}})
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
        embeddings: optional embedding model of these vectors, kept as :attr:`embeddings`
            (the index itself stores and queries vectors only).
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
        self.tenant = tenant
        self.identity = identity
        self.location = str(location) if location is not None else None
        self._owns_client = client is None
        directory = local_directory(location) if client is None else None
        self._dir_lock = DirectoryLock(directory) if directory is not None else None
        try:
            self._client = client if client is not None else make_client(location)
        except BaseException:
            if self._dir_lock is not None:
                self._dir_lock.release()
            raise
        self._prefix = prefix
        self._temporary = temporary
        #: The embedding model of these vectors, when the opener gave it.
        self.embeddings = embeddings
        self._lock = threading.RLock()
        self.collection_name = self._name_for(identity)
        self._collection = self._client.get_or_create_collection(
            name=self.collection_name,
            metadata={
                META_TENANT: tenant,
                META_KIND: "vectors",
                META_MODEL: identity.name,
                META_VERSION: identity.version,
                META_RECIPE: identity.recipe,
            },
            # Inner product: vectors may be sums of unit vectors (the context recipe),
            # whose dot product with a unit query is the sum of the cosines.
            configuration={"hnsw": {"space": "ip"}},
        )
        self._check_collection_identity()
        self._state_collection: Any = None
        self._dimension: int | None = None
        #: Scoped queries are answered in process where this process is the only writer
        #: (its own embedded directory, or memory); a server's other clients write too.
        self._place = (
            None if client is not None
            else str(directory.resolve()) if directory is not None
            else "memory" if location is None else None
        )  # fmt: skip
        self._cache = (
            _shared_cache(self._place, self.collection_name) if self._place is not None else None
        )
        #: Answer scoped queries from the in-process copy (False: always ask Chroma, as a
        #: benchmark's baseline does; the copy is still kept current).
        self.in_process = True

    # ------------------------------------------------------------- helpers
    def _name_for(self, identity: EmbeddingIdentity) -> str:
        return safe_name(self._prefix, self.tenant, identity.key)

    @property
    def collection(self) -> Any:
        """The chromadb ``Collection`` holding these vectors (ids, vectors, metadata).

        Writes through it would bypass the in-process copy, so handing it out turns
        that copy off: queries go to Chroma from then on.
        """
        self._stop_caching()
        return self._collection

    def _stop_caching(self) -> None:
        if self._cache is not None:
            self._cache.disable()

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
        with self._lock, self._writing() as cached:
            limit = max(1, int(self._client.get_max_batch_size() or 1000))
            for i in range(0, len(chunks), limit):
                ids = [c.id for c in chunks[i : i + limit]]
                embs = [list(map(float, v)) for v in vectors[i : i + limit]]
                metas = [chunk_metadata(c, self.identity) for c in chunks[i : i + limit]]
                self._collection.upsert(ids=ids, embeddings=embs, metadatas=metas)
                cached.add(list(zip(ids, metas, embs, strict=True)))
        self._dimension = dim
        return len(chunks)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[_CacheWrite]:
        """A write to Chroma, mirrored into the in-process copy (when there is one)."""
        if self._cache is None:
            yield _CacheWrite(None, None)
            return
        with self._cache.writing() as w:
            yield _CacheWrite(self._cache, w)

    def delete(self, event_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return 0
        n = 0
        with self._lock, self._writing() as cached:
            cached.remove(ids)  # before Chroma is asked, and again once it answered
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
        if not possible:
            return []
        if self._cache is not None and self.in_process and filters is not None:
            found = self._cache.search(vector, k, filters, self._load_sessions)
            if found is not None:
                return found
        fetch = k * 3 + 10  # Chroma returns fewer when fewer match (no count() round trip)
        got = self._collection.query(
            query_embeddings=[list(map(float, vector))],
            n_results=fetch,
            where=where,
            include=["distances"],
        )
        return self._nearest_events(got["ids"][0], got["distances"][0], k, filters)

    def _nearest_events(
        self, ids: list[str], distances: list[float], k: int, filters: IndexFilter | None
    ) -> list[tuple[str, float]]:
        """The ``k`` nearest events of a query's chunks (``ids``, nearest first).

        Chroma reads metadata row by row, ~0.07 ms a chunk (11 ms of a tenant-wide
        query's 12 went to the 160 chunks it over-fetches), so it is read here only for
        the chunks of events not placed yet, enough for the events still missing, nearest
        first.  A chunk id begins with its event's (``index.base``): that only chooses
        what to read; the metadata decides, as before.
        """
        best: dict[str, float] = {}
        placed: set[str] = set()  # chunk-id prefixes of events already in ``best``
        i = 0
        while i < len(ids) and len(best) < k:
            page: list[int] = []
            keys: set[str] = set()
            while i < len(ids) and (len(keys) < k - len(best) or _event_key(ids[i]) in keys):
                key = _event_key(ids[i])
                if key not in placed:
                    keys.add(key)
                    page.append(i)
                i += 1
            if not page:
                break
            got = self._collection.get(ids=[ids[j] for j in page], include=["metadatas"])
            metas = dict(zip(got["ids"], got["metadatas"], strict=True))
            for j in page:
                meta = metas.get(ids[j])
                if meta is None or not self._accepts(meta, filters):
                    continue  # deleted meanwhile, another version, or out of the filter
                eid, sim = meta["event_id"], 1.0 - float(distances[j])
                if sim > best.get(eid, -2.0):
                    best[eid] = sim
                placed.add(_event_key(ids[j]))
        return sorted(best.items(), key=lambda p: -p[1])[:k]

    def _accepts(self, meta: dict[str, Any], filters: IndexFilter | None) -> bool:
        return self._ours(meta) and (filters is None or filters.accepts(meta))

    def _ours(self, meta: dict[str, Any]) -> bool:
        """Whether a chunk was made by this identity: never mix versions, even if
        someone wrote into our collection."""
        got = (meta.get(META_VERSION), meta.get(META_RECIPE, ""))
        return got == (self.identity.version, self.identity.recipe)

    def _load_sessions(self, session_ids: list[str]) -> Rows:
        """Every vector of these sessions (this identity's), to fill the in-process copy."""
        where = (
            {"session_id": {"$in": session_ids}}
            if len(session_ids) > 1
            else {"session_id": session_ids[0]}
        )
        rows: list[tuple[str, dict[str, Any], Sequence[float]]] = []
        offset = 0
        while True:
            got = self._collection.get(
                where=where, limit=_PAGE, offset=offset, include=["metadatas", "embeddings"]
            )
            for cid, meta, emb in zip(got["ids"], got["metadatas"], got["embeddings"], strict=True):
                if self._ours(meta):
                    rows.append((cid, meta, emb))
            if len(got["ids"]) < _PAGE:
                return rows
            offset += _PAGE

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

    def cache_info(self) -> dict[str, int]:
        """Vectors held in process and queries answered from them (see ``vector_cache``)."""
        if self._cache is None:
            return {"vectors": 0, "queries": 0}
        return {"vectors": self._cache.rows, "queries": self._cache.answered}

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
        if self._place is not None:
            _shared_cache(self._place, name).clear()
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
            meta, config = self._collection.metadata, self._collection.configuration
            self._client.delete_collection(self.collection_name)
            self._collection = self._client.get_or_create_collection(
                name=self.collection_name, metadata=meta, configuration=config
            )
            self._dimension = None
            if self._cache is not None:
                self._cache.clear()
            with contextlib.suppress(Exception):  # never created
                self._client.delete_collection(self.collection_name + "-state")
            self._state_collection = None

    def close(self) -> None:
        if self._cache is not None:  # once the directory lock goes, others may write
            self._cache.clear()
            self._cache = None
        if self._temporary:  # an in-memory store's vectors go with it
            for name in (self.collection_name, self.collection_name + "-state"):
                with contextlib.suppress(Exception):
                    self._client.delete_collection(name)
        if self._owns_client:
            close_client(self._client)
        if self._dir_lock is not None:
            self._dir_lock.release()

    def __repr__(self) -> str:
        where = self.location or "memory"
        return f"ChromaVectorIndex({where!r}, collection={self.collection_name!r})"
