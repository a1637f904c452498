"""``BeeWeaveRetriever``: BeeWeave's fused recall as a LlamaIndex ``BaseRetriever``.

Every node is one stored event; its metadata says where it came from (event id,
session, turn, time, type, user/agent, the path scores and the provenance ids), so a
query engine's citations point back into the event graph.  Ranking is
``weave.retrieve``'s — nothing is re-scored here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from beeweave_core.payloads import to_jsonable

#: Metadata an LLM reads with the node text; the rest stays out of the prompt and embedding.
LLM_METADATA_KEYS = ("event_type", "session_id", "time")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _flat(value: Any) -> Any:
    """Node metadata must stay JSON (LlamaIndex serialises nodes); lists of scalars are fine."""
    value = to_jsonable(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return value
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def hit_to_node(hit: Any) -> NodeWithScore:
    """One retrieval hit as a ``NodeWithScore`` whose metadata carries the provenance."""
    event = _get(hit, "event")
    if event is None:
        raise TypeError(f"expected a retrieval hit with an .event, got {type(hit).__name__}")
    meta: dict[str, Any] = {
        "event_id": event.id,
        "event_type": getattr(event.type, "value", event.type),
        "session_id": event.session_id,
        "seq": event.seq,
        "ts": event.ts,
        "time": event.time.isoformat(),
        "role": event.role,
        "user_id": event.user_id,
        "agent_id": event.agent_id,
        "tenant": event.tenant,
    }
    prov = _get(hit, "provenance")
    if prov is not None:
        prov = prov.model_dump(mode="json") if hasattr(prov, "model_dump") else to_jsonable(prov)
        if isinstance(prov, Mapping):
            for k, v in prov.items():
                meta.setdefault(f"provenance_{k}" if k in meta else k, _flat(v))
        else:
            meta["provenance"] = _flat(prov)
    meta.setdefault("event_ids", [event.id])
    for name in ("path_scores", "scores", "paths"):
        value = _get(hit, name)
        if value:
            meta[name] = _flat(value)
    meta = {k: _flat(v) for k, v in meta.items() if v is not None}
    node = TextNode(
        id_=event.id,
        text=event.content,
        metadata=meta,
        excluded_llm_metadata_keys=[k for k in meta if k not in LLM_METADATA_KEYS],
        excluded_embed_metadata_keys=list(meta),
    )
    score = _get(hit, "score")
    return NodeWithScore(node=node, score=float(score) if score is not None else None)


class BeeWeaveRetriever(BaseRetriever):
    """Recall past events (this session, or everything a user did) as LlamaIndex nodes.

    ``session_id=None`` with a ``user_id`` searches every session of that user — the way
    an agent in one framework finds what an agent in another did for the same person.
    """

    def __init__(
        self,
        weave: Any,
        *,
        k: int = 10,
        session_id: str | None = None,
        user_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        paths: Sequence[str] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not callable(getattr(weave, "retrieve", None)):
            raise TypeError(f"weave must be a beeweave_core.Weave, got {type(weave).__name__}")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        self.weave = weave
        self.k = k
        self.session_id = session_id
        self.user_id = user_id
        self.filters = dict(filters) if filters else None
        self.paths = list(paths) if paths else None
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _kwargs(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "user_id": self.user_id, "k": self.k,
                "filters": self.filters, "paths": self.paths}  # fmt: skip

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.weave.retrieve(query_bundle.query_str, **self._kwargs())
        return [hit_to_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await self.weave.aretrieve(query_bundle.query_str, **self._kwargs())
        return [hit_to_node(h) for h in hits]
