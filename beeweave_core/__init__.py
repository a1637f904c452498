"""BeeWeave core: events, the capture bus, stores, retrieval and context assembly.

Framework-free; the LangChain/LangGraph and LlamaIndex packages translate into it.
"""

from beeweave_core.bus import ContextBus
from beeweave_core.events import (
    AppendResult,
    Edge,
    EdgeType,
    Event,
    EventType,
    SessionStats,
    Status,
)
from beeweave_core.payloads import PayloadError
from beeweave_core.store import EventStore, NotFound, StoreError
from beeweave_core.weave import Weave, beeweave_home, open_store

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
