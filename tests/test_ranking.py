"""Ranking in one home: BM25 properties, reciprocal-rank order, decay by kind.

BM25 is checked against an independent implementation (``bm25s``, Lucene variant),
decay against its definition with an injected ``now``, and the retriever and the
context engine end to end on a real SQLite weave.
"""

from __future__ import annotations

import bm25s
import pytest

from beeweave_core.context import decay as memory_decay
from beeweave_core.events import Event, EventType
from beeweave_core.ranking import (
    BM25_K1,
    DAY,
    DEFAULT_HALF_LIFE_DAYS,
    HALF_LIFE_DAYS,
    age_weight,
    bm25,
    decay,
    half_life,
    minmax_shares,
    rrf_shares,
)

NOW = 1_800_000_000.0

SENTENCES = (
    "the kettle boils water and the kettle whistles",
    "water the garden with the long green hose",
    "a quiet afternoon in the reading room",
    "kettle",
    "descaling a kettle takes vinegar water and patience and a free afternoon",
)
DOCS = [s.split() for s in SENTENCES]


# ---------------------------------------------------------------------- BM25
def test_bm25_matches_an_independent_implementation():
    ref = bm25s.BM25(method="lucene", k1=BM25_K1, b=0.75)
    ref.index(DOCS, show_progress=False)
    for query in (["kettle"], ["kettle", "water"], ["afternoon", "hose", "vinegar"]):
        want = [float(x) * (BM25_K1 + 1) for x in ref.get_scores(query)]  # Lucene drops k1+1
        assert bm25(query, DOCS) == pytest.approx(want, rel=1e-6)


def test_bm25_properties():
    # a doc with none of the terms scores 0; an empty query or corpus scores nothing
    scores = bm25(["hose"], DOCS)
    assert scores[1] > 0 and all(s == 0 for i, s in enumerate(scores) if i != 1)
    assert bm25([], DOCS) == [0.0] * len(DOCS) and bm25(["x"], []) == []
    # a repeated query term counts once
    assert bm25(["kettle", "kettle"], DOCS) == bm25(["kettle"], DOCS)
    # term frequency saturates: each extra occurrence adds less, bounded by idf*(k1+1)
    docs = [["tea"] * n + ["pad"] * (6 - n) for n in range(1, 6)] + [["other"] * 6] * 5
    s = bm25(["tea"], docs)[:5]
    gains = [b - a for a, b in zip(s, s[1:], strict=False)]
    assert all(g > 0 for g in gains) and gains == sorted(gains, reverse=True)
    # the same single match weighs less in a longer doc, unless b = 0
    short, long_ = ["tea", "pot"], ["tea", "pot", "cup", "saucer", "tray", "spoon"]
    corpus = [short, long_, ["milk"], ["sugar"]]
    a, b = bm25(["tea"], corpus)[:2]
    assert a > b
    a0, b0 = bm25(["tea"], corpus, b=0.0)[:2]
    assert a0 == pytest.approx(b0)
    # a rare term outweighs a common one
    common_rare = [["tea", "lemon"], ["tea"], ["tea"], ["tea", "honey"]]
    lemon, _, _, _ = bm25(["lemon"], common_rare)
    tea, _, _, _ = bm25(["tea"], common_rare)
    assert lemon > tea > 0


# -------------------------------------------------------------------- fusion
def test_rrf_shares_keep_order_and_reward_agreement():
    ranked = [("a", 9.0), ("b", 3.0), ("c", 2.5)]
    shares = rrf_shares(ranked, 10.0)
    assert [k for k, _ in shares] == ["a", "b", "c"]
    assert [s for _, s in shares] == pytest.approx([1 / 11, 1 / 12, 1 / 13])
    # fused over two rankings: second in both beats first in one and absent in the other
    fused: dict[str, float] = {}
    for lst in ([("x", 0), ("y", 0)], [("z", 0), ("y", 0)]):
        for key, share in rrf_shares(lst):
            fused[key] = fused.get(key, 0.0) + share
    assert max(fused, key=fused.__getitem__) == "y"
    # a small k lets a confident first hit count more against a deep rank than k=60 does
    first_vs_50th = {k: rrf_shares([(i, 0.0) for i in range(50)], k) for k in (10.0, 60.0)}
    ratio = {k: v[0][1] / v[49][1] for k, v in first_vs_50th.items()}
    assert ratio[10.0] > 4 > 2 > ratio[60.0]


def test_minmax_shares():
    assert minmax_shares([("a", 4.0), ("b", 3.0), ("c", 2.0)]) == [
        ("a", 1.0), ("b", 0.5), ("c", 0.0),
    ]  # fmt: skip
    assert minmax_shares([("a", 7.0), ("b", 7.0)]) == [("a", 1.0), ("b", 1.0)]
    assert minmax_shares([]) == []


# --------------------------------------------------------------------- decay
def memory(kind: str, age_days: float, **payload: object) -> Event:
    return Event(
        id=f"m-{kind}-{age_days}", session_id="s", type=EventType.MEMORY,
        content=f"a {kind}", ts=NOW - age_days * DAY, payload={"kind": kind, **payload},
    )  # fmt: skip


@pytest.mark.parametrize("kind", sorted(HALF_LIFE_DAYS))
def test_a_memory_halves_every_half_life_of_its_kind(kind):
    days = HALF_LIFE_DAYS[kind]
    assert half_life(memory(kind, 0)) == days * DAY
    assert age_weight(memory(kind, 0), NOW) == 1.0
    assert age_weight(memory(kind, days), NOW) == pytest.approx(0.5)
    assert age_weight(memory(kind, 2 * days), NOW) == pytest.approx(0.25)
    assert memory_decay(memory(kind, days), NOW) == pytest.approx(0.5)  # the engine's view


def test_decay_rules():
    # a stored half-life wins over the kind's; an unknown kind gets the default
    assert half_life(memory("fact", 0, half_life_days=3.0)) == 3 * DAY
    assert half_life(memory("hunch", 0)) == DEFAULT_HALF_LIFE_DAYS * DAY
    # events that are not memories use the caller's default
    turn = Event(id="t", session_id="s", type=EventType.USER_MESSAGE, content="hi", ts=NOW - DAY)
    assert half_life(turn, 5 * DAY) == 5 * DAY
    assert age_weight(turn, NOW, default=DAY) == pytest.approx(0.5)
    assert age_weight(turn, NOW, default=None) == 1.0  # decay off
    # the floor: half-way from the floor after one half-life, and never below it
    assert decay(DAY, DAY, floor=0.5) == pytest.approx(0.75)
    assert decay(1e4 * DAY, DAY, floor=0.5) == pytest.approx(0.5)
    assert decay(-DAY, DAY) == 1.0  # from the future: new


def test_the_retriever_decays_a_memory_by_its_kind(weave_factory):
    """Two memories of the same age and text: the longer-lived kind keeps more score."""
    w = weave_factory("sqlite")
    age = 60 * DAY
    ids = {
        kind: w.emit("memory", f"Reports go out as PDF files ({kind}).", session_id="s",
                     ts=NOW - age, payload={"kind": kind, "half_life_days": HALF_LIFE_DAYS[kind]})
        for kind in ("preference", "artifact")
    }  # fmt: skip
    w.emit("user_message", "Nothing to do with the question.", session_id="s", ts=NOW)
    assert w.flush(60)
    opts = {"k": 5, "now": NOW, "paths": ["lexical"], "dedup": False, "decay_floor": 0.0}
    got = {h.event.id: h.score for h in w.retrieve("reports PDF files", **opts)}
    flat = {h.event.id: h.score for h in w.retrieve("reports PDF files", half_life=None, **opts)}
    for kind, eid in ids.items():
        want = 0.5 ** (age / (HALF_LIFE_DAYS[kind] * DAY))
        assert got[eid] / flat[eid] == pytest.approx(want, rel=1e-6)
    assert got[ids["preference"]] > got[ids["artifact"]]
