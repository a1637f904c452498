"""Vector indexes behind one protocol: Chroma (embedded or server) and Neo4j's own."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

from beeweave_core.index.base import (
    Chunk,
    Embedder,
    EmbeddingIdentity,
    EmbeddingMismatch,
    IndexFilter,
    IndexState,
    VectorIndex,
)
from beeweave_core.index.chunking import ChunkPolicy, chunk_event, chunk_events
from beeweave_core.paths import beeweave_home

__all__ = [
    "Chunk",
    "ChunkPolicy",
    "Embedder",
    "EmbeddingIdentity",
    "EmbeddingMismatch",
    "IndexFilter",
    "IndexState",
    "VectorIndex",
    "chunk_event",
    "chunk_events",
    "default_chroma_location",
    "open_index",
]


def default_chroma_location(store: Any, url: str) -> str | None:
    """Beside the SQLite file (``<db>.chroma/``); in memory for ``:memory:``;
    under ``$BEEWEAVE_HOME/chroma/`` for a server store."""
    path = getattr(store, "path", None)
    if isinstance(path, str):
        return None if path == ":memory:" else f"{path}.chroma"
    digest = hashlib.sha1(url.encode()).hexdigest()[:12]
    return str(beeweave_home() / "chroma" / digest)


def _store_key(store: Any, url: str) -> str:
    path = getattr(store, "path", None)
    return str(Path(path).resolve()) if isinstance(path, str) and path != ":memory:" else url


def _is_neo4j(store: Any) -> bool:
    return type(store).__name__.startswith("Neo4j")


def open_index(
    store: Any,
    *,
    url: str,
    embeddings: Any,
    identity: EmbeddingIdentity | None = None,
    kind: Any = None,
    vector_url: str | os.PathLike[str] | None = None,
) -> VectorIndex:
    """The vector index a weave's options name.

    ``kind``: ``None``/``"auto"`` (Neo4j's own index for a Neo4j store, else Chroma),
    ``"chroma"``, ``"neo4j"``, or a ready :class:`VectorIndex`.  ``vector_url``: a
    Chroma directory or ``http(s)://host:port`` server.
    """
    identity = identity or EmbeddingIdentity.of(embeddings)
    if kind is not None and not isinstance(kind, str):
        if not isinstance(kind, VectorIndex):
            raise TypeError(f"index must be 'chroma', 'neo4j' or a VectorIndex, got {kind!r}")
        if kind.identity != identity:
            raise EmbeddingMismatch(
                f"the given index holds {kind.identity} vectors but the embeddings are {identity}"
            )
        return kind
    choice = (kind or "auto").lower()
    if choice == "auto":
        choice = "neo4j" if _is_neo4j(store) and vector_url is None else "chroma"
    if choice == "chroma":
        from beeweave_core.index.chroma import ChromaVectorIndex

        location = vector_url if vector_url is not None else default_chroma_location(store, url)
        if location is not None and "://" not in str(location):
            location = str(Path(location).expanduser())
        if vector_url is not None:
            # a shared server or directory: keep this store's collections apart from others'
            prefix = "bw-" + hashlib.sha1(_store_key(store, url).encode()).hexdigest()[:10]
        elif location is None:
            prefix = "bw-mem-" + uuid.uuid4().hex[:10]  # an in-memory store's own vectors
        else:
            prefix = "beeweave"  # the directory beside the store belongs to it alone
        return ChromaVectorIndex(
            tenant=store.tenant, identity=identity, location=location, embeddings=embeddings,
            prefix=prefix, temporary=location is None,
        )  # fmt: skip
    if choice == "neo4j":
        if not _is_neo4j(store):
            raise ValueError("index='neo4j' needs a Neo4j store (neo4j:// or bolt:// URL)")
        from beeweave_core.backends.neo4j.vectors import Neo4jVectorIndex

        return Neo4jVectorIndex.for_store(store, identity=identity)
    raise ValueError(f"unknown index {kind!r}: expected 'chroma', 'neo4j', False or a VectorIndex")
