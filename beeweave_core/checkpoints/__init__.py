"""LangGraph checkpoint storage on BeeWeave's backends (framework-free: typed bytes in/out).

``open_checkpoint_store(weave)`` gives the store that lives beside a weave's events:
the same SQLite file, or the same Neo4j database (sharing the event store's driver).
"""

from __future__ import annotations

from typing import Any

from .base import (
    BranchInfo,
    CheckpointRow,
    CheckpointStore,
    CheckpointStoreError,
    TreeNode,
    Typed,
    WriteRow,
)

__all__ = [
    "BranchInfo",
    "CheckpointRow",
    "CheckpointStore",
    "CheckpointStoreError",
    "TreeNode",
    "Typed",
    "WriteRow",
    "open_checkpoint_store",
]


def open_checkpoint_store(weave: Any) -> CheckpointStore:
    """The checkpoint store beside ``weave``'s event store (same file / same database)."""
    from ..stores.sqlite import SQLiteEventStore

    events = weave.store
    if isinstance(events, SQLiteEventStore):
        from .sqlite import SQLiteCheckpointStore

        if events.path == ":memory:":  # one in-memory database per connection: share it
            return SQLiteCheckpointStore(
                ":memory:", tenant=events.tenant, _shared=(events._conn, events._lock)
            )
        return SQLiteCheckpointStore(events.path, tenant=events.tenant)
    driver = getattr(events, "driver", None)
    if driver is not None:
        from .neo4j import Neo4jCheckpointStore

        return Neo4jCheckpointStore(
            driver, tenant=events.tenant, database=getattr(events, "database", None)
        )
    raise TypeError(
        f"no checkpoint store for event store {type(events).__name__}: "
        "expected SQLiteEventStore or a Neo4j store exposing .driver"
    )
