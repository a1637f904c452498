"""BeeWeave for LangChain and LangGraph: native components over ``beeweave_core``.

=================================  ==========================================================
``BeeWeaveCallbackHandler``        capture any chain / graph run as causal events (+ async)
``BeeWeaveMemory``                 drop-in for ``ConversationBufferMemory`` (layered context)
``BeeWeaveChatMessageHistory``     history for ``RunnableWithMessageHistory``
``BeeWeaveRetriever``              ``BaseRetriever`` over fused recall, with provenance
``beeweave_context_hook``          LangGraph pre-model hook: assembled context + compaction
``BeeWeaveContextMiddleware``      the same for ``langchain.agents.create_agent`` (middleware)
``BeeWeaveCheckpointer``           LangGraph checkpointer on the same store (+ async)
``BeeWeaveStore``                  LangGraph ``BaseStore`` backed by long-term memory
``BeeWeaveKeyValueStore``          LangChain ``BaseStore`` (key-value) on the same memory
``LangChainLLM``                   a chat model as the LLM of summaries / memory extraction
``BeeWeaveEmbeddings``             a BeeWeave embedding model (MiniLM …) as ``Embeddings``
``memory_tools``                   remember / recall / update / forget / list tools (+ files)
=================================  ==========================================================

Names are imported on first use, so ``import beeweave_langchain`` stays cheap and a
component whose optional dependency is missing fails only when it is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BeeWeaveCallbackHandler": "callbacks",
    "AsyncBeeWeaveCallbackHandler": "callbacks",
    "BeeWeaveMemory": "memory",
    "BeeWeaveChatMessageHistory": "history",
    "BeeWeaveRetriever": "retriever",
    "beeweave_context_hook": "hooks",
    "BeeWeaveContextHook": "hooks",
    "BeeWeaveContextMiddleware": "middleware",
    "BeeWeaveCheckpointer": "checkpoint",
    "AsyncBeeWeaveCheckpointer": "checkpoint",
    "BeeWeaveStore": "store",
    "BeeWeaveKeyValueStore": "store",
    "LangChainLLM": "llm",
    "BeeWeaveEmbeddings": "embeddings",
    "memory_tools": "tools",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from beeweave_langchain.callbacks import AsyncBeeWeaveCallbackHandler, BeeWeaveCallbackHandler  # noqa: F401
    from beeweave_langchain.checkpoint import AsyncBeeWeaveCheckpointer, BeeWeaveCheckpointer  # noqa: F401
    from beeweave_langchain.embeddings import BeeWeaveEmbeddings  # noqa: F401
    from beeweave_langchain.history import BeeWeaveChatMessageHistory  # noqa: F401
    from beeweave_langchain.hooks import BeeWeaveContextHook, beeweave_context_hook  # noqa: F401
    from beeweave_langchain.llm import LangChainLLM  # noqa: F401
    from beeweave_langchain.memory import BeeWeaveMemory  # noqa: F401
    from beeweave_langchain.middleware import BeeWeaveContextMiddleware  # noqa: F401
    from beeweave_langchain.retriever import BeeWeaveRetriever  # noqa: F401
    from beeweave_langchain.store import BeeWeaveKeyValueStore, BeeWeaveStore  # noqa: F401
    from beeweave_langchain.tools import memory_tools  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'beeweave_langchain' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
