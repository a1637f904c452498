"""What every backend does the same way, so a new one writes only what is its own.

A backend subclass supplies four things: how to open its checkpoint store and item
index beside the events, its own vector index (if it has one), and where Chroma goes
when it has none.  Choosing the vector index, tracking what was opened and closing it
in order are the same for all, and live here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

if TYPE_CHECKING:
    from beeweave_core.checkpoints import AsyncCheckpointStore, CheckpointStore
    from beeweave_core.index.base import EmbeddingIdentity, VectorIndex
    from beeweave_core.items import ItemIndex
    from beeweave_core.store import EventStore

#: Vector index kinds a weave may name; ``auto`` lets the backend choose.
VECTOR_KINDS = ("auto", "chroma", "neo4j")
#: What an embedded (or server) Chroma index imports.
CHROMA_PACKAGES = ("chromadb",)


class _Closeable(Protocol):
    def close(self) -> None: ...


_Part = TypeVar("_Part", bound=_Closeable)


class BackendBase(ABC):
    """The shared half of a backend: vector choice, opened parts, ordered close.

    ``native_vectors`` names the backend's own vector index kind; ``"chroma"`` means
    it has none and Chroma is the default.
    """

    native_vectors: ClassVar[str] = "chroma"

    def __init__(self, url: str, events: EventStore) -> None:
        self.url = url
        self.tenant = events.tenant
        self._events = events
        self._opened: list[_Closeable] = []
        self._closed = False

    @property
    def events(self) -> EventStore:
        return self._events

    # ---------------------------------------------------------- what subclasses give
    @abstractmethod
    def _open_checkpoints(self) -> CheckpointStore:
        """A new checkpoint store beside the events (same file / database)."""

    @abstractmethod
    def _open_items(self) -> ItemIndex:
        """A new item index beside the events (same file / database)."""

    def _open_native_vectors(self, identity: EmbeddingIdentity) -> VectorIndex:
        raise NotImplementedError(f"{type(self).__name__} has no vector index of its own")

    @abstractmethod
    def chroma_location(self) -> str | None:
        """Where this backend's own Chroma lives (a directory; None: in memory)."""

    @abstractmethod
    def vector_key(self) -> str:
        """What names this store on a shared Chroma (server or directory given by URL)."""

    # ------------------------------------------------------------ parts beside events
    def _track(self, open_part: Callable[[], _Part]) -> _Part:
        if self._closed:
            raise RuntimeError(f"backend {self.url!r} is closed")
        part = open_part()
        self._opened.append(part)
        return part

    def checkpoints(self) -> CheckpointStore:
        return self._track(self._open_checkpoints)

    def items(self) -> ItemIndex:
        return self._track(self._open_items)

    def async_checkpoints(self) -> AsyncCheckpointStore | None:
        """The checkpoint writes as coroutines, when the backend has an async driver
        (None: the async saver runs the sync store on a worker thread).  Its owner
        closes it with ``aclose`` in the event loop it ran in."""
        return None

    # ------------------------------------------------------------------- vectors
    def vector_kind(self, kind: str = "auto", vector_url: str | None = None) -> str:
        """``auto`` is the backend's own index, or Chroma when a ``vector_url`` is given."""
        choice = kind.lower() if isinstance(kind, str) else kind
        if choice not in VECTOR_KINDS:
            raise ValueError(
                f"unknown index {kind!r}: expected 'chroma', 'neo4j', False or a VectorIndex"
            )
        if choice == "auto":
            return self.native_vectors if vector_url is None else "chroma"
        if choice not in ("chroma", self.native_vectors):
            raise ValueError(f"index={choice!r} needs a {choice} store, not {self.url!r}")
        return choice

    def vectors(
        self,
        identity: EmbeddingIdentity,
        *,
        embeddings: object = None,
        kind: str = "auto",
        vector_url: str | None = None,
    ) -> VectorIndex:
        if self.vector_kind(kind, vector_url) != "chroma":
            return self._open_native_vectors(identity)
        from beeweave_core.index import open_chroma

        shared = vector_url is not None
        return open_chroma(
            tenant=self.tenant,
            identity=identity,
            embeddings=embeddings,
            location=vector_url if shared else self.chroma_location(),
            shared_key=self.vector_key() if shared else None,
        )

    def required_packages(self, *, kind: str = "auto", vector_url: str | None = None) -> list[str]:
        """Import names the chosen vector index needs (its driver is already imported)."""
        return list(CHROMA_PACKAGES) if self.vector_kind(kind, vector_url) == "chroma" else []

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the parts opened beside the events (newest first), then the events."""
        if self._closed:
            return
        self._closed = True
        failed: list[Exception] = []
        for part in reversed(self._opened):
            try:
                part.close()
            except Exception as exc:  # the events must still be closed
                failed.append(exc)
        self._opened.clear()
        self._events.close()
        if failed:
            raise failed[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, tenant={self.tenant!r})"
