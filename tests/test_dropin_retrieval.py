"""Retrieve right after writing: ``flush(wait_index=True)`` makes the vectors current, and
the semantic floor keeps unrelated events of other sessions from being ranked by meaning.
SQLite, Chroma and the offline MiniLM embeddings are real."""

from __future__ import annotations

from beeweave_core.retrieval import SEMANTIC_FLOOR

ANSWER = "The spare car key hangs on the hook behind the pantry door."
NOISE = [
    "Quarterly revenue grew by four percent.",
    "The printer on the second floor is jammed again.",
    "Remember to water the tomatoes on Sunday.",
    "The hiking club meets at the old station.",
]


def test_flush_wait_index_then_retrieve_ranks_the_answer_first(weave_factory, tmp_path):
    weave = weave_factory(vector_url=str(tmp_path / "vectors"))
    weave.emit("user_message", ANSWER, session_id="household")
    for i, text in enumerate(NOISE):
        weave.emit("user_message", text, session_id=f"other-{i}")
    assert weave.flush(60, wait_index=True)
    assert weave.indexer.pending == 0  # every vector is built: nothing left in the background
    query = "where do we keep the extra key for the car?"
    sims = dict(weave.indexer.query(query, k=10))
    by_text = {
        e.content: e.id for s in weave.store.sessions() for e in weave.store.timeline(s.session_id)
    }
    assert sims[by_text[ANSWER]] >= SEMANTIC_FLOOR
    below = [t for t in NOISE if sims.get(by_text[t], 0.0) < SEMANTIC_FLOOR]
    assert below  # the floor has something to drop here
    hits = weave.retrieve(query, scope="tenant", k=5)
    assert hits[0].event.content == ANSWER
    for h in hits:
        if h.event.content in below:
            assert "semantic" not in h.paths  # not ranked by a meaning it does not share
