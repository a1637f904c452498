"""Context-health metrics from recorded events, each warning driven on SQLite and Neo4j."""

from __future__ import annotations

import pytest

from beeweave_core.events import Event, EventType, new_event_id
from beeweave_core.governance.health import amnesia_check, key_tokens, pooled, session_health
from beeweave_core.store_writer import StoreWriter

# ``store`` (conftest): an empty store of each backend, SQLite and the real Neo4j.


def add(store, sid: str, etype: EventType, content: str = "", **payload) -> Event:
    ev = Event(id=new_event_id(), session_id=sid, type=etype, content=content, payload=payload)
    store.append([ev])
    return ev


def piece(layer: str) -> dict:
    return {"layer": layer, "kind": "memory", "tokens": 12, "event_ids": ["x"]}


@pytest.mark.parametrize(
    ("source", "summary", "warning"),
    [(1000, 620, "not compressing"), (1000, 30, "may be losing information"), (1000, 200, None)],
)
def test_compression_ratio_warnings(store, source, summary, warning):
    add(
        store,
        "s",
        EventType.SUMMARY,
        "- #1 user: ...",
        source_tokens=source,
        summary_tokens=summary,
    )
    h = session_health(store, "s")
    assert h.compression_ratio == pytest.approx(summary / source)
    assert [w for w in h.warnings if warning and w.startswith(warning)] or (
        warning is None and h.warnings == []
    )


def test_retrieval_hit_rate_and_noisy_warning(store):
    add(store, "s", EventType.RETRIEVAL, "q1",
        included=[piece("recalled"), piece("immediate")],
        left_out=[piece("recalled"), piece("recalled"), piece("recalled")])  # fmt: skip
    add(store, "s", EventType.RETRIEVAL, "q2", included=[piece("recalled")], left_out=[])
    h = session_health(store, "s")
    assert (h.recalled_injected, h.recalled_total, h.assemblies) == (2, 5, 2)
    assert h.retrieval_hit_rate == pytest.approx(0.4)
    assert any(w.startswith("noisy retrieval") for w in h.warnings)


def test_amnesia_finds_a_lost_early_fact(store):
    facts = [
        "The kiln runs at 1240 degrees for stoneware",
        "Glaze batch G-17 uses 30% feldspar",
        "Firing starts at 06:00 on Tuesdays",
        "Deliveries go to the back door",
        "Use cone 6 witness cones",
        "Invoices in euros",
    ]
    for i, text in enumerate(facts):
        add(store, "kiln", EventType.MEMORY, text, kind="fact", source_seq=i)
    memories = store.timeline("kiln", types=(EventType.MEMORY,))
    carried = "working state: kiln 1240 degrees; glaze G-17 30% feldspar; 06:00 Tuesdays"
    assert amnesia_check(memories, carried).ok
    report = amnesia_check(memories, "working state: glaze G-17 30% feldspar")
    assert report.missing == ["The kiln runs at 1240 degrees for stoneware"]
    h = session_health(store, "kiln", assemble_text=lambda _sid: "nothing relevant")
    assert any(w.startswith("amnesia") for w in h.warnings)


def test_key_tokens_prefer_numbers_and_codes():
    assert key_tokens("Glaze batch G-17 uses 30% feldspar") == ["G-17", "30"]
    assert key_tokens("Deliveries go to the back door") == ["Deliveries"]
    assert key_tokens("发票用欧元") == ["发票用欧元"]


def test_pooled_sums_tokens_not_ratios(store):
    add(store, "a", EventType.SUMMARY, "x", source_tokens=100, summary_tokens=90)
    add(store, "b", EventType.SUMMARY, "y", source_tokens=900, summary_tokens=90)
    both = pooled([session_health(store, "a"), session_health(store, "b")])
    assert both.compression_ratio == pytest.approx(180 / 1000)
    assert both.warnings == []


# ------------------------------------------------------------ after each compaction
FACT = "Our notary is Ximena Villalobos"


def _session(store, facts_in_summary: bool) -> dict[str, Event]:
    """Twelve turns (the first states a fact), a segment over 1-6, one over 7-9, a merge."""
    turns = [FACT] + [f"Filler turn number {i} about nothing much" for i in range(2, 13)]
    ids = []
    for i, text in enumerate(turns, start=1):
        ev = Event(id=new_event_id(), session_id="n", type=EventType.USER_MESSAGE,
                   content=text, payload={"n": i})  # fmt: skip
        store.append([ev])
        ids.append(ev.id)
    add(store, "n", EventType.MEMORY, FACT, kind="fact", source_seq=1)
    first = "- #1 user: " + (FACT if facts_in_summary else "a notary was named")
    s1 = add(store, "n", EventType.SUMMARY, first, level=0, seq_from=1, seq_to=6)
    s2 = add(store, "n", EventType.SUMMARY, "- #7 user: filler", level=0, seq_from=7, seq_to=9)
    merge = add(store, "n", EventType.SUMMARY, first + "\n- filler", level=1,
                children=[s1.id, s2.id], seq_from=1, seq_to=9)  # fmt: skip
    return {"s1": s1, "s2": s2, "merge": merge}


def _render(store, room: int):
    """A stand-in assembler: active top summaries, then the newest ``room`` turns no
    active (and not hidden) summary stands for — what a budget lets through (the same
    text whichever facts are asked for)."""

    def text(hidden, facts=()) -> str:
        sums = [s for s in store.timeline("n", types=(EventType.SUMMARY,)) if s.id not in hidden]
        merged = {c for s in sums for c in s.payload.get("children") or ()}
        covered = {q for s in sums for q in range(s.payload["seq_from"], s.payload["seq_to"] + 1)}
        turns = [e for e in store.timeline("n", types=(EventType.USER_MESSAGE,))
                 if e.payload["n"] not in covered]  # fmt: skip
        return "\n".join([s.content for s in sums if s.id not in merged] +
                         [e.content for e in turns[-room:]])  # fmt: skip

    return text


def test_compaction_that_lost_a_fact_is_rolled_back(store):
    from beeweave_core.governance.health import AMNESIA_ROLLBACK, guard_compaction

    made = _session(store, facts_in_summary=False)
    written = [made["s1"].id, made["s2"].id, made["merge"].id]
    rolled, after = guard_compaction(
        StoreWriter(store), "n", written, _render(store, room=12), lambda m: ()
    )
    assert sorted(rolled) == sorted([made["s1"].id, made["merge"].id])  # s2 kept
    assert after is not None and after.ok
    gone = store.get(rolled, include_inactive=True)
    assert all(
        g.status.value == "invalidated" and AMNESIA_ROLLBACK in g.status_reason for g in gone
    )
    (note,) = [w for w in store.timeline("n", types=(EventType.WARNING,))]
    assert note.payload["kind"] == "amnesia" and note.payload["missing"] == [FACT]
    assert note.payload["still_missing"] == []


@pytest.mark.parametrize(("kept", "room"), [(True, 12), (False, 2)])
def test_compaction_kept_when_it_is_not_to_blame(store, kept, room):
    """The summary kept the fact, or the budget had no room for its turn anyway."""
    from beeweave_core.governance.health import guard_compaction

    made = _session(store, facts_in_summary=kept)
    written = [s.id for s in made.values()]
    rolled, after = guard_compaction(
        StoreWriter(store), "n", written, _render(store, room), lambda m: ()
    )
    assert rolled == [] and after is not None and after.ok is kept
    assert len(store.timeline("n", types=(EventType.SUMMARY,))) == 3
    assert store.timeline("n", types=(EventType.WARNING,)) == []


def test_dormant_facts_are_not_checked_after_compaction(store):
    from beeweave_core.governance.health import guard_compaction

    made = _session(store, facts_in_summary=False)
    mem = store.timeline("n", types=(EventType.MEMORY,))[0]
    written = [s.id for s in made.values()]
    rolled, after = guard_compaction(
        StoreWriter(store), "n", written, _render(store, 12), lambda m: {mem.id}
    )
    assert (rolled, after) == ([], None)


class Forgetful:
    """FAKE LLM summarizer (labelled): keeps only the lines that carry a digit."""

    name = "fake-forgetful"

    def summarize(self, lines, *, must_keep=()):
        kept = [
            f"- #{ln.seq} {ln.role}: {ln.text}" for ln in lines if any(c.isdigit() for c in ln.text)
        ]
        return "\n".join(kept) or "- (nothing kept)"

    async def asummarize(self, lines, *, must_keep=()):
        return self.summarize(lines, must_keep=must_keep)


@pytest.mark.parametrize("window", [120, 240])
def test_engine_runs_the_guard_and_leaves_no_trace_when_not_to_blame(tmp_path, window):
    """Through the engine: at 120 tokens the fact was already out of the context before
    compaction (the guard checks with the segment hidden and keeps it), at 240 memory
    recall carries it.  Either way the contexts equal those of an unguarded engine."""
    from beeweave_core.config import ContextConfig, WeaveConfig
    from beeweave_core.weave import Weave

    from .context_helpers import chatter, say

    texts = []
    for guard in (True, False):
        cfg = WeaveConfig(context=ContextConfig(summarizer=Forgetful()))
        url = f"sqlite:///{tmp_path}/g{guard}.db"
        with Weave.open(url, index=False, spool_dir=tmp_path / f"sp{guard}", config=cfg) as w:
            w.context.amnesia_guard = guard
            say(w, "s", [{"role": "user", "content": "The warehouse contact is Okonkwo."},
                         {"role": "assistant", "content": "Noted."}])  # fmt: skip
            say(w, "s", chatter(3), prefix="c")
            say(w, "s", [{"role": "user", "content": "The audit contact is Moreau."}], prefix="f")
            say(w, "s", chatter(2), prefix="d")
            report = w.context.compact("s", window_tokens=window, force=True)
            assert report.triggered and report.rolled_back == []
            assert w.store.timeline("s", types=(EventType.WARNING,)) == []
            ctx = w.assemble("s", budget_tokens=window, record=False)
            texts.append([m["content"] for m in ctx.messages])
    assert texts[0] == texts[1]
    if window == 240:  # (at 120 recall may carry it too: one recall call over turns and notes)
        assert "Okonkwo" in "\n".join(map(str, texts[0]))
