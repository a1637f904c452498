"""BeeWeave core: events, the capture bus, stores, retrieval and context assembly.

Framework-free; the LangChain/LangGraph and LlamaIndex packages translate into it.
"""

from .bus import ContextBus
from .events import AppendResult, Edge, EdgeType, Event, EventType, SessionStats, Status
from .payloads import PayloadError
from .stores.base import EventStore, NotFound, StoreError
from .weave import Weave, beeweave_home, open_store

__all__ = [
    "AppendResult",
    "ContextBus",
    "Edge",
    "EdgeType",
    "Event",
    "EventStore",
    "EventType",
    "NotFound",
    "PayloadError",
    "SessionStats",
    "Status",
    "StoreError",
    "Weave",
    "beeweave_home",
    "open_store",
]
__version__ = "0.1.0"
