"""A LangChain retriever over BeeWeave's fused recall (``weave.retrieve``).

Each hit becomes a ``Document`` whose ``id`` is the event id and whose metadata says
where it came from (session, position, time, type, the recall paths that found it
and with which score) — enough for a chain to cite its sources or to walk the event
graph from them.  Ranking lives in :mod:`beeweave_core.retrieval`; this is only the
translation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from beeweave_core.fallback import Fallback
from beeweave_core.retrieval import Hit
from beeweave_core.weave import Weave

#: Per-call options ``invoke(query, k=…, …)`` may override.
CALL_OPTIONS = frozenset({"k", "session_id", "user_id", "filters", "paths", "scope", "scopes"})


def hit_to_document(hit: Hit) -> Document:
    """One retrieval hit → a ``Document`` carrying the hit's provenance."""
    md = hit.metadata()
    md["paths"] = dict(hit.paths)
    return Document(page_content=hit.event.content, metadata=md, id=hit.event.id)


class BeeWeaveRetriever(BaseRetriever):
    """Recall past events of a weave as LangChain ``Document`` s.

    ``invoke(query, k=…)`` and the other :data:`CALL_OPTIONS` can be overridden per
    call (another keyword is a ``TypeError``).  A closed or unreachable store gives no
    documents (one warning): the chain goes on.

    Attributes:
        weave: The open weave to recall from.
        k: How many documents.
        session_id: Limits recall to one session (and feeds the "recent" path).
        user_id: Widens recall to every session of that user; with neither, the whole
            tenant is searched.
        filters: ``types``, ``since``, ``until``, ``tags``, ``user_id``, ``agent_id``
            (see :class:`beeweave_core.retrieval.Filters`).
        paths: The recall paths to use (default: all that apply).
        scope: ``"session"``, ``"user"`` or ``"tenant"``, over the inferred one.
        scopes: Business lines to recall from (within the weave's; see
            ``beeweave_core.scopes``).
        flush: First write what the capture bus still holds, so recall sees everything
            recorded so far.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    weave: Weave = Field(exclude=True)
    k: int = 4
    session_id: str | None = None
    user_id: str | None = None
    filters: dict[str, Any] | None = None
    paths: list[str] | None = None
    scope: str | None = None
    #: Business lines to recall from (within the weave's; see ``beeweave_core.scopes``).
    scopes: list[str] | None = None
    flush: bool = True
    _fallback: Fallback = PrivateAttr(default_factory=lambda: Fallback("BeeWeaveRetriever"))

    def _params(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(overrides) - CALL_OPTIONS
        if unknown:
            raise TypeError(
                f"unknown retriever option(s) {sorted(unknown)}; known: {sorted(CALL_OPTIONS)}"
            )
        params = {
            "k": self.k,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "filters": self.filters,
            "paths": self.paths,
            "scope": self.scope,
            "scopes": self.scopes,
        }
        params.update(overrides)
        return params

    def _search(self, query: str, params: dict[str, Any]) -> list[Document]:
        if self.flush:
            self.weave.flush()
        return [hit_to_document(h) for h in self.weave.retrieve(query, **params)]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """The hits as documents; none (one warning) when the store is closed or down."""
        params = self._params(kwargs)
        return self._fallback.run(lambda: self._search(query, params), list)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        import asyncio

        params = self._params(kwargs)
        return await asyncio.to_thread(
            self._fallback.run, lambda: self._search(query, params), list
        )
