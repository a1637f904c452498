"""BeeWeave for LlamaIndex: instrumentation capture, a drop-in memory, a memory block, a
retriever, and ``LlamaIndexLLM`` (a LlamaIndex LLM as the LLM of summaries / memory extraction).

Thin translators into :mod:`beeweave_core`; storage, ranking and token budgets live there.
"""

from beeweave_llamaindex.instrumentation import (
    BeeWeaveEventHandler,
    BeeWeaveSpanHandler,
    instrument,
    session_tags,
)
from beeweave_llamaindex.llm import LlamaIndexLLM
from beeweave_llamaindex.memory import BeeWeaveChatMemory, BeeWeaveMemoryBlock
from beeweave_llamaindex.retriever import BeeWeaveRetriever

__all__ = [
    "BeeWeaveChatMemory",
    "BeeWeaveEventHandler",
    "BeeWeaveMemoryBlock",
    "BeeWeaveRetriever",
    "BeeWeaveSpanHandler",
    "LlamaIndexLLM",
    "instrument",
    "session_tags",
]
