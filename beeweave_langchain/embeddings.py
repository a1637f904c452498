"""BeeWeave's embedding models as LangChain ``Embeddings``, for LangChain code that takes one.

The core's models (``MiniLMEmbeddings``, ``MultilingualE5Embeddings``) implement only the
core's :class:`~beeweave_core.embedding_base.Embedder`; a vector store, a retriever or
``CacheBackedEmbeddings`` that asks for ``Embeddings`` gets them through
:class:`BeeWeaveEmbeddings`, which translates and holds no logic of its own.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings

from beeweave_core.embedding_base import Embedder
from beeweave_core.embeddings import default_embeddings


class BeeWeaveEmbeddings(Embeddings):
    """An embedding model of BeeWeave's (any core ``Embedder``) seen as LangChain ``Embeddings``.

    The vectors are the embedder's own.  Its other public attributes (``model_name``,
    ``model_version``, ``offline``, ``embed_array`` …) are read through, so a weave given
    the adapter records the same embedding identity as one given the model and keeps its
    vectors.  ``aembed_documents`` / ``aembed_query`` are LangChain's: the synchronous
    call in a worker thread.

    Args:
        embedder: the model to wrap (default: the one BeeWeave embeds with when given none,
            the shipped offline MiniLM unless ``BEEWEAVE_EMBEDDINGS`` names another; one
            instance shared by the process).

    Raises:
        TypeError: ``embedder`` lacks ``embed_documents`` / ``embed_query``.
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        if embedder is not None and not isinstance(embedder, Embedder):
            raise TypeError(
                "BeeWeaveEmbeddings wraps an embedding model with embed_documents and "
                f"embed_query (e.g. MiniLMEmbeddings()), not {type(embedder).__name__}"
            )
        #: The wrapped model.
        self.embedder: Embedder = embedder if embedder is not None else default_embeddings()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Texts to store, one vector each, in input order.

        Args:
            texts: the texts to embed.

        Returns:
            The embedder's vectors for ``texts``.
        """
        return self.embedder.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """A search query as one vector.

        Args:
            text: the query.

        Returns:
            The embedder's query vector.
        """
        return self.embedder.embed_query(text)

    def __getattr__(self, name: str) -> Any:
        """Public attributes this class lacks are the embedder's (its identity, above all)."""
        embedder = self.__dict__.get("embedder")
        if embedder is None or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(embedder, name)

    def __repr__(self) -> str:
        return f"BeeWeaveEmbeddings({self.embedder!r})"


__all__ = ["BeeWeaveEmbeddings"]
