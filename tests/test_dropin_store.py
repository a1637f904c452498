"""``BeeWeaveStore`` next to LangGraph's ``InMemoryStore`` with the same ``index`` config.

The embedding function is a real, deterministic bag-of-character-trigrams hasher written
here (no model): both stores must call it, and report scores that are cosine similarities.
SQLite and the weave's own offline embeddings are real.
"""

from __future__ import annotations

import hashlib
import math

import pytest
from langgraph.store.memory import InMemoryStore

from beeweave_langchain.store import BeeWeaveStore

DIMS = 64
NOTES = {
    "n1": {"text": "the pump in the cellar hums at night", "owner": "ines"},
    "n2": {"text": "invoice for roof repair paid in march", "owner": "ines"},
    "n3": {"text": "cellar pump needs a new float switch", "owner": "tom"},
}


class Counting:
    """Trigram hashing into DIMS buckets; counts the texts it embedded."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        out = []
        for t in texts:
            v = [0.0] * DIMS
            for i in range(len(t) - 2):
                h = int(
                    hashlib.blake2b(t[i : i + 3].lower().encode(), digest_size=4).hexdigest(), 16
                )
                v[h % DIMS] += 1.0 if h & 1 else -1.0
            out.append(v)
        return out


def _fill(store) -> None:
    for key, value in NOTES.items():
        store.put(("house",), key, value)


def test_same_index_config_both_call_embed_and_score_by_cosine(weave_factory):
    mem_embed, bee_embed = Counting(), Counting()
    mem = InMemoryStore(index={"dims": DIMS, "embed": mem_embed, "fields": ["text"]})
    bee = BeeWeaveStore(
        weave_factory(), index={"dims": DIMS, "embed": bee_embed, "fields": ["text"]}
    )
    _fill(mem)
    _fill(bee)
    assert bee_embed.texts == mem_embed.texts == [v["text"] for v in NOTES.values()]  # fields only
    got_mem = mem.search(("house",), query="cellar pump")
    got_bee = bee.search(("house",), query="cellar pump")
    assert len(bee_embed.texts) == len(mem_embed.texts) == 4  # and the query, once each
    assert [i.key for i in got_bee] == [i.key for i in got_mem]
    for a, b in zip(got_mem, got_bee, strict=True):
        assert -1.0 <= b.score <= 1.0
        assert math.isclose(a.score, b.score, rel_tol=1e-6, abs_tol=1e-9)
    assert got_bee[0].rank is None  # ranked by similarity, as InMemoryStore


def test_dims_mismatch_is_a_clear_error(weave_factory):
    store = BeeWeaveStore(weave_factory(), index={"dims": DIMS + 1, "embed": Counting()})
    with pytest.raises(ValueError, match="dims"):
        store.put(("house",), "n1", NOTES["n1"])
    assert store.get(("house",), "n1") is None  # nothing half-written


def test_default_embeddings_score_is_similarity_and_rank_kept(weave_factory):
    weave = weave_factory()
    store = BeeWeaveStore(weave, index={"fields": ["text"]})
    _fill(store)
    got = store.search(("house",), query="who paid to fix the roof")
    assert got[0].key == "n2"
    assert all(-1.0 <= i.score <= 1.0 for i in got if i.score is not None)
    assert got[0].score > 0.3 and got[0].rank is not None
    sessions = {s.session_id for s in weave.store.sessions()}
    assert not any(s.startswith("store:") for s in sessions)  # items are not conversations
    assert len(weave.store.sessions(include_items=True)) == len(NOTES)


def test_search_without_query_keeps_insertion_order_like_in_memory_store(weave_factory):
    mem, bee = InMemoryStore(), BeeWeaveStore(weave_factory(), index=None)
    for store in (mem, bee):
        _fill(store)
        store.put(("house",), "n1", {"text": "updated: the pump is quiet now"})  # keeps its place
    assert [i.key for i in bee.search(("house",))] == [i.key for i in mem.search(("house",))]
    assert [i.key for i in bee.search(("house",), limit=2, offset=1)] == ["n2", "n3"]
