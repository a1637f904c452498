"""The incremental engine: a supersession rewrites only the summary lines it touches,
merges stay bounded, and per-call work follows cursors, not the whole timeline.

Real SQLite stores, real tiktoken counts, the offline extractive summarizer; no fakes.
"""

from __future__ import annotations

from beeweave_core.config import ContextConfig, WeaveConfig
from beeweave_core.context import CompactionPolicy
from beeweave_core.events import EventType, Status
from beeweave_core.text.language import fold

from .context_helpers import say

GREENHOUSES = ["north", "south", "east", "west", "upper", "lower", "inner", "outer"]


def _engine(weave_factory, **policy):
    cfg = WeaveConfig(context=ContextConfig(policy=CompactionPolicy(**policy)))
    weave = weave_factory(index=False, config=cfg)
    return weave, weave.context


def _settings(start: int, n: int) -> list[dict[str, str]]:
    out = []
    for i in range(start, start + n):
        house = GREENHOUSES[i % len(GREENHOUSES)]
        out += [{"role": "user", "content": f"Keep the {house} greenhouse misting interval at {i + 11} minutes."},
                {"role": "assistant", "content": f"Understood, logged as request {700 + i}."}]  # fmt: skip
    return out


def _merged(weave, sid):
    tops = weave.context.compactor.top_summaries(sid)
    return [s for s in tops if s.payload.get("level", 0) >= 1]


def test_a_restated_setting_rewrites_only_the_lines_of_its_segment(weave_factory):
    weave, engine = _engine(weave_factory, segment_turns=2, merge_after=2)
    say(weave, "gh", [*_settings(0, 8), {"role": "user", "content": "Next."}], prefix="a")
    engine.compact("gh", window_tokens=120, model="gpt-4", force=True)
    before = _merged(weave, "gh")
    assert before and "interval at 11 minutes" in before[0].content
    say(weave, "gh", [{"role": "user", "content": "Keep the north greenhouse misting interval at 29 minutes."}],
        prefix="b")  # fmt: skip
    report = engine.compact("gh", window_tokens=120, model="gpt-4")
    assert report.refreshed, "the merge holding the old interval was rebuilt"
    old = weave.store.get([before[0].id], include_inactive=True)[0]
    assert old.status == Status.INVALIDATED
    new = next(s for s in _merged(weave, "gh") if s.payload["seq_from"] == old.payload["seq_from"])
    assert "interval at 11 minutes" not in fold(new.content)
    assert new.payload["retention"].get("patched") is True
    # every line that did not come from the touched segment is carried over unchanged
    kept_old = [ln for ln in old.content.splitlines() if "11 minutes" not in ln]
    assert [ln for ln in new.content.splitlines() if ln in kept_old] == kept_old


def test_merges_stop_at_the_policy_level(weave_factory):
    weave, engine = _engine(weave_factory, segment_turns=1, merge_after=2, max_merge_level=1)
    say(weave, "gh", [*_settings(0, 12), {"role": "user", "content": "Next."}], prefix="a")
    engine.compact("gh", window_tokens=60, model="gpt-4", force=True)
    levels = [s.payload["level"] for s in weave.store.timeline("gh", types=(EventType.SUMMARY,))]
    assert max(levels) == 1 and levels.count(1) >= 2


def test_a_call_reads_only_events_after_the_view_cursor(weave_factory):
    weave, engine = _engine(weave_factory)
    say(weave, "gh", _settings(0, 30), prefix="a")
    weave.assemble("gh", budget_tokens=600, record=False)
    say(weave, "gh", _settings(30, 1), prefix="b")
    with engine.views.lock:
        view, read = engine.views.get("gh")
    # the new turn and what the memory writer derived from it, not the session again
    assert 0 < read <= 6 and view.cursor == weave.store.session_stats("gh").last_seq


def test_old_summary_lines_are_found_through_the_line_index(weave_factory):
    weave, engine = _engine(weave_factory, segment_turns=1, max_merge_level=0)
    crops = ["basil", "chard", "kale", "leek", "okra", "pea"]
    msgs = []
    for i in range(24):
        msgs += [{"role": "user", "content": f"Tray {i} holds {crops[i % 6]} seedlings watered with {i + 3} litres."},
                 {"role": "assistant", "content": f"Noted in the log as line {400 + i}."}]  # fmt: skip
    say(weave, "gh", [*msgs, {"role": "user", "content": "Next."}], prefix="a")
    engine.compact("gh", window_tokens=60, model="gpt-4", force=True)
    with engine.views.lock:
        view, _n = engine.views.get("gh")
        tops = view.tops()
        among = {s.id for s in tops[:-8]}
        found = view.lines_matching({"kale", "seedlings"}, among, 3)
    assert len(tops) >= 20 and len(found) == 3
    texts = [s.content.splitlines()[i] for s, i in found]
    # lines naming both terms first, newest first; only from the summaries asked for
    seqs = [int(t.split("#")[1].split()[0]) for t in texts]
    assert all("kale seedlings" in t for t in texts[:2]) and seqs[0] > seqs[1]
    assert all(s.id in among for s, _i in found)


def _changed_twice(weave_factory, values, say_it, ask):
    weave, engine = _engine(weave_factory, segment_turns=2)
    filler = [{"role": "user", "content": f"Row {i} of the plan is checked."} for i in range(6)]
    for n, v in enumerate(values):
        turns = [{"role": "user", "content": say_it(v)}, {"role": "assistant", "content": "OK."}]
        say(weave, "twice", [*turns, *filler], prefix=f"t{n}")
        engine.compact("twice", window_tokens=90, model="gpt-4", force=True)
    return weave.assemble("twice", ask, budget_tokens=300, model="gpt-4").text()


def test_a_setting_changed_twice_never_brings_its_first_value_back(weave_factory):
    text = _changed_twice(weave_factory, (40, 55, 70),
                          lambda v: f"The drip line pressure for bed A is {v} kPa.",
                          "What is the drip line pressure for bed A?")  # fmt: skip
    assert "70 kPa" in text and "40 kPa" not in text and "55 kPa" not in text


def test_a_setting_changed_twice_in_chinese(weave_factory):
    text = _changed_twice(weave_factory, (40, 55, 70),
                          lambda v: f"A区滴灌压力是{v}千帕。",
                          "A区滴灌压力是多少？")  # fmt: skip
    assert "70千帕" in text and "40千帕" not in text and "55千帕" not in text


def test_memory_catch_up_reads_in_chunks_up_to_a_seq(weave_factory):
    weave, engine = _engine(weave_factory)
    say(weave, "gh", _settings(0, 20), prefix="a")
    seqs = [e.seq for e in weave.store.timeline("gh")]
    engine.memory.process("gh", upto=seqs[9])
    assert engine.memory.cursor("gh") == seqs[9]
    mems = weave.store.timeline("gh", types=(EventType.MEMORY,), include_inactive=True)
    assert mems and max(int(m.payload["source_seq"]) for m in mems) <= seqs[9]
    later = engine.memories("gh", include_inactive=True)  # catches up the rest
    assert max(int(m.payload["source_seq"]) for m in later) > seqs[9]
    assert engine.memory.cursor("gh") == seqs[-1]


def test_a_long_unread_session_is_caught_up_in_the_background(weave_factory, monkeypatch):
    import time

    from beeweave_core.context import engine as engine_module

    monkeypatch.setattr(engine_module, "BACKGROUND_EVENTS", 40)
    weave, engine = _engine(weave_factory, segment_turns=2)
    say(weave, "gh", [*_settings(0, 60), {"role": "user", "content": "Next."}], prefix="a")
    ctx = weave.assemble("gh", budget_tokens=300, model="gpt-4", record=False)
    assert ctx.messages  # assembled from what was there while the thread catches up
    deadline = time.time() + 120
    while engine.catching_up("gh") and time.time() < deadline:
        time.sleep(0.05)
    assert not engine.catching_up("gh")
    last = weave.store.timeline("gh", types=(EventType.USER_MESSAGE,))[-1].seq
    assert engine.memory.cursor("gh") >= last
    summaries = weave.store.timeline("gh", types=(EventType.SUMMARY,))
    assert summaries, "the catch-up compacted the long session"
    after = weave.assemble("gh", budget_tokens=300, model="gpt-4", record=False)
    assert "misting interval at 70 minutes" in after.text()  # the newest setting holds
