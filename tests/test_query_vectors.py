"""Query vectors are computed once, even when an assembly's early start and its semantic
search ask for the same one at the same time (real MiniLM model)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from beeweave_core.embeddings import MiniLMEmbeddings
from beeweave_core.index import query_vectors
from beeweave_core.weave import Weave


class CountingModel:
    """The real offline model, counting the queries it embeds (and able to hold one)."""

    def __init__(self) -> None:
        self.model = MiniLMEmbeddings()
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        self.gate.wait(10)
        return self.model.embed_query(text)


def counted(weave: Weave) -> CountingModel:
    """Once what was emitted is indexed: the weave's own model, counted (no query
    vector remembered from before)."""
    weave.flush(30, wait_index=True)
    assert weave.indexer is not None
    model = CountingModel()
    model.model = weave.indexer.embeddings  # type: ignore[assignment]
    weave.indexer.embeddings = model  # type: ignore[assignment]
    query_vectors.forget()
    return model


def test_a_query_asked_while_it_is_being_embedded_waits_for_that_vector() -> None:
    model = CountingModel()
    model.gate.clear()  # the early start holds the model
    query_vectors.start(model, "which harbour did the ferry leave from")
    got: list[tuple[float, ...]] = []
    asker = threading.Thread(
        target=lambda: got.append(
            query_vectors.vector(model, "which harbour did the ferry leave from")
        )
    )
    asker.start()
    asker.join(0.3)
    assert asker.is_alive()  # waiting on the running computation, not computing its own
    model.gate.set()
    asker.join(10)
    assert model.calls == 1
    direct = np.asarray(model.model.embed_query("which harbour did the ferry leave from"))
    assert np.allclose(np.asarray(got[0]), direct / np.linalg.norm(direct), atol=1e-5)
    assert query_vectors.vector(model, "which harbour did the ferry leave from") == got[0]
    assert model.calls == 1
    query_vectors.forget()
    query_vectors.vector(model, "which harbour did the ferry leave from")
    assert model.calls == 2


def test_a_failed_embedding_is_reported_to_the_asker_and_not_remembered() -> None:
    class Broken(CountingModel):
        def embed_query(self, text: str) -> list[float]:
            self.calls += 1
            raise RuntimeError("model file unreadable")

    model = Broken()
    query_vectors.start(model, "a query the model cannot read")
    with pytest.raises(RuntimeError, match="unreadable"):
        query_vectors.vector(model, "a query the model cannot read")
    with pytest.raises(RuntimeError):
        query_vectors.vector(model, "a query the model cannot read")
    assert model.calls >= 2  # tried again, not answered from a remembered failure


def test_assemble_embeds_its_query_once(tmp_path: object) -> None:
    weave = Weave.open(f"sqlite:///{tmp_path}/q.db", spool_dir=f"{tmp_path}/spool")
    try:
        for i, text in enumerate(
            ["the ferry to the island leaves at dawn", "pack the blue tent", "call the marina"]
        ):
            weave.emit("user_message" if i % 2 == 0 else "assistant_message", text,
                       session_id="trip", role="user" if i % 2 == 0 else "assistant")  # fmt: skip
        model = counted(weave)
        weave.assemble("trip", "when does the boat go", budget_tokens=500)
        assert model.calls == 1
    finally:
        weave.close()


def test_the_wait_for_the_query_vector_reads_the_graph_and_changes_no_hit(tmp_path: object) -> None:
    """While the query is embedded (held here by a gate on the real model), recall reads
    the graph around the seeds the other paths found; the hits are the ones a recall
    whose vector was ready at once gives (nothing read ahead)."""
    weave = Weave.open(f"sqlite:///{tmp_path}/g.db", spool_dir=f"{tmp_path}/spool")
    try:
        parent = None
        for i, text in enumerate(
            ["book a cabin near the glacier for four nights", "the lodge quoted 180 per night",
             "ask whether the lodge has a sauna", "the sauna closes at nine in winter",
             "reserve the lodge then, two rooms", "confirmation number LDG-5521 arrived"]
        ):  # fmt: skip
            user = i % 2 == 0
            parent = weave.emit("user_message" if user else "assistant_message", text,
                                session_id="trip", role="user" if user else "assistant",
                                parents=[parent] if parent else [])  # fmt: skip
        model = counted(weave)
        retriever = weave.retriever
        model.gate.clear()
        threading.Timer(0.5, model.gate.set).start()  # the embedding takes half a second
        now = time.time()  # (both recalls at one moment: recency weights alike)
        held = retriever.rankings("what did the lodge cost", session_id="trip", now=now)
        assert held.near  # the graph around the likely seeds was read during the wait
        ready = retriever.rankings("what did the lodge cost", session_id="trip", now=now)
        ready.near.clear()  # the graph path reads every neighbourhood itself
        assert model.calls == 1
        first, second = retriever.fuse(held, k=6), retriever.fuse(ready, k=6)
        assert [(h.event.id, round(h.score, 9)) for h in first] == [
            (h.event.id, round(h.score, 9)) for h in second
        ]
        assert any(h.provenance.via for h in first)  # the graph path took part
    finally:
        weave.close()
