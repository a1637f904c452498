"""The interface BeeWeave's built-in embedding models implement, and the error one raises
when its files are missing.  Both models (``embeddings.py``: MiniLM; ``e5_embeddings.py``:
multilingual-e5-small) build on it, and ``embeddings.py`` chooses between them, so it
lives below both.

The core imports no framework: the LangChain ``Embeddings`` view of these models is
``beeweave_langchain.BeeWeaveEmbeddings``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """What BeeWeave needs of an embedding model: one vector per text, one for a query.

    LangChain's ``Embeddings`` has the same two methods, so any LangChain embedding model
    (``OpenAIEmbeddings`` …) serves as one as it is.  The built-in models implement this
    and nothing more.
    """

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class EmbeddingModelUnavailable(RuntimeError):
    """The model or tokenizer file cannot be found or does not verify."""


__all__ = ["Embedder", "EmbeddingModelUnavailable"]
