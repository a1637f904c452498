"""``BeeWeaveRetriever``: nodes with provenance, scopes, async, and capture of its use.

Real SQLite store, real offline MiniLM embeddings and Chroma index; the only fake is
LlamaIndex's ``MockLLM`` in the query-engine test.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore

from beeweave_core.events import EventType
from beeweave_llamaindex import BeeWeaveRetriever, instrument

DECISION = "We decided to run the billing service on PostgreSQL 16 with daily backups."


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One weave with three sessions: two of user U, one of user V."""
    from beeweave_core import Weave

    tmp = tmp_path_factory.mktemp("retriever")
    weave = Weave.open(f"sqlite:///{tmp}/w.db", spool_dir=tmp / "spool", tenant="t-retriever")
    says = [
        ("A", "U", "user_message", "Which database should billing use?"),
        ("A", "U", "assistant_message", DECISION),
        ("A", "U", "user_message", "ok thanks"),
        ("B", "U", "user_message", "What's the weather like in Lisbon?"),
        ("C", "V", "assistant_message", "We decided to run the blog on MySQL 8."),
    ]
    for sid, uid, etype, text in says:
        weave.emit(etype, text, session_id=sid, meta={"user_id": uid, "agent_id": "a1"},
                   role="user" if etype == "user_message" else "assistant")  # fmt: skip
    assert weave.flush()
    yield weave
    weave.close()


def test_is_a_llamaindex_retriever_with_provenance(recorded: Any) -> None:
    retriever = BeeWeaveRetriever(recorded, user_id="U", k=3)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("which database did we pick for billing?")
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    top = next(n for n in nodes if n.node.get_content() == DECISION)  # ranking is core's job
    meta = top.node.metadata
    (event,) = recorded.store.get([meta["event_id"]])
    assert top.node.node_id == event.id
    assert (meta["session_id"], meta["seq"], meta["event_type"]) == (
        "A",
        event.seq,
        "assistant_message",
    )
    assert meta["user_id"] == "U" and meta["agent_id"] == "a1" and meta["ts"] == event.ts
    hits = recorded.retrieve("which database did we pick for billing?", user_id="U", k=3)
    assert [n.node.node_id for n in nodes] == [h.event.id for h in hits]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in hits])
    hit = next(h for h in hits if h.event.id == event.id)
    assert set(meta["paths"]) == set(hit.paths) and meta["score"] == pytest.approx(hit.score)
    assert {k: v for k, v in meta.items() if k.startswith("score_")} == pytest.approx(
        {f"score_{p}": s for p, s in hit.paths.items()}
    )
    assert {n.node.metadata["session_id"] for n in nodes} <= {"A", "B"}  # never user V's


def test_llm_sees_text_and_little_metadata(recorded: Any) -> None:
    (node,) = BeeWeaveRetriever(recorded, session_id="A", k=1).retrieve("billing database")
    text = node.node.get_content()
    llm_text = node.node.get_content(metadata_mode=MetadataMode.LLM)
    assert text in llm_text and "session_id: A" in llm_text and "event_type: " in llm_text
    assert node.node.metadata["event_id"] not in llm_text and "score" not in llm_text
    assert node.node.get_content(metadata_mode=MetadataMode.EMBED) == text


def test_scopes_and_filters(recorded: Any) -> None:
    only_b = BeeWeaveRetriever(recorded, session_id="B", k=5).retrieve("database")
    assert {n.node.metadata["session_id"] for n in only_b} == {"B"}
    users = BeeWeaveRetriever(recorded, user_id="U", k=10,
                              filters={"types": ["user_message"]}).retrieve("database")  # fmt: skip
    assert users and {n.node.metadata["event_type"] for n in users} == {"user_message"}
    tenant = BeeWeaveRetriever(recorded, k=10).retrieve("which database did we decide on?")
    assert {"A", "C"} <= {n.node.metadata["session_id"] for n in tenant}


async def test_async_matches_sync(recorded: Any) -> None:
    r = BeeWeaveRetriever(recorded, user_id="U", k=4)
    sync = [n.node.node_id for n in r.retrieve("billing PostgreSQL")]
    asy = [n.node.node_id for n in await r.aretrieve("billing PostgreSQL")]
    assert sync == asy and sync


def test_bad_arguments(recorded: Any) -> None:
    with pytest.raises(ValueError, match="k must be"):
        BeeWeaveRetriever(recorded, k=0)
    with pytest.raises(TypeError, match="beeweave_core.Weave"):
        BeeWeaveRetriever(object())
    with pytest.raises(ValueError, match="unknown path"):
        BeeWeaveRetriever(recorded, paths=["telepathy"]).retrieve("x")


def test_query_engine_citations_and_capture(weave_factory: Any) -> None:
    """A RetrieverQueryEngine over BeeWeave cites events; instrumentation records the query."""
    weave = weave_factory("sqlite")
    weave.emit("assistant_message", DECISION, session_id="past", meta={"user_id": "U"})
    assert weave.flush()
    instrument(weave, session_id="rag")
    engine = RetrieverQueryEngine.from_args(
        BeeWeaveRetriever(weave, user_id="U", k=2),
        llm=MockLLM(),  # FAKE LLM (echoes its prompt)
    )
    response = engine.query("What database does billing run on?")
    assert DECISION in str(response)  # MockLLM echoes the prompt, which holds the context
    assert response.source_nodes[0].node.metadata["session_id"] == "past"
    assert weave.flush()
    events = weave.store.timeline("rag")
    types = [e.type for e in events]
    assert types[:2] == [EventType.USER_MESSAGE, EventType.RETRIEVAL]
    assert EventType.MODEL_CALL in types and types[-1] == EventType.ASSISTANT_MESSAGE
    user, retrieval = events[0], events[1]
    assert user.content == "What database does billing run on?"
    assert retrieval.parents == (user.id,)
    assert retrieval.payload["hits"][0]["text"] == DECISION
    assert retrieval.payload["hits"][0]["metadata"]["session_id"] == "past"
    call = next(e for e in events if e.type == EventType.MODEL_CALL)
    assert set(call.parents) == {user.id, retrieval.id}
