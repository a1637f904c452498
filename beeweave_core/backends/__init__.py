"""The backend seam: one object per store URL that opens everything living beside the events.

A URL is looked at here and nowhere else.  ``open_backend`` picks the backend from its
scheme; the backend then hands out the event store, the checkpoint store and item index
in the same file or database (sharing its connection or driver), and the vector index
that suits it.  Nothing else in BeeWeave asks what kind of store it holds.

Adding a backend: a folder ``backends/<name>/`` whose ``__init__.py`` defines a class
satisfying :class:`Backend` (usually by extending
:class:`~beeweave_core.backends.common.BackendBase`), and one branch in
:func:`open_backend` for its scheme.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from beeweave_core.backends.common import VECTOR_KINDS
from beeweave_core.index.base import VectorHome
from beeweave_core.paths import default_url

if TYPE_CHECKING:
    from beeweave_core.backends.neo4j.auth import AuthSpec
    from beeweave_core.checkpoints import AsyncCheckpointStore, CheckpointStore
    from beeweave_core.items import ItemIndex
    from beeweave_core.store import EventStore

SQLITE_PREFIX = "sqlite:///"
NEO4J_SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")

__all__ = [
    "NEO4J_SCHEMES",
    "VECTOR_KINDS",
    "Backend",
    "open_backend",
    "sqlite_path",
    "store_exists",
    "store_url",
]


@runtime_checkable
class Backend(VectorHome, Protocol):
    """Everything a weave stores, opened from one URL, closed together: the event graph
    (``events``, the source of truth) and the vector index it opens (``vectors``, with the
    packages it needs: ``required_packages``; see ``index.base.VectorHome``), and these."""

    url: str
    tenant: str

    @property
    def events(self) -> EventStore:
        """The event graph, the source of truth (all of it: the weave reads and writes it)."""
        ...

    def checkpoints(self) -> CheckpointStore:
        """A checkpoint store beside the events; closed with the backend."""
        ...

    def items(self) -> ItemIndex:
        """An item index beside the events; closed with the backend."""
        ...

    def async_checkpoints(self) -> AsyncCheckpointStore | None:
        """The checkpoint store's writes as coroutines (None: the backend has no
        async driver); not closed with the backend: its owner awaits ``aclose``."""
        ...

    def vector_kind(self, kind: str = "auto", vector_url: str | None = None) -> str:
        """The vector index ``kind`` resolves to (``auto``: this backend's default)."""
        ...

    def close(self) -> None:
        """Close what the backend opened: checkpoints, items, then the events."""
        ...


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite:///`` URL (``:memory:`` included)."""
    if not url.lower().startswith(SQLITE_PREFIX):
        raise ValueError(f"bad SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////abs.db")
    path = url[len(SQLITE_PREFIX) :]
    if not path:
        raise ValueError(f"bad SQLite URL {url!r}: no file path")
    return path


def store_url(conn_string: str | None) -> str | None:
    """A ``SqliteSaver``-style path (``"agent.db"``, ``":memory:"``) or a BeeWeave URL, as a URL.

    ``Weave.open`` and every ``from_conn_string`` read a plain path the same way: a file.
    """
    if not isinstance(conn_string, str) or "://" in conn_string:
        return conn_string
    return SQLITE_PREFIX + conn_string


def store_exists(url: str | None) -> bool:
    """Whether the store a URL names is already there (a server is assumed to be): what a
    read checks first, so that reading a mistyped path creates nothing."""
    url = store_url(url) or default_url()
    if _scheme(url) != "sqlite":
        return True
    path = sqlite_path(url)
    return path == ":memory:" or os.path.exists(path)


def _check_neo4j_url(url: str) -> None:
    """The driver accepts a URL without host or with a bad port and fails later; fail now."""
    parts = urlsplit(url)
    try:
        _ = parts.port
    except ValueError:
        raise ValueError(f"bad Neo4j URL {url!r}: the port must be a number") from None
    if not parts.hostname:
        raise ValueError(f"bad Neo4j URL {url!r}: no host (e.g. bolt://localhost:7687)")


def _scheme(url: object) -> str:
    if not isinstance(url, str):
        raise ValueError(f"store URL must be a string, got {type(url).__name__}")
    try:
        return urlsplit(url).scheme.lower()
    except ValueError as exc:
        raise ValueError(f"bad store URL {url!r}: {exc}") from None


def open_backend(
    url: str | None = None,
    *,
    tenant: str = "default",
    auth: AuthSpec = None,
    database: str | None = None,
    **store_options: Any,
) -> Backend:
    """Open the backend a URL names; a bad URL is a one-line ``ValueError`` saying why.

    ``None`` is the embedded default file.  ``auth`` and ``database`` are Neo4j's (a
    SQLite file has neither); ``store_options`` go to the event store.
    """
    url = store_url(url) or default_url()
    scheme = _scheme(url)
    if scheme == "sqlite":
        from beeweave_core.backends.sqlite import SQLiteBackend

        return SQLiteBackend(sqlite_path(url), url=url, tenant=tenant, **store_options)
    if scheme in NEO4J_SCHEMES:
        _check_neo4j_url(url)
        from beeweave_core.backends.neo4j import Neo4jBackend

        return Neo4jBackend(url, tenant=tenant, auth=auth, database=database, **store_options)
    raise ValueError(
        f"unsupported store URL {url!r}: expected sqlite:///path or one of "
        + ", ".join(f"{s}://" for s in NEO4J_SCHEMES)
    )
