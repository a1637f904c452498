"""Indexing in batches across events, the context recipe, model switches, Chinese recall.

Real parts only: the offline MiniLM (and multilingual-e5-small) models embed every
text, Chroma runs embedded in a temporary directory, the store is a SQLite file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from beeweave_core.e5_embeddings import MultilingualE5Embeddings
from beeweave_core.embeddings import MiniLMEmbeddings, embeddings_named
from beeweave_core.events import EventType
from beeweave_core.index.base import Chunk
from beeweave_core.index.chunking import embed_chunks, embed_query, embed_texts, recipe_key
from beeweave_core.weave import Weave

T0 = 1_700_000_000.0


class CountingMiniLM(MiniLMEmbeddings):
    """The real MiniLM, counting model calls and texts (to show the work is batched)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.texts = 0

    def embed_array(self, texts):  # type: ignore[no-untyped-def]
        items = list(texts)
        self.calls += 1
        self.texts += len(items)
        return super().embed_array(items)


class OtherMiniLM(MiniLMEmbeddings):
    """The same weights under another model name: what switching models looks like."""

    model_name = "all-MiniLM-L6-v2-int8-switched"


def open_weave(tmp_path: Path, **kw: object) -> Weave:
    return Weave.open(f"sqlite:///{tmp_path / 'w.db'}", tenant="t", spool_dir=tmp_path / "sp", **kw)  # type: ignore[arg-type]


HOBBIES = ["pottery", "rock climbing", "sourdough baking", "birdwatching", "chess", "sailing"]


def fill(weave: Weave, sessions: int, per: int) -> None:
    """Many short sessions, as a chat app writes them (one model call each would be slow)."""
    for s in range(sessions):
        for i in range(per):
            hobby = HOBBIES[(s + i) % len(HOBBIES)]
            text = (
                f"On day {s} I spent the whole evening on {hobby} with my old friend number "
                f"{i}, and afterwards we talked until late about plans for the coming weeks."
            )
            weave.emit("user_message", text, session_id=f"day-{s}", meta={"user_id": "u"},
                       ts=T0 + s * 1000 + i)  # fmt: skip
    assert weave.flush(60)


def test_a_backlog_is_embedded_in_few_model_calls_and_becomes_searchable(tmp_path):
    w = open_weave(tmp_path, index=False)
    fill(w, sessions=20, per=6)  # 120 events in 20 sessions, stored with no indexer running
    w.emit("user_message", "My landlord finally fixed the leaking bathroom pipe.",
           session_id="day-20", meta={"user_id": "u"}, ts=T0 + 99_999)  # fmt: skip
    assert w.flush(60)
    w.close()
    model = CountingMiniLM()
    w = open_weave(tmp_path, embeddings=model)
    try:
        assert w.indexer.sync(300)
        assert w.indexer.index.count() == 121
        # one batch of 256 events: one call (the model batches by length itself), not
        # one call per session
        assert model.calls == 1, model.calls
        # long enough texts are read once (their context is their neighbour's vector)
        assert model.texts <= 1.3 * 121, model.texts
        hits = w.retrieve("plumbing repair at the apartment", paths=["semantic"], k=1)
        assert hits and "leaking bathroom pipe" in hits[0].event.content
    finally:
        w.close()


def chunk(n: int, text: str, context: str = "") -> Chunk:
    return Chunk(id=f"e{n}#0", event_id=f"e{n}", text=text, session_id="s", seq=n, ts=T0 + n,
                 type=EventType.USER_MESSAGE, context=context)  # fmt: skip


def test_a_short_reply_is_read_with_what_it_answers():
    model = embeddings_named("minilm")
    question = "How did everyone like the lakeside cabin we rented last spring?"
    reply = chunk(2, "Honestly, loved it.", context=question)
    q = np.asarray(embed_query(model, "what was the opinion of the cabin by the lake"))
    plain = np.asarray(embed_chunks(model, [reply], "plain")[0])
    ctx = np.asarray(embed_chunks(model, [reply], "context")[0])
    assert float(ctx @ q) / 2 > float(plain @ q) + 0.1  # the reply now speaks of the cabin


def test_a_long_text_reuses_its_neighbours_vector_for_context():
    model = CountingMiniLM()
    first = (
        "The quarterly planning meeting moved from Tuesday to Wednesday afternoon because "
        "the finance team needs another day to close the books for the region."
    )
    second = (
        "I will update the shared calendar invitation and tell the three regional leads "
        "that the new slot starts at two o'clock in the large conference room upstairs."
    )
    vectors = embed_chunks(model, [chunk(1, first), chunk(2, second, context=first)], "context")
    assert model.texts == 2  # each text read once: the second's context is the first's vector
    own = model.embed_array([first, second])
    expected = own[1] + (own[0] + own[1]) / np.linalg.norm(own[0] + own[1])
    assert np.allclose(vectors[1], expected, atol=1e-5)
    assert np.allclose(vectors[0], 2 * own[0], atol=1e-5)  # first of its session: itself twice


def test_switching_to_another_offline_model_re_embeds_instead_of_mixing(tmp_path):
    w = open_weave(tmp_path)
    fill(w, sessions=3, per=5)
    assert w.indexer.sync(120)
    old = w.indexer.identity
    w.close()
    w = open_weave(tmp_path, embeddings=OtherMiniLM())
    try:
        assert w.indexer.sync(300)
        idx = w.indexer
        assert idx.identity != old and idx.identity.recipe == recipe_key("context")
        assert idx.index.count() == 15  # every event again, under the new identity
        assert idx.index.other_identities() == {}  # the old vectors are gone, not mixed
        assert not idx.needs_reindex
        hits = w.retrieve("making bread with a starter", paths=["semantic"], k=3)
        assert hits and all("sourdough" in h.event.content for h in hits)
    finally:
        w.close()


def test_a_chinese_question_finds_the_chinese_turn_through_the_dense_path(tmp_path):
    w = open_weave(tmp_path, embeddings=MultilingualE5Embeddings())
    try:
        turns = [
            "下周二上午十点和设计团队开会，讨论新版首页。",
            "我对海鲜过敏，吃虾会全身起红疹。",
            "孩子的钢琴课改到每周六下午三点了。",
            "上个月的电费比平时多了两百块，可能是空调开得太多。",
        ]
        for i, text in enumerate(turns):
            w.emit("user_message", text, session_id="zh", meta={"user_id": "u"}, ts=T0 + i * 60)
        assert w.flush(30) and w.indexer.sync(120)
        hits = w.retrieve("有什么东西不能吃？", paths=["semantic"], k=1)
        assert hits and "海鲜过敏" in hits[0].event.content
        hits = w.retrieve("乐器课程什么时候上", paths=["semantic"], k=1)
        assert hits and "钢琴课" in hits[0].event.content
    finally:
        w.close()


def test_multilingual_model_names_its_weights_and_reads_chinese_and_english():
    model = embeddings_named("multilingual-e5-small")
    assert model is embeddings_named("multilingual-e5-small")
    name, version = model.model_name, model.model_version  # type: ignore[attr-defined]
    assert name == "multilingual-e5-small-q4" and "+" in version
    docs = model.embed_array(["我的航班明天早上八点起飞", "The invoice is overdue"])  # type: ignore[attr-defined]
    q = np.asarray(model.embed_query("what time does the plane leave"))
    assert docs.shape == (2, 384) and abs(float(np.linalg.norm(q)) - 1.0) < 1e-3
    assert float(docs[0] @ q) > float(docs[1] @ q)  # across languages, by meaning


def test_chinese_recall_set_is_well_formed():
    from beeweave_bench import locomo, recall_zh

    convs = locomo.load_dir(recall_zh.ZH_DATA)
    assert len(convs) == 4
    for conv in convs:
        assert 40 <= len(conv.turns) <= 80
        assert conv.dropped_evidence == 0 and conv.skipped_questions == 0
        assert len(conv.questions) >= 12
    raw = json.loads(next(recall_zh.ZH_DATA.glob("*.json")).read_text(encoding="utf-8"))
    assert any("\u4e00" <= ch <= "\u9fff" for ch in raw["session_1"][0]["text"])


class DocumentsOnly:
    """A LangChain-shaped embedder with no ``embed_array`` (a hosted model's shape),
    backed by the real MiniLM; records the size of every call."""

    def __init__(self) -> None:
        self.model = MiniLMEmbeddings()
        self.calls: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.model.embed_query(text)


def test_built_in_models_get_all_texts_at_once_and_others_length_groups_same_vectors():
    texts = [
        "Tomatoes need staking.",
        "The night bus timetable changed in March; the last one now leaves at 00:40 from "
        "the central square instead of the old stop behind the theatre, as the council "
        "wrote in the letter that reached every household on the route last week. " * 3,
        "Tomatoes need staking.",
        "Paint the fence green.",
        "",
    ]
    built_in = CountingMiniLM()
    direct = embed_texts(built_in, texts)
    assert built_in.calls == 1 and built_in.texts == len(texts)
    foreign = DocumentsOnly()
    grouped = embed_texts(foreign, texts)
    assert len(foreign.calls) >= 2 and sum(foreign.calls) == len(texts)  # long one apart
    np.testing.assert_allclose(grouped, direct, atol=2e-5)  # same vectors, same order
    np.testing.assert_allclose(direct[0], direct[2], atol=1e-6)
    assert embed_texts(built_in, []).shape[0] == 0
