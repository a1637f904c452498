"""The interface BeeWeave's built-in embedding models implement, and the error one raises
when its files are missing.  Both models (``embeddings.py``: MiniLM; ``e5_embeddings.py``:
multilingual-e5-small) build on it, and ``embeddings.py`` chooses between them, so it
lives below both."""

from __future__ import annotations

try:  # LangChain's interface when installed (the usual case) ...
    from langchain_core.embeddings import Embeddings
except ImportError:  # pragma: no cover - ... else the same two-method shape, so
    # the framework-free core can embed without langchain-core installed.
    from abc import ABC, abstractmethod

    class Embeddings(ABC):  # type: ignore[no-redef]
        """Stand-in for ``langchain_core.embeddings.Embeddings`` (same methods)."""

        @abstractmethod
        def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

        @abstractmethod
        def embed_query(self, text: str) -> list[float]: ...

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            import asyncio

            return await asyncio.to_thread(self.embed_documents, texts)

        async def aembed_query(self, text: str) -> list[float]:
            import asyncio

            return await asyncio.to_thread(self.embed_query, text)


class EmbeddingModelUnavailable(RuntimeError):
    """The model or tokenizer file cannot be found or does not verify."""
