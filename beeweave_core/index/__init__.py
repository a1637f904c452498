"""Vector indexes behind one protocol: Chroma (embedded or server) and Neo4j's own."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

from beeweave_core.index.base import (
    Chunk,
    Embedder,
    EmbeddingIdentity,
    EmbeddingMismatch,
    IndexFilter,
    IndexState,
    VectorHome,
    VectorIndex,
)
from beeweave_core.index.chunking import ChunkPolicy, chunk_event, chunk_events

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
    "open_chroma",
    "open_index",
]


def open_chroma(
    *,
    tenant: str,
    identity: EmbeddingIdentity,
    embeddings: object,
    location: str | os.PathLike[str] | None,
    shared_key: str | None,
) -> VectorIndex:
    """Chroma at ``location`` (directory, ``http(s)://`` server, or None: in memory).

    ``shared_key`` names the store when the location is shared (a ``vector_url``), so
    each store's collections stay apart; a directory beside the store is its alone.
    """
    from beeweave_core.index.chroma import ChromaVectorIndex

    if location is not None and "://" not in str(location):
        location = str(Path(location).expanduser())
    if shared_key is not None:
        prefix = "bw-" + hashlib.sha1(shared_key.encode()).hexdigest()[:10]
    elif location is None:
        prefix = "bw-mem-" + uuid.uuid4().hex[:10]  # an in-memory store's own vectors
    else:
        prefix = "beeweave"
    return ChromaVectorIndex(
        tenant=tenant,
        identity=identity,
        location=location,
        embeddings=embeddings,
        prefix=prefix,
        temporary=location is None,
    )


def open_index(
    backend: VectorHome,
    *,
    embeddings: object,
    identity: EmbeddingIdentity | None = None,
    kind: str | VectorIndex | None = None,
    vector_url: str | None = None,
) -> VectorIndex:
    """The vector index a weave's options name, opened by its backend.

    ``kind``: ``None``/``"auto"`` (the backend's choice: Neo4j's own index for a Neo4j
    store, else Chroma), ``"chroma"``, ``"neo4j"``, or a ready :class:`VectorIndex`
    (checked against ``identity``).  ``vector_url``: a Chroma directory or server.
    """
    identity = identity or EmbeddingIdentity.of(embeddings)
    if kind is None or isinstance(kind, str):
        return backend.vectors(
            identity, embeddings=embeddings, kind=kind or "auto", vector_url=vector_url
        )
    if not isinstance(kind, VectorIndex):
        raise TypeError(f"index must be 'chroma', 'neo4j' or a VectorIndex, got {kind!r}")
    if kind.identity != identity:
        raise EmbeddingMismatch(
            f"the given index holds {kind.identity} vectors but the embeddings are {identity}"
        )
    return kind
