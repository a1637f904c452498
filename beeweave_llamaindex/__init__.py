"""BeeWeave for LlamaIndex: instrumentation capture, a drop-in memory, a memory block, a retriever.

Thin translators into :mod:`beeweave_core`; storage, ranking and token budgets live there.
"""

from .instrumentation import BeeWeaveEventHandler, BeeWeaveSpanHandler, instrument, session_tags

__all__ = ["BeeWeaveEventHandler", "BeeWeaveSpanHandler", "instrument", "session_tags"]
