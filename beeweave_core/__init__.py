"""BeeWeave core: events, the capture bus, stores, retrieval and context assembly.

Framework-free; the LangChain/LangGraph and LlamaIndex packages translate into it.
"""

from beeweave_core.capture import ContextBus
from beeweave_core.config import ContextConfig, IndexConfig, RetrievalConfig, WeaveConfig
from beeweave_core.events import (
    AppendResult,
    Edge,
    EdgeType,
    Event,
    EventType,
    SessionStats,
    Status,
)
from beeweave_core.paths import beeweave_home, default_url
from beeweave_core.payloads import PayloadError
from beeweave_core.store import EventStore, NotFound, StoreError
from beeweave_core.weave import Weave, open_store

__all__ = [
    "AppendResult",
    "ContextBus",
    "ContextConfig",
    "Edge",
    "EdgeType",
    "Event",
    "EventStore",
    "EventType",
    "IndexConfig",
    "NotFound",
    "PayloadError",
    "RetrievalConfig",
    "SessionStats",
    "Status",
    "StoreError",
    "Weave",
    "WeaveConfig",
    "beeweave_home",
    "default_url",
    "open_store",
]
#: The one place the version is written; pyproject.toml reads it (``dynamic``).
__version__ = "0.1.0"
