"""Event-graph backends behind one protocol (:class:`EventStore`)."""

from .base import CAUSAL_EDGES, BaseEventStore, EventStore, NotFound, StoreError
from .sqlite import SQLiteEventStore

__all__ = [
    "CAUSAL_EDGES",
    "BaseEventStore",
    "EventStore",
    "NotFound",
    "SQLiteEventStore",
    "StoreError",
]
