"""BeeWeave for LlamaIndex: instrumentation capture, a drop-in memory, a memory block, a retriever.

Thin translators into :mod:`beeweave_core`; storage, ranking and token budgets live there.
"""

from .instrumentation import BeeWeaveEventHandler, BeeWeaveSpanHandler, instrument, session_tags
from .memory import BeeWeaveChatMemory, BeeWeaveMemoryBlock
from .retriever import BeeWeaveRetriever

__all__ = [
    "BeeWeaveChatMemory",
    "BeeWeaveEventHandler",
    "BeeWeaveMemoryBlock",
    "BeeWeaveRetriever",
    "BeeWeaveSpanHandler",
    "instrument",
    "session_tags",
]
