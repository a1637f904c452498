"""Fused recall, run unchanged over both stores (SQLite + Chroma, Neo4j + its vector index).

Everything is real: events go through the capture bus into the store, the offline
MiniLM model embeds them, and ``weave.retrieve`` fuses the paths.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from beeweave_core.events import EventType
from beeweave_core.retrieval import PATHS, Filters, Hit, RetrievalConfig
from beeweave_core.tokens import MAX_QUERY_TOKENS, TokenCounter, bounded_query
from beeweave_core.weave import Weave

DAY = 86_400.0
NOW = 1_750_000_000.0


@pytest.fixture
def open_weave(
    backend: str, weave_factory: Callable[..., Weave], request: pytest.FixtureRequest
) -> Callable[..., Weave]:
    """A weave of this backend; Neo4j vector nodes are removed after the test."""

    def make(**kw: Any) -> Weave:
        w = weave_factory(backend, **kw)
        if backend == "neo4j" and w.indexer is not None:
            request.addfinalizer(lambda: w.indexer.index.purge_tenant())
        return w

    return make


def agent_turn(w: Weave, sid: str, ts: float, question: str, tool: str, args: str,
               output: str, answer: str, meta: dict[str, Any] | None = None) -> dict[str, str]:  # fmt: skip
    """One captured agent turn with its causal chain, as the framework hooks emit it."""
    meta = meta or {}
    u = w.emit("user_message", question, session_id=sid, role="user", ts=ts, meta=meta)
    c = w.emit("model_call", "", session_id=sid, parents=[u], ts=ts + 1, meta=meta)
    a = w.emit("assistant_message", f"Let me call {tool}.", session_id=sid, parents=[c],
               ts=ts + 2, meta=meta)  # fmt: skip
    i = w.emit("tool_invocation", args, session_id=sid, parents=[a], payload={"name": tool},
               ts=ts + 3, meta=meta)  # fmt: skip
    r = w.emit("tool_result", output, session_id=sid, parents=[i], payload={"name": tool},
               ts=ts + 4, meta=meta)  # fmt: skip
    f = w.emit("assistant_message", answer, session_id=sid, parents=[r],
               links={"REFERS_TO": [r]}, ts=ts + 5, meta=meta)  # fmt: skip
    return {"user": u, "call": c, "assistant": a, "invocation": i, "result": r, "answer": f}


def settle(w: Weave) -> None:
    assert w.flush(60)
    if w.indexer is not None:
        assert w.indexer.sync(120)


@pytest.fixture
def scenario(open_weave: Callable[..., Weave]) -> tuple[Weave, dict[str, dict[str, str]]]:
    w = open_weave()
    alice = {"user_id": "alice", "agent_id": "travel", "tags": ["trip"]}
    ids = {
        "flight": agent_turn(
            w, "s-alice-1", NOW - 3 * DAY,
            "Find me a flight to Lisbon under 500 euros next Friday.",
            "search_flights", '{"destination": "LIS", "max_price": 500}',
            '{"flights": [{"code": "TP1350", "departs": "09:40", "price_eur": 420}]}',
            "TP1350 departs 09:40 and costs 420 EUR.", alice,
        ),
        "hotel": agent_turn(
            w, "s-alice-2", NOW - 1 * DAY,
            "Book a quiet hotel near Alfama for two nights.",
            "book_hotel", '{"area": "Alfama", "nights": 2}',
            '{"booking": "HTL-88412", "hotel": "Casa do Fado", "total_eur": 310}',
            "Booked Casa do Fado, reference HTL-88412, 310 EUR total.",
            {**alice, "agent_id": "lodging", "tags": ["trip", "hotel"]},
        ),
        "bob": agent_turn(
            w, "s-bob-1", NOW - 2 * DAY,
            "What is the weather in Oslo tomorrow?",
            "weather", '{"city": "Oslo"}', '{"forecast": "snow", "high_c": -3}',
            "Snow tomorrow in Oslo, high of -3 C.", {"user_id": "bob", "agent_id": "travel"},
        ),
    }  # fmt: skip
    w.emit("user_message", "Also, thanks for the help so far, really appreciated!",
           session_id="s-alice-1", ts=NOW - 3 * DAY + 10, meta=alice)  # fmt: skip
    settle(w)
    return w, ids


def top_ids(hits: list[Hit]) -> list[str]:
    return [h.event.id for h in hits]


# ----------------------------------------------------------------- basics
def test_hits_carry_provenance_and_path_scores(scenario):
    w, ids = scenario
    hits = w.retrieve("booking reference HTL-88412", user_id="alice", now=NOW)
    assert hits and hits[0].event.id in (ids["hotel"]["result"], ids["hotel"]["answer"])
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    for h in hits:
        p = h.provenance
        assert (p.event_id, p.session_id, p.seq, p.ts, p.type) == (
            h.event.id, h.event.session_id, h.event.seq, h.event.ts, h.event.type
        )  # fmt: skip
        assert h.paths and set(h.paths) <= set(PATHS) and set(h.ranks) == set(h.paths)
        assert all(r >= 1 for r in h.ranks.values())
    assert "lexical" in hits[0].paths
    assert len(top_ids(hits)) == len(set(top_ids(hits)))


def test_semantic_path_finds_other_words(scenario):
    w, ids = scenario
    hits = w.retrieve("which plane did we pick for the Portugal trip?", user_id="alice",
                      now=NOW, paths=["semantic"], k=3)  # fmt: skip
    # the flight exchange leads, though it shares no word with the question (which of its
    # turns follow the request is a matter of a few hundredths of cosine: the hotel's
    # answer sits between them and the flight's answer under either build of the model)
    flight = set(ids["flight"].values())
    assert hits[0].event.id == ids["flight"]["user"]
    assert sum(h.event.id in flight for h in hits) >= 2
    assert all(set(h.paths) == {"semantic"} for h in hits)


def test_graph_path_brings_the_call_and_question_behind_a_result(scenario):
    w, ids = scenario
    hits = w.retrieve("TP1350", session_id="s-alice-1", k=10, now=NOW,
                      paths=["lexical", "graph"])  # fmt: skip
    by_id = {h.event.id: h for h in hits}
    flight = ids["flight"]
    assert flight["result"] in by_id or flight["answer"] in by_id
    for behind in ("invocation", "user"):  # the tool call and the question that led to it
        hit = by_id.get(flight[behind])
        assert hit is not None, f"{behind} not reached through the graph"
        assert "graph" in hit.paths and hit.provenance.via
        assert set(hit.provenance.via) & {flight["result"], flight["answer"]}
    assert flight["call"] not in by_id  # an empty model-call marker is a bridge, not an answer


def test_recent_path_in_session(scenario):
    w, ids = scenario
    hits = w.retrieve("anything else?", session_id="s-alice-1", paths=["recent"], k=3, now=NOW)
    assert hits and all(h.event.session_id == "s-alice-1" for h in hits)
    assert hits[0].event.content.startswith("Also, thanks")  # the latest event first


# ------------------------------------------------------------------ scope
def test_scope_session_user_tenant(scenario):
    w, ids = scenario
    q = "flight hotel weather booking"
    in_session = w.retrieve(q, session_id="s-alice-2", k=20, now=NOW)
    assert in_session and {h.event.session_id for h in in_session} == {"s-alice-2"}
    cross = w.retrieve(q, user_id="alice", k=20, now=NOW)
    assert {h.event.session_id for h in cross} == {"s-alice-1", "s-alice-2"}
    everything = w.retrieve(q, k=30, now=NOW)
    assert "s-bob-1" in {h.event.session_id for h in everything}
    with pytest.raises(ValueError):
        w.retrieve(q, scope="session")


def test_tenants_never_see_each_other(scenario, open_weave):
    w, ids = scenario
    other = open_weave()
    other.emit("user_message", "Flight TP1350 to Lisbon is my secret", session_id="x", ts=NOW)
    settle(other)
    mine = w.retrieve("TP1350 Lisbon secret", k=20, now=NOW)
    theirs = other.retrieve("TP1350 Lisbon secret", k=20, now=NOW)
    assert all(h.event.tenant == w.tenant for h in mine)
    assert [h.event.content for h in theirs] == ["Flight TP1350 to Lisbon is my secret"]


# ---------------------------------------------------------------- filters
def test_metadata_filters(scenario):
    w, ids = scenario
    q = "trip booking flight"
    only = w.retrieve(q, k=20, now=NOW, filters={"types": ["tool_result"]})
    assert only and {h.event.type for h in only} == {EventType.TOOL_RESULT}
    hotel = w.retrieve(q, k=20, now=NOW, filters=Filters(tags=["hotel"]))
    assert hotel and all("hotel" in h.event.tags for h in hotel)
    lodging = w.retrieve(q, k=20, now=NOW, filters={"agent_id": "lodging"})
    assert lodging and {h.event.session_id for h in lodging} == {"s-alice-2"}
    bob = w.retrieve(q, k=20, now=NOW, filters={"user_id": "bob"})
    assert bob and {h.event.user_id for h in bob} == {"bob"}
    window = w.retrieve(q, k=20, now=NOW, filters={"since": NOW - 2.5 * DAY, "until": NOW})
    assert window and all(NOW - 2.5 * DAY <= h.event.ts <= NOW for h in window)
    # filters alone (no query words) still recall, newest first, through the metadata path
    recent = w.retrieve("", k=3, now=NOW, filters={"types": ["assistant_message"]},
                        paths=["metadata"])  # fmt: skip
    assert len(recent) == 3 and all(h.event.type == EventType.ASSISTANT_MESSAGE for h in recent)
    assert [h.event.ts for h in recent] == sorted((h.event.ts for h in recent), reverse=True)
    assert recent[0].event.id == ids["hotel"]["answer"]


def test_an_assemblys_audit_record_is_not_found_unless_its_type_is_asked_for(open_weave):
    """The audit record's text is the question it answered: a search that found it would
    hand the caller its own earlier questions as memories."""
    w = open_weave()
    w.emit("user_message", "the glazier comes on Friday to fit the skylight", session_id="s-aud",
           role="user", ts=NOW)  # fmt: skip
    settle(w)
    ctx = w.assemble("s-aud", "which day is the skylight being fitted?", budget_tokens=400)
    settle(w)
    hits = w.retrieve("skylight fitted day", session_id="s-aud", k=10, now=NOW)
    assert [h.event.type for h in hits] == [EventType.USER_MESSAGE]
    audits = w.retrieve("skylight fitted day", session_id="s-aud", k=10, now=NOW,
                        filters={"types": ["retrieval"]}, paths=["lexical"])  # fmt: skip
    assert [h.event.id for h in audits] == [ctx.retrieval_event_id]


def test_inactive_events_never_come_back(scenario):
    w, ids = scenario
    hotel = ids["hotel"]
    w.store.invalidate([hotel["result"]], "booking cancelled")
    w.store.soft_delete([hotel["answer"]], "user asked to forget")
    w.store.purge(ids=[hotel["invocation"]])
    gone = {hotel["result"], hotel["answer"], hotel["invocation"]}
    for kw in (
        {"user_id": "alice"},
        {"session_id": "s-alice-2"},
        {"session_id": "s-alice-2", "filters": {"types": ["tool_result", "assistant_message"]}},
        {"session_id": "s-alice-2", "paths": ["recent", "graph", "lexical"]},
        {},
    ):
        hits = w.retrieve("HTL-88412 Casa do Fado booking Alfama hotel", k=20, now=NOW, **kw)
        assert hits and not gone & set(top_ids(hits)), kw
    semantic = w.retrieve("hotel booking reference", session_id="s-alice-2", now=NOW,
                          paths=["semantic"], k=20)  # fmt: skip
    assert not gone & set(top_ids(semantic))


# ---------------------------------------------------------- decay, dedup
def test_recency_decay_with_half_life(open_weave):
    w = open_weave()
    text = "The deploy window is Friday at 18:00."
    old = w.emit("user_message", text, session_id="old", ts=NOW - 14 * DAY)
    new = w.emit("user_message", text, session_id="new", ts=NOW - 1 * DAY)
    w.emit("user_message", "Unrelated chatter about lunch options.", session_id="x", ts=NOW)
    settle(w)
    opts = {"k": 5, "now": NOW, "dedup": False, "fusion": "score", "paths": ["lexical"]}
    flat = {h.event.id: h.score for h in w.retrieve("deploy window", half_life=None, **opts)}
    assert flat[old] == pytest.approx(flat[new])
    cfg = RetrievalConfig(half_life=7 * DAY, decay_floor=0.2)
    decayed = w.retrieve("deploy window", config=cfg, **opts)
    assert top_ids(decayed)[:2] == [new, old]
    got = {h.event.id: h.score for h in decayed}

    def weight(age: float) -> float:
        return 0.2 + 0.8 * 0.5 ** (age / (7 * DAY))

    assert got[old] / got[new] == pytest.approx(weight(14 * DAY) / weight(1 * DAY), rel=1e-6)


def test_duplicates_are_merged_with_provenance(open_weave):
    w = open_weave()
    a = w.emit("tool_result", "Quota: 1,000 requests per minute.", session_id="s", ts=NOW - 60)
    b = w.emit("tool_result", "Quota:  1,000 requests per   minute.", session_id="s", ts=NOW)
    settle(w)
    hits = w.retrieve("request quota per minute", session_id="s", now=NOW)
    assert len(hits) == 1 and {hits[0].event.id, *hits[0].provenance.duplicates} == {a, b}


# --------------------------------------------------------- dates, Chinese
def test_dates_named_in_the_query_are_preferred(open_weave):
    w = open_weave()
    march = 1_709_900_000.0  # 2024-03-08
    june = 1_717_900_000.0  # 2024-06-09
    w.emit("user_message", "Budget review: we agreed to cut cloud spend by 10%.",
           session_id="march", ts=march, meta={"user_id": "u"})  # fmt: skip
    w.emit("user_message", "Budget review: we agreed to hire two more engineers.",
           session_id="june", ts=june, meta={"user_id": "u"})  # fmt: skip
    settle(w)
    hits = w.retrieve("What did we agree in the budget review in March 2024?", user_id="u",
                      now=june + DAY, half_life=None)  # fmt: skip
    assert hits[0].event.session_id == "march" and "temporal" in hits[0].paths
    hits = w.retrieve("What did we agree in the budget review in June?", user_id="u",
                      now=june + DAY, half_life=None)  # fmt: skip
    assert hits[0].event.session_id == "june"


def test_chinese_recall(open_weave):
    """Chinese is found by its words (the lexical path); MiniLM itself is English-only."""
    w = open_weave()
    u = {"user_id": "u"}
    for sid, texts in {
        "zh-1": ["我们决定把批次大小改成两千行。", "好的，我记下了。"],
        "zh-2": ["明天的会议改到下午三点。", "午饭吃面条吧。"],
    }.items():
        for i, text in enumerate(texts):
            w.emit("user_message", text, session_id=sid, ts=NOW + i, meta=u)
    settle(w)
    hits = w.retrieve("批次大小是多少？", user_id="u", now=NOW, paths=["lexical"])
    assert hits and hits[0].event.content.startswith("我们决定")
    assert all(h.event.session_id == "zh-1" for h in hits)  # nothing from the other session
    fused = w.retrieve("批次大小是多少？", user_id="u", now=NOW)
    assert fused[0].event.content.startswith("我们决定")


# ------------------------------------------------------------ API surface
async def test_async_twin(scenario):
    w, ids = scenario
    hits = await w.aretrieve("HTL-88412", user_id="alice", now=NOW)
    twin = w.retrieve("HTL-88412", user_id="alice", now=NOW)
    # the same hits in the same order; scores agree to float noise (the query is embedded
    # on another thread, and ONNX Runtime's threaded kernels may round the last bits apart)
    assert hits and [h.event.id for h in hits] == [h.event.id for h in twin]
    assert [h.score for h in hits] == pytest.approx([h.score for h in twin], abs=2e-3)


def test_bad_arguments_are_clear_errors(scenario):
    w, _ = scenario
    with pytest.raises(ValueError, match="unknown path"):
        w.retrieve("x", paths=["telepathy"])
    with pytest.raises(ValueError, match="unknown filter"):
        w.retrieve("x", filters={"colour": "red"})
    with pytest.raises(TypeError):
        w.retrieve(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown retrieval option"):
        w.retrieve("x", half_lives=3)
    with pytest.raises(ValueError):
        w.retrieve("x", fusion="borda")
    assert w.retrieve("x", k=0) == []
    assert isinstance(w.retrieve("!!! ??? ...", now=NOW), list)  # punctuation only: no crash


def test_recall_without_a_vector_index(open_weave):
    w = open_weave(index=False)
    ids = agent_turn(w, "s", NOW, "Ship order ORD-5521 to Porto.", "ship", '{"order": "ORD-5521"}',
                     '{"tracking": "PT-7788-X"}', "Shipped, tracking PT-7788-X.")  # fmt: skip
    settle(w)
    hits = w.retrieve("tracking number PT-7788-X", session_id="s", now=NOW)
    assert hits[0].event.id in (ids["result"], ids["answer"])
    assert all("semantic" not in h.paths for h in hits)


def test_a_pasted_document_is_searched_for_its_opening_only(open_weave):
    """Only the first MAX_QUERY_TOKENS tokens of a query are searched for: words far past
    the cut change nothing, words inside it still steer the ranking."""
    w = open_weave(index=False)
    agent_turn(w, "s", NOW, "Book the ferry to Hvar for Monday.", "book", '{"to": "Hvar"}',
               '{"ref": "FR-3310"}', "Booked, reference FR-3310.")  # fmt: skip
    agent_turn(w, "s", NOW + 60, "Reserve a kayak in Korcula.", "rent", '{"item": "kayak"}',
               '{"ref": "KY-0192"}', "Reserved, reference KY-0192.")  # fmt: skip
    settle(w)
    padding = " lorem" * 200_000
    opening = "Which reference did the ferry booking get?"
    plain = w.retrieve(opening, session_id="s", now=NOW, k=3)
    long = w.retrieve(opening + padding + " kayak Korcula KY-0192", session_id="s", now=NOW)
    padded = w.retrieve(opening + padding, session_id="s", now=NOW)
    assert [h.event.id for h in long] == [h.event.id for h in padded]
    ferry = [h.event.id for h in plain if "FR-3310" in h.event.content]
    assert ferry and ferry[0] in [h.event.id for h in long[:3]]
    assert bounded_query(opening + padding) != opening + padding
    assert (
        TokenCounter("gpt-4o-mini").count_text(bounded_query(opening + padding)) <= MAX_QUERY_TOKENS
    )


# ------------------------------------------------------------ the benchmark
def test_locomo_evidence_is_cleaned():
    from beeweave_bench.locomo import parse_evidence

    known = {"D8:6", "D9:17", "D11:26", "D1:2"}
    assert parse_evidence(["D8:6; D9:17", "(D1:2)", "D:11:26", "D", "D99:1"], known) == (
        ["D8:6", "D9:17", "D1:2", "D11:26"],
        2,
    )


def test_locomo_bench_runs_every_system(tmp_path):
    """The bench's plumbing on a tiny conversation in LoCoMo's format (not the dataset)."""
    from beeweave_bench import locomo

    conv = {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey kitten named Pixel!"},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Congrats! How old is Pixel?"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "Ten weeks, and very playful."},
        ],
        "session_2_date_time": "7:55 pm on 9 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "I ran my first marathon in Porto."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Amazing, what was your time?",
             "blip_caption": "a photo of a finish line"},
            {"speaker": "Ben", "dia_id": "D2:3", "text": "Four hours and two minutes."},
        ],
        "qa": [
            {"question": "What is the name of Ana's kitten?", "answer": "Pixel",
             "evidence": ["D1:1"], "category": 4},
            {"question": "When did Ben run a marathon?", "answer": "June 2023",
             "evidence": ["D2:1"], "category": 2},
            {"question": "How long did Ben's marathon take?", "answer": "4:02",
             "evidence": ["D2:1; D2:3"], "category": 1},
            {"question": "Is Ana a cat person?", "answer": "yes", "evidence": [], "category": 3},
            {"question": "What did Ana say about dogs?", "answer": "n/a", "category": 5,
             "evidence": ["D1:1"]},
        ],
        "session_1_summary": "NOT CONVERSATION: must never be ingested",
    }  # fmt: skip
    (tmp_path / "conv-test.json").write_text(json.dumps(conv), encoding="utf-8")
    rows, summary = locomo.run(tmp_path, ks=(1, 3))
    assert summary["turns"] == 6 and summary["questions"] == 3
    assert summary["skipped_questions"] == 1  # no evidence left; category 5 is not asked
    systems = {r["system"] for r in rows}
    assert systems == set(locomo.SYSTEMS) - {"bw-cv"}  # one conversation: nothing to hold out
    assert "two conversations" in summary["cv"]
    for r in rows:
        assert 0.0 <= r["R@1"] <= r["R@3"] <= 1.0 and 0.0 <= r["hit@1"] <= r["hit@3"] <= 1.0
        assert r["p50 ms"] <= r["p95 ms"]
    fused = {r["category"]: r for r in rows if r["system"] == "beeweave"}
    assert fused["all"]["n"] == 3 and fused["all"]["hit@3"] == 1.0
    via_chroma = {r["category"]: r for r in rows if r["system"] == "bw-chroma"}
    for key in ("R@1", "R@3", "hit@1", "hit@3"):  # the in-process copy answers as Chroma
        assert via_chroma["all"][key] == fused["all"][key]


def _tiny_conversation(name: str, facts: list[tuple[str, str, str]]) -> dict[str, Any]:
    """A LoCoMo-shaped conversation: each fact is (statement, reply, question)."""
    turns, qa = [], []
    for i, (fact, reply, question) in enumerate(facts):
        turns += [{"speaker": "Ana", "dia_id": f"D1:{2 * i + 1}", "text": fact},
                  {"speaker": "Ben", "dia_id": f"D1:{2 * i + 2}", "text": reply}]  # fmt: skip
        qa.append({"question": question, "answer": "-", "evidence": [f"D1:{2 * i + 1}"],
                   "category": 4})  # fmt: skip
    return {"speaker_a": "Ana", "speaker_b": "Ben", "session_1_date_time": "9:00 am on 3 March, 2024",
            "session_1": turns, "qa": qa, "sample_id": name}  # fmt: skip


def test_locomo_bench_cross_validates_fusion_per_conversation(tmp_path):
    """Two conversations: each is held out once; settings are chosen on the other one."""
    from beeweave_bench import locomo

    convs = [
        _tiny_conversation("garden", [
            ("My tomatoes finally turned red in the greenhouse.", "Nice, salad time!",
             "What ripened in Ana's greenhouse?"),
            ("I repainted the shed a pale blue colour.", "Sounds calm.", "What colour is the shed?"),
        ]),
        _tiny_conversation("travel", [
            ("We booked a ferry to the islands for August.", "Which port?",
             "How is Ana getting to the islands?"),
            ("The hostel in Lisbon had a rooftop bar.", "Fancy!", "Where was the rooftop bar?"),
        ]),
    ]  # fmt: skip
    (tmp_path / "locomo10.json").write_text(json.dumps(convs), encoding="utf-8")
    rows, summary = locomo.run(tmp_path, ks=(1, 3), systems=("bw-lexical", "bw-cv"))
    cv = summary["cv"]
    assert [f["held_out"] for f in cv["folds"]] == ["garden", "travel"]
    grid = locomo.fusion_grid(RetrievalConfig())
    assert all(f["chosen"] in grid for f in cv["folds"]) and cv["chosen_on_all"] in grid
    held = {r["category"]: r for r in rows if r["system"] == "bw-cv"}
    dev = {r["category"]: r for r in rows if r["system"] == "bw-cv-dev"}
    assert held["all"]["n"] == 4 and dev["all"]["n"] == 4  # each question once per role
    assert 0.0 <= held["all"]["R@1"] <= held["all"]["R@3"] <= 1.0
    notes = locomo.cv_notes(summary)
    assert notes[0].startswith("fold garden: chose ") and notes[-1].startswith("chosen on all")


def test_fuse_reweights_the_same_rankings_without_searching_again(open_weave):
    """``rankings`` searches once; ``fuse`` with other weights reorders what it found."""
    w = open_weave()
    sid = "fuse-weights"
    exact = w.emit("user_message", "Invoice INV-5521 was paid by wire transfer.", session_id=sid,
                   ts=NOW)  # fmt: skip
    chatter = ["Lunch was a lentil soup.", "The office plants need water on Fridays.",
               "Our team photo is on the second shelf.", "The projector cable went missing.",
               "Parking moves to the north lot next week.", "Someone left an umbrella here."]  # fmt: skip
    for i, text in enumerate(chatter):  # enough text that word rarity means something
        w.emit("user_message", text, session_id=sid, ts=NOW + 1 + i)
    meaning = w.emit("user_message", "The supplier got their money through the bank yesterday.",
                     session_id=sid, ts=NOW + 9)  # fmt: skip
    settle(w)
    query = "has the supplier been paid for invoice INV-5521?"
    r = w.retriever.rankings(query, session_id=sid, scope="session", now=NOW + 20)
    assert set(r.ranked) >= {"lexical", "semantic"} and r.query == query
    base = w.retriever.config
    same = w.retrieve(query, session_id=sid, scope="session", now=NOW + 20, k=3)
    assert [h.event_id for h in w.retriever.fuse(r, 3)] == [h.event_id for h in same]
    for path in ("lexical", "semantic"):  # one path alone: exactly its own ranking
        alone = w.retriever.fuse(r, 3, replace(base, weights={path: 1.0}))
        assert [h.event_id for h in alone] == [eid for eid, _ in r.ranked[path]][:3]
    lexical = [eid for eid, _ in r.ranked["lexical"]]
    semantic = [eid for eid, _ in r.ranked["semantic"]]
    assert lexical[0] == exact and meaning in semantic[:3] and meaning not in lexical[:1]
    # a path weighted far above the other decides the order; the other's ranks are kept
    for heavy, light, order in (
        ("lexical", "semantic", lexical),
        ("semantic", "lexical", semantic),
    ):
        leaning = replace(base, weights={heavy: 1.0, light: 0.01})
        hits = w.retriever.fuse(r, 2, leaning)
        assert [h.event_id for h in hits] == order[:2]
        assert {"lexical", "semantic"} <= set(hits[0].ranks)


class _CountingEmbeddings:
    """The real offline model, counting the queries it is asked to embed."""

    def __init__(self) -> None:
        from beeweave_core.embeddings import default_embeddings

        self.inner = default_embeddings()
        self.queries: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.inner.embed_query(text)


def test_a_repeated_query_is_embedded_once(tmp_path):
    emb = _CountingEmbeddings()
    w = Weave.open(f"sqlite:///{tmp_path / 'q.db'}", spool_dir=tmp_path / "spool", embeddings=emb)
    try:
        w.emit("user_message", "The greenhouse thermostat is set to 21 degrees.", session_id="g")
        settle(w)
        query = "what temperature is the greenhouse kept at?"
        first = w.retrieve(query, session_id="g")
        again = w.retrieve(query, session_id="g")
        assert [h.event_id for h in first] == [h.event_id for h in again] and first
        assert first[0].ranks.get("semantic") == 1
        assert emb.queries.count(query) == 1
        w.retrieve("and the greenhouse humidity?", session_id="g")
        assert emb.queries[-1] == "and the greenhouse humidity?"
    finally:
        w.close()


def test_session_neighbours_inherit_by_neighbour_decay_and_causes_by_hop_decay(open_weave):
    """A hit's session neighbours get the graph share by ``neighbour_decay`` per turn of
    distance, its causes by ``hop_decay`` per hop: the two are set apart."""
    w = open_weave()
    sid = "neighbour-decay"
    turns = ["We should paint the canoe before spring.", "Which colour were you thinking of?",
             "Something bright, maybe the orange from the old buoy.",
             "The marina closes the slipway on Mondays.", "Good to know, thanks."]  # fmt: skip
    ids = [w.emit("user_message", t, session_id=sid, ts=NOW + i) for i, t in enumerate(turns)]
    first = w.emit("user_message", "Please remind me about the boat chores.", session_id="other",
                   ts=NOW - 100)  # fmt: skip
    then = w.emit("assistant_message", "I will keep a list.", session_id="other",
                  parents=[first], ts=NOW - 99)  # fmt: skip
    w.emit("assistant_message", "Noted: the kayak trailer needs new tyres.", session_id="other",
           parents=[then], ts=NOW - 98)  # fmt: skip
    settle(w)
    base = replace(w.retriever.config, half_life=None, neighbours=2, graph_depth=2)

    def graph_scores(query: str, sid: str, **cfg: float) -> dict[str, float]:
        r = w.retriever.rankings(query, session_id=sid, scope="session", now=NOW + 10,
                                 paths=["lexical", "graph"])  # fmt: skip
        hits = w.retriever.fuse(r, 10, replace(base, **cfg))
        return {h.event_id: h.paths["graph"] for h in hits if "graph" in h.paths}

    query = "slipway marina"  # only the fourth turn says it
    flat = graph_scores(query, sid, neighbour_decay=1.0)
    halved = graph_scores(query, sid, neighbour_decay=0.5)
    near, far = ids[2], ids[1]  # one and two turns before the hit
    assert flat[far] == pytest.approx(flat[near]) and halved[far] == pytest.approx(halved[near] / 2)
    assert halved[near] == pytest.approx(flat[near])  # a direct neighbour is never decayed
    # causes are not session neighbours: hop_decay halves the one two hops back,
    # whatever neighbour_decay says
    causal = {"neighbours": 0, "hop_decay": 0.5, "neighbour_decay": 1.0}
    hops = graph_scores("kayak trailer tyres", "other", **causal)
    assert set(hops) == {first, then} and hops[first] == pytest.approx(hops[then] / 2)
    with pytest.raises(ValueError, match="neighbour_decay"):
        RetrievalConfig(neighbour_decay=1.5)


def test_locomo_grid_offers_both_neighbour_decays_only_where_they_differ():
    from beeweave_bench import locomo

    grid = locomo.fusion_grid(RetrievalConfig())
    decays = {
        (c.weights["graph"] > 0 and c.neighbours > 1, c.neighbour_decay) for c in grid.values()
    }
    assert {(True, 0.5), (True, 1.0)} <= decays
    moot = [
        n
        for n, c in grid.items()
        if n != "default" and not (c.weights["graph"] and c.neighbours > 1)
    ]
    assert moot and all(grid[n].neighbour_decay == locomo.CV_NEIGHBOUR_DECAY[0] for n in moot)


def test_a_query_naming_one_speaker_prefers_that_speakers_turns(open_weave):
    """``author_boost``: "what did Ana say ..." lifts Ana's own turns; naming both speakers,
    or none, leaves the fused order alone."""
    w = open_weave()
    sid = "two-speakers"
    said = [("Ana", "The shed roof leaks a bit."),
            ("Tomas", "Ana, the shed! The shed roof is leaking again, the shed needs tar."),
            ("Mei Lin", "I can lend you a ladder for the shed.")]  # fmt: skip
    ids = {who: w.emit("user_message", text, session_id=sid, ts=NOW + i, meta={"name": who})
           for i, (who, text) in enumerate(said)}  # fmt: skip
    settle(w)
    base = replace(w.retriever.config, half_life=None, weights={"lexical": 1.0})

    def order(query: str, boost: float) -> list[str]:
        r = w.retriever.rankings(query, session_id=sid, scope="session", now=NOW + 10,
                                 paths=["lexical"])  # fmt: skip
        return [h.event_id for h in w.retriever.fuse(r, 3, replace(base, author_boost=boost))]

    plain = order("what did Ana say about the shed?", 0.0)
    assert plain[0] == ids["Tomas"]  # more shed words, and he names Ana
    assert order("what did Ana say about the shed?", 2.0)[0] == ids["Ana"]
    both = "what do Ana and Tomas think of the shed?"
    assert order(both, 2.0) == order(both, 0.0)
    # a name of two words counts only when both are said
    assert order("the shed, said Mei?", 2.0) == order("the shed, said Mei?", 0.0)
    assert order("what did Mei Lin offer for the shed?", 2.0)[0] == ids["Mei Lin"]
    with pytest.raises(ValueError, match="author_boost"):
        RetrievalConfig(author_boost=-1.0)


def test_metadata_path_of_a_user_with_many_sessions_reads_the_newest(open_weave):
    """Past the sessions it reads, the metadata path picks the user's newest ones (by
    their newest event, found per session through its index, not by their stats)."""
    from beeweave_core.retrieval import METADATA_SESSIONS

    w = open_weave()
    n = METADATA_SESSIONS + 6
    for i in range(n):  # session i's only note is i hours old: "ledger-0" is the newest
        w.emit("user_message", f"pantry ledger entry {i}", session_id=f"ledger-{i}",
               ts=NOW - i * 3600, meta={"user_id": "maren"})  # fmt: skip
    settle(w)
    hits = w.retrieve("", user_id="maren", k=n, now=NOW, paths=["metadata"],
                      filters={"types": ["user_message"]})  # fmt: skip
    seen = {h.event.session_id for h in hits}
    assert seen == {f"ledger-{i}" for i in range(METADATA_SESSIONS)}


def test_feedback_round_reaches_a_turn_sharing_words_only_with_the_first_hits(open_weave):
    """The ``feedback`` path asks again with the words the first lexical hits share: a turn
    with none of the question's words is found through them, inside the user's scope
    only; the lexical path alone never finds it."""
    w = open_weave()
    said = {  # (speaker, user, session, text): each turn's previous one shares no word
        "bench": ("Ivo", "ivo", "a", "I finished the garden bench from walnut offcuts."),
        "noise": ("Ivo", "ivo", "b", "The tram was late again this morning."),
        "walnut": ("Ivo", "ivo", "b", "Oiling walnut takes patience; the offcuts darken."),
        "other": ("Pia", "pia", "c", "I bought walnut oil to darken my offcuts."),
    }
    ids = {key: w.emit("user_message", text, session_id=f"{uid}-{sid}", ts=NOW + i,
                       meta={"name": who, "user_id": uid})
           for i, (key, (who, uid, sid, text)) in enumerate(said.items())}  # fmt: skip
    settle(w)
    question = "What garden furniture did Ivo finish?"
    alone = w.retrieve(question, user_id="ivo", k=5, now=NOW + 9, paths=["lexical"])
    assert ids["walnut"] not in [h.event_id for h in alone]
    hits = w.retrieve(question, user_id="ivo", k=5, now=NOW + 9, paths=["lexical", "feedback"])
    found = {h.event_id: h for h in hits}
    assert ids["walnut"] in found and "feedback" in found[ids["walnut"]].paths
    assert ids["other"] not in found  # Pia's turn shares the words, not the scope
    off = w.retrieve(question, user_id="ivo", k=5, now=NOW + 9, paths=["lexical", "feedback"],
                     weights={"lexical": 1.0, "feedback": 0.0})  # fmt: skip
    assert ids["walnut"] not in [h.event_id for h in off]


def test_feedback_query_adds_the_shared_words_of_the_first_hits_only():
    """Seeds' words most of them share come first; the query's own words, stopwords,
    speakers' names and short Latin words are left out; Chinese words are kept."""
    from beeweave_core.events import Event
    from beeweave_core.retrieval import feedback_query

    def turn(text: str, who: str = "Ivo") -> Event:
        return Event(id=text, type=EventType.USER_MESSAGE, session_id="s", content=text,
                     meta={"name": who})  # fmt: skip

    hits = [turn("Ivo: the kiln was hot, glaze ran"), turn("Ivo: glaze on the kiln shelf"),
            turn("Ivo: 釉料 烧窑"), turn("Ivo: never read: unrelated glaze")]  # fmt: skip
    cfg = RetrievalConfig(feedback_seeds=3, feedback_terms=6)
    query = feedback_query("what did Ivo fire in the kiln?", hits, cfg)
    assert query is not None
    added = query.split("?", 1)[1].split()
    assert added[0] == "glaze" and "kiln" not in added and "ivo" not in added
    assert "ran" in added and "on" not in added and ("釉料" in added or "烧窑" in added)
    assert "unrelated" not in query  # beyond feedback_seeds
    assert feedback_query("kiln glaze", [turn("Ivo: kiln glaze")], cfg) is None
    with pytest.raises(ValueError, match="feedback_terms"):
        RetrievalConfig(feedback_terms=-1)
