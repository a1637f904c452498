"""``BeeWeaveRetriever``: BeeWeave's fused recall as a LlamaIndex ``BaseRetriever``.

Every node is one stored event; its metadata says where it came from (event id,
session, turn, time, type, user/agent, the path scores and the provenance ids), so a
query engine's citations point back into the event graph.  Ranking is
``weave.retrieve``'s — nothing is re-scored here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from beeweave_core.retrieval import Hit
from beeweave_core.weave import Weave

#: Metadata an LLM reads with the node text; the rest stays out of the prompt and embedding.
LLM_METADATA_KEYS = ("event_type", "session_id", "time")


def hit_to_node(hit: Hit) -> NodeWithScore:
    """One retrieval hit as a ``NodeWithScore`` whose metadata carries the provenance.

    Metadata stays flat (scalars and lists of scalars), as LlamaIndex vector stores and
    metadata filters expect: per-path scores become ``score_<path>`` keys.
    """
    ev = hit.event
    meta = hit.metadata()
    meta["event_type"] = meta.pop("type")
    meta["paths"] = sorted(hit.paths, key=lambda p: hit.ranks.get(p, 1 << 30))
    meta.update({f"score_{path}": score for path, score in hit.paths.items()})
    node = TextNode(
        id_=ev.id,
        text=ev.content,
        metadata=meta,
        excluded_llm_metadata_keys=[k for k in meta if k not in LLM_METADATA_KEYS],
        excluded_embed_metadata_keys=list(meta),
    )
    return NodeWithScore(node=node, score=hit.score)


class BeeWeaveRetriever(BaseRetriever):
    """Recall past events (one session, everything a user did, or the tenant) as nodes.

    ``session_id`` limits recall to one session (and feeds the "recent" path);
    ``user_id`` widens it to every session of that user — how an agent in one framework
    finds what an agent in another did for the same person; neither searches the whole
    tenant.  ``filters`` (types, since, until, tags, user_id, agent_id), ``paths`` and
    ``scope`` go to :meth:`beeweave_core.retrieval.Retriever.retrieve`.  ``flush`` first
    writes what the capture bus still holds, so recall sees everything recorded so far.

    Args:
        weave: The open weave to recall from.
        k: How many nodes.
        session_id: Limits recall to one session.
        user_id: Widens recall to every session of that user.
        filters: ``types``, ``since``, ``until``, ``tags``, ``user_id``, ``agent_id``.
        paths: The recall paths to use (default: all that apply).
        scope: ``"session"``, ``"user"`` or ``"tenant"``, over the inferred one.
        scopes: Business lines to recall from (within the weave's).
        flush: First write what the capture bus still holds.
        callback_manager: LlamaIndex's callback manager.
        verbose: LlamaIndex's verbose flag.

    Raises:
        TypeError: ``weave`` is not a :class:`~beeweave_core.Weave`.
        ValueError: ``k`` is not a positive int.
    """

    def __init__(
        self,
        weave: Weave,
        *,
        k: int = 10,
        session_id: str | None = None,
        user_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        paths: Sequence[str] | None = None,
        scope: str | None = None,
        scopes: Sequence[str] | None = None,
        flush: bool = True,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not isinstance(weave, Weave):
            raise TypeError(f"weave must be a beeweave_core.Weave, got {type(weave).__name__}")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        self.weave = weave
        self.k = k
        self.session_id = session_id
        self.user_id = user_id
        self.filters = dict(filters) if filters else None
        self.paths = list(paths) if paths else None
        self.scope = scope
        self.scopes = list(scopes) if scopes else None  # business lines (beeweave_core.scopes)
        self.flush = flush
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _params(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "user_id": self.user_id,
            "k": self.k,
            "filters": self.filters,
            "paths": self.paths,
            "scope": self.scope,
            "scopes": self.scopes,
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.flush:
            self.weave.flush()
        hits = self.weave.retrieve(query_bundle.query_str, **self._params())
        return [hit_to_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.flush:
            await asyncio.to_thread(self.weave.flush)
        hits = await self.weave.aretrieve(query_bundle.query_str, **self._params())
        return [hit_to_node(h) for h in hits]
