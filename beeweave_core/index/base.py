"""The VectorIndex seam: what any vector backend must offer BeeWeave.

Vectors are a derived copy of the event graph (graph first, vectors after), so an
index only ever holds *chunks* of events: an id, the event it came from, the text
that was embedded, a few filterable fields, and the embedding identity.

One index object serves one tenant and one embedding identity.  Vectors of two
models (or two versions of one model) live apart and are never compared: a query
with a different identity is an :class:`EmbeddingMismatch`, and vectors left over
from another identity are reported by :meth:`VectorIndex.other_identities` so the
user can run ``beeweave reindex``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from beeweave_core.embedding_base import Embedder
from beeweave_core.events import Event, EventType

if TYPE_CHECKING:
    from beeweave_core.store import SessionReader


class EmbeddingMismatch(RuntimeError):
    """Vectors and query come from different embedding models or versions."""


class IndexBusy(RuntimeError):
    """Another process owns the embedded vector index; this one leaves vectors to it.

    An embedded Chroma directory is not safe for two writer processes at once, so
    one process at a time holds it (see :class:`~beeweave_core.index.chroma.DirectoryLock`).
    """


@dataclass(frozen=True)
class EmbeddingIdentity:
    """Which model made a vector (``name`` + ``version``) and how (``recipe``).

    The recipe names how texts become the stored vector (see ``chunking.RECIPES``);
    vectors of two recipes are as incomparable as vectors of two models.
    """

    name: str
    version: str
    recipe: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}" + (f"#{self.recipe}" if self.recipe else "")

    @property
    def digest(self) -> str:
        """Short, name-safe fingerprint (collection names, Neo4j property names)."""
        return hashlib.sha1(self.key.encode()).hexdigest()[:12]

    def __str__(self) -> str:
        return self.key

    @classmethod
    def of(cls, embeddings: Embedder, recipe: str = "") -> EmbeddingIdentity:
        from beeweave_core.embeddings import embedding_identity

        name, version = embedding_identity(embeddings)
        return cls(name, version, recipe)


@dataclass(frozen=True)
class Chunk:
    """One embedded piece of an event (most events are one chunk)."""

    id: str
    event_id: str
    text: str
    session_id: str
    seq: int
    ts: float
    type: EventType
    user_id: str | None = None
    agent_id: str | None = None
    #: The event's scope (``None``: unscoped; see ``scopes.py``).
    scope: str | None = None
    part: int = 0
    #: Text of the event before this one in its session (what it answers); embedded
    #: with the chunk under the "context" recipe, never stored.
    context: str = ""

    @classmethod
    def of(cls, event: Event, text: str, part: int = 0) -> Chunk:
        return cls(
            id=f"{event.id}#{part}",
            event_id=event.id,
            text=text,
            session_id=event.session_id,
            seq=event.seq,
            ts=event.ts,
            type=event.type,
            user_id=event.user_id,
            agent_id=event.agent_id,
            scope=event.scope,
            part=part,
        )


#: The ``scope`` a vector of an unscoped event carries (metadata stores hold no nulls).
UNSCOPED = ""


@dataclass(frozen=True)
class IndexFilter:
    """What a vector query may return; every backend pushes these down where it can."""

    session_ids: Sequence[str] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    types: Sequence[EventType] | None = None
    since: float | None = None
    until: float | None = None
    #: The reader's scopes (``None``: every scope); unscoped chunks always pass.
    scopes: frozenset[str] | None = None

    def scope_values(self) -> list[str] | None:
        """What a stored ``scope`` may be: the readable scopes or ``UNSCOPED``."""
        return None if self.scopes is None else [UNSCOPED, *sorted(self.scopes)]

    def accepts(self, meta: dict[str, Any]) -> bool:
        """The same test in Python, for results a backend could not filter itself."""
        if self.session_ids is not None and meta.get("session_id") not in set(self.session_ids):
            return False
        if self.user_id is not None and meta.get("user_id") != self.user_id:
            return False
        if self.agent_id is not None and meta.get("agent_id") != self.agent_id:
            return False
        if self.types is not None and meta.get("type") not in {
            EventType(t).value for t in self.types
        }:
            return False
        if self.scopes is not None and meta.get("scope", UNSCOPED) not in self.scope_values():  # type: ignore[operator]
            return False
        ts = meta.get("ts")
        if self.since is not None and (ts is None or ts < self.since):
            return False
        return not (self.until is not None and (ts is None or ts > self.until))


@dataclass
class IndexState:
    """Progress of the gap check: per session, the seq up to which the index is verified."""

    sessions: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> IndexState:
        return cls(sessions={str(k): int(v) for k, v in (data or {}).get("sessions", {}).items()})


@runtime_checkable
class VectorIndex(Protocol):
    """A tenant's vectors for one embedding identity."""

    tenant: str
    identity: EmbeddingIdentity

    def upsert(self, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> int:
        """Store (or replace) chunks with their vectors; returns how many."""
        ...

    def delete(self, event_ids: Sequence[str]) -> int:
        """Remove every chunk of these events."""
        ...

    def query(
        self, vector: Sequence[float], *, k: int = 10, filters: IndexFilter | None = None
    ) -> list[tuple[str, float]]:
        """``(event_id, cosine similarity)`` best first, one entry per event."""
        ...

    def ids(self, event_ids: Sequence[str] | None = None) -> set[str]:
        """Event ids that have vectors (all of them, or those among ``event_ids``)."""
        ...

    def count(self) -> int:
        """Chunks stored for this tenant and identity."""
        ...

    def other_identities(self) -> dict[EmbeddingIdentity, int]:
        """Vectors this tenant holds under other embedding identities (stale after a switch)."""
        ...

    def drop_identity(self, identity: EmbeddingIdentity) -> None:
        """Delete this tenant's vectors of another identity (after a reindex)."""
        ...

    def load_state(self) -> IndexState: ...
    def save_state(self, state: IndexState) -> None: ...
    def reset(self) -> None:
        """Delete this tenant's vectors and state for the current identity."""
        ...

    def close(self) -> None: ...


def check_vector(
    identity: EmbeddingIdentity, dimension: int | None, vector: Sequence[float]
) -> None:
    """Refuse a vector whose size says it came from another model."""
    if dimension is not None and len(vector) != dimension:
        raise EmbeddingMismatch(
            f"query vector has {len(vector)} dimensions but the index for {identity} holds "
            f"{dimension}-dimensional vectors: the embeddings changed without a new identity; "
            "give the model a distinct name/version and run `beeweave reindex`"
        )


_SAFE = re.compile(r"[^a-zA-Z0-9_-]+")


def safe_name(*parts: str, limit: int = 40) -> str:
    """A readable, backend-safe slug of ``parts`` plus a hash that keeps it unique."""
    raw = "\x1f".join(parts)
    slug = _SAFE.sub("-", "-".join(parts)).strip("-_")[:limit] or "x"
    return f"{slug}-{hashlib.sha1(raw.encode()).hexdigest()[:10]}"


def chunk_metadata(chunk: Chunk, identity: EmbeddingIdentity) -> dict[str, Any]:
    """Flat metadata every backend stores with a vector (no ``None`` values)."""
    meta: dict[str, Any] = {
        "event_id": chunk.event_id,
        "session_id": chunk.session_id,
        "seq": chunk.seq,
        "ts": chunk.ts,
        "type": chunk.type.value,
        "part": chunk.part,
        "embedding_model": identity.name,
        "embedding_version": identity.version,
        "index_recipe": identity.recipe,
        "scope": chunk.scope or UNSCOPED,
    }
    if chunk.user_id is not None:
        meta["user_id"] = str(chunk.user_id)
    if chunk.agent_id is not None:
        meta["agent_id"] = str(chunk.agent_id)
    return meta


class VectorHome(Protocol):
    """What indexing asks of the backend it runs on (``backends.Backend`` is one): the
    events to embed, the vector index it opens, and the packages that index needs."""

    @property
    def events(self) -> SessionReader: ...

    def vectors(
        self,
        identity: EmbeddingIdentity,
        *,
        embeddings: object = None,
        kind: str = "auto",
        vector_url: str | None = None,
    ) -> VectorIndex: ...

    def required_packages(
        self, *, kind: str = "auto", vector_url: str | None = None
    ) -> list[str]: ...
