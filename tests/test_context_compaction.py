"""Compaction: segments, hierarchy, verified retention (retry / roll back), the thrash
guard, and summaries rebuilt when the user overturns what they hold.

The only fake is the chat model of the LLM-summarizer tests: LangChain's
``GenericFakeChatModel`` (FAKE LLM, scripted replies) and LlamaIndex's ``MockLLM``.
Stores are real SQLite files; tokens are real tiktoken counts.
"""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from beeweave_core.config import ContextConfig, WeaveConfig
from beeweave_core.context import CompactionPolicy, LLMSummarizer
from beeweave_core.events import EdgeType, EventType, Status
from beeweave_core.text.language import fold
from beeweave_langchain import LangChainLLM

from .context_helpers import chatter, say

FACT = "The job must finish within 45 minutes and use batches of 5,000 rows."


def _engine(weave_factory, **ctx_options):
    """A weave whose context engine has these settings, and that engine."""
    weave = weave_factory(index=False, config=WeaveConfig(context=ContextConfig(**ctx_options)))
    return weave, weave.context


def _summaries(weave, sid, *, include_inactive=True):
    return weave.store.timeline(sid, types=(EventType.SUMMARY,), include_inactive=include_inactive)


def test_llm_summary_that_loses_a_number_is_rolled_back_and_originals_kept(weave_factory):
    # FAKE LLM: both attempts drop "45" and "5,000"
    fake = GenericFakeChatModel(messages=iter(["- Goal: a nightly job with a time limit.",
                                               "- Goal: nightly job; batches; time limit."]))  # fmt: skip
    weave, engine = _engine(
        weave_factory, llm=LangChainLLM(fake), policy=CompactionPolicy(segment_turns=2, retries=1)
    )
    say(weave, "s", [{"role": "user", "content": FACT},
                     {"role": "assistant", "content": "Noted, I will plan the job around that."},
                     {"role": "user", "content": "Now draft the schedule."}])  # fmt: skip
    report = engine.compact("s", window_tokens=60, model="gpt-4", force=True)
    assert len(report.summaries) == 1 and report.rolled_back == report.summaries
    (summary,) = _summaries(weave, "s")
    assert summary.status == Status.INVALIDATED
    assert "retention check failed: lost" in summary.status_reason and "45" in summary.status_reason
    retention = summary.payload["retention"]
    assert retention["outcome"] == "rolled_back" and retention["attempts"] == 2
    assert {"45", "5,000"} <= set(retention["missing"])
    warnings = weave.store.timeline("s", types=(EventType.WARNING,))
    assert [w.payload["kind"] for w in warnings] == ["retention"]
    # the originals are what the model gets, not the lossy summary
    ctx = weave.assemble("s", "how long may the job run?", budget_tokens=220, model="gpt-4")
    text = ctx.text()
    assert "45 minutes" in text and "nightly job with a time limit" not in text
    assert not any(p.kind == "summary" for p in ctx.layers["recalled"].pieces)


def test_llm_summary_retried_with_the_missing_values_named(weave_factory):
    # FAKE LLM: first reply loses 5,000; the retry (told what was lost) keeps everything
    fake = GenericFakeChatModel(messages=iter([
        "- Constraint: finish within 45 minutes.",
        "- Constraint: finish within 45 minutes; batches of 5,000 rows.",
    ]))  # fmt: skip
    weave, engine = _engine(
        weave_factory, llm=LangChainLLM(fake), policy=CompactionPolicy(segment_turns=2)
    )
    ids = say(weave, "s", [{"role": "user", "content": FACT},
                           {"role": "assistant", "content": "Noted, I will plan the job around that."},
                           {"role": "user", "content": "Now draft the schedule."}])  # fmt: skip
    report = engine.compact("s", window_tokens=60, model="gpt-4", force=True)
    (summary,) = _summaries(weave, "s")
    assert summary.status == Status.ACTIVE and not report.rolled_back
    assert summary.payload["retention"] == {
        "checked": 3,
        "missing": [],
        "attempts": 2,
        "outcome": "retried",
    }
    assert summary.content.endswith("batches of 5,000 rows.")
    targets = {e.dst for e in weave.store.edges(event_id=summary.id, types=[EdgeType.SUMMARIZES])}
    assert targets == set(ids[:2])
    assert (summary.payload["seq_from"], summary.payload["seq_to"]) == (0, 1)
    assert summary.payload["ratio"] > 0 and report.ratio is not None


def test_llamaindex_llm_through_its_adapter(weave_factory):
    from llama_index.core.llms.mock import MockLLM

    from beeweave_llamaindex import LlamaIndexLLM

    # FAKE LLM: LlamaIndex's MockLLM echoes the prompt, so nothing is lost
    weave, engine = _engine(
        weave_factory,
        summarizer=LLMSummarizer(LlamaIndexLLM(MockLLM())),
        policy=CompactionPolicy(segment_turns=2),
    )
    say(weave, "s", [{"role": "user", "content": FACT},
                     {"role": "assistant", "content": "Noted, I will plan the job around that."},
                     {"role": "user", "content": "Go."}])  # fmt: skip
    engine.compact("s", window_tokens=60, model="gpt-4", force=True)
    (summary,) = _summaries(weave, "s")
    assert summary.payload["retention"]["outcome"] == "ok"
    assert summary.payload["summarizer"].startswith("llm:")


def test_a_plain_function_is_an_llm_and_an_unwrapped_chat_model_is_refused(weave_factory):
    prompts: list[str] = []

    def notes(prompt: str) -> str:  # FAKE LLM: keeps the user's lines of the prompt
        prompts.append(prompt)
        return "\n".join(ln for ln in prompt.splitlines() if " user: " in ln)

    weave, engine = _engine(weave_factory, llm=notes, policy=CompactionPolicy(segment_turns=2))
    say(weave, "s", [{"role": "user", "content": FACT},
                     {"role": "assistant", "content": "Noted, I will plan the job around that."},
                     {"role": "user", "content": "Go."}])  # fmt: skip
    engine.compact("s", window_tokens=60, model="gpt-4", force=True)
    (summary,) = _summaries(weave, "s")
    assert summary.payload["summarizer"] == "llm:notes" and "45 minutes" in summary.content
    assert prompts and prompts[0].startswith("You compress part of a conversation")
    chat_model = GenericFakeChatModel(messages=iter(["- nothing"]))  # FAKE LLM
    with pytest.raises(TypeError, match="beeweave_langchain.LangChainLLM"):
        LLMSummarizer(chat_model)


def test_segments_merge_hierarchically_with_compression(weave_factory):
    weave, engine = _engine(weave_factory, policy=CompactionPolicy(segment_turns=2, merge_after=2))
    msgs = []
    for i in range(8):
        msgs += [{"role": "user", "content": f"Step {i}: set option opt_{i} to {100 + i}. " + "Chatter here. " * 30},
                 {"role": "assistant", "content": "Sure, I'll keep that in mind and carry on as planned."}]  # fmt: skip
    msgs.append({"role": "user", "content": "Which value did opt_3 get?"})
    say(weave, "s", msgs)
    report = engine.compact("s", window_tokens=400, model="gpt-4")
    assert report.triggered and len(report.summaries) >= 4 and report.merged
    active = _summaries(weave, "s", include_inactive=False)
    levels = {s.payload["level"] for s in active}
    assert {0, 1} <= levels
    top = engine.compactor.top_summaries("s")
    children = {c for s in active for c in s.payload.get("children", [])}
    assert not children & {s.id for s in top}
    parent = next(s for s in active if s.payload["level"] == 1)
    edges = {e.dst for e in weave.store.edges(event_id=parent.id, types=[EdgeType.SUMMARIZES])}
    assert edges == set(parent.payload["children"])
    stats = engine.compactor.stats("s")
    assert stats["ratio"] is not None and stats["ratio"] < 0.5
    # every value survived into the top-level summaries
    top_text = "\n".join(s.content for s in top)
    for i in range(len(report.summaries)):
        assert f"opt_{i}" in top_text and str(100 + i) in top_text


def test_thrash_guard_warns_and_backs_off(weave_factory):
    weave, engine = _engine(weave_factory, policy=CompactionPolicy(segment_turns=2, thrash_turns=4))
    compactions, backoffs = [], []

    def segments() -> set[int]:  # turns compacted so far (a rebuilt segment is not new)
        return {int(x.payload["seq_from"]) for x in _summaries(weave, "s")
                if int(x.payload.get("level", 0)) == 0}  # fmt: skip

    for step in range(16):
        before = segments()
        big = f"Measurement run {step} gave load_{step} = {1000 + step}. " + " ".join(
            f"Sample {step}-{j} stayed near {j * 7 + step} units." for j in range(25)
        )
        say(weave, "s", [{"role": "user", "content": big},
                         {"role": "assistant", "content": f"Recorded run {step}."}], prefix=f"p{step}")  # fmt: skip
        report = engine.compact("s", window_tokens=1000, model="gpt-4")
        # (maintenance may have compacted in the background before this call: count
        # the turns compacted, whoever compacted them)
        if segments() - before:
            compactions.append(step)
        if report.reason.startswith("backing off"):
            backoffs.append(step)
    warnings = [w for w in weave.store.timeline("s", types=(EventType.WARNING,))
                if w.payload["kind"] == "thrash"]  # fmt: skip
    assert warnings, "refilling right after a compaction must be flagged"
    assert warnings[0].payload["turns_since_compaction"] <= 4
    assert "immediate layer" in warnings[0].payload["action"]
    assert backoffs, "after a thrash warning the compactor must wait instead of compacting"
    assert len(compactions) < 16 // 2
    gaps = [b - a for a, b in zip(compactions, compactions[1:], strict=False)]
    assert max(gaps) > min(gaps), f"gaps between compactions should grow: {compactions}"
    assert engine.compactor.level("s") >= 1
    # and the assembler shrinks the immediate layer at that level
    ctx = weave.assemble("s", "load_3?", budget_tokens=1000, model="gpt-4", phase="execution")
    avail = 1000 - ctx.overhead_tokens - ctx.layers["system"].tokens
    assert (
        ctx.layers["immediate"].budget - (avail - int(avail * 0.3) - int(avail * 0.3))
        < ctx.layers["recalled"].budget
    )  # immediate lost its share to recall


def test_summary_is_rebuilt_when_the_user_overturns_what_it_holds(weave_factory):
    weave, engine = _engine(weave_factory, policy=CompactionPolicy(segment_turns=2))
    say(weave, "s", [{"role": "user", "content": "The export batch size is 500 rows."},
                     {"role": "assistant", "content": "Noted, exports go out in 500-row batches."},
                     *chatter(3),
                     {"role": "user", "content": "Next please."}], prefix="a")  # fmt: skip
    engine.compact("s", window_tokens=80, model="gpt-4", force=True)
    first = [s for s in _summaries(weave, "s") if "batch size is 500 rows" in fold(s.content)]
    assert first, "the setting is in a summary before it is overturned"
    say(weave, "s", [{"role": "user", "content": "Let us raise the export batch size to 800 rows."}],
        prefix="b")  # fmt: skip
    # maintenance rebuilds the summary (explicit compaction waits for it)
    engine.compact("s", window_tokens=80, model="gpt-4")
    ctx = weave.assemble("s", "what batch size do exports use?", budget_tokens=400, model="gpt-4")
    old = weave.store.get([first[0].id], include_inactive=True)[0]
    assert old.status == Status.INVALIDATED and "overturned" in old.status_reason
    newer = [
        e.src
        for e in weave.store.edges(event_id=old.id, types=[EdgeType.SUPERSEDES], direction="in")
    ]
    assert newer and all(
        "batch size is 500 rows" not in fold(e.content) for e in weave.store.get(newer)
    )
    # the turns themselves are never hidden: the old one, if shown, comes before the new
    text = fold(ctx.text())
    assert "800 rows" in text
    if "500 rows" in text:
        assert text.index("500 rows") < text.rindex("800 rows")


def test_extractive_summarizer_keeps_values_and_cues_in_both_languages():
    from beeweave_core.context import ExtractiveSummarizer
    from beeweave_core.context.editing import SourceLine

    lines = [
        SourceLine("a", 1, "user", "Thanks a lot. The export job must time out after 17 seconds."),
        SourceLine(
            "b", 2, "assistant", "Let me think about this carefully. What else should I check?"
        ),
        SourceLine(
            "c", 3, "user", "好的。合并重复行时按 order_key_beta 这一列判断。今天天气不错。"
        ),
        SourceLine("d", 4, "user", "方案调整：空值改用中位数填充，因为数据偏态。"),
        SourceLine("e", 5, "tool", "profile_csv(path=x.csv) → rows_scanned=377120"),
    ]
    out = ExtractiveSummarizer().summarize(lines)
    assert out.splitlines() == [
        "- #1 user: The export job must time out after 17 seconds.",
        "- #3 user: 合并重复行时按 order_key_beta 这一列判断。",
        "- #4 user: 方案调整：空值改用中位数填充，因为数据偏态。",
        "- #5 tool: profile_csv(path=x.csv) → rows_scanned=377120",
    ]
    # a value the caller insists on is kept even from an otherwise dull sentence
    forced = ExtractiveSummarizer().summarize(
        [SourceLine("x", 9, "assistant", "We chatted about lunch at noon.")], must_keep=["lunch"]
    )
    assert forced == "- #9 assistant: We chatted about lunch at noon."


def _covered(weave, sid, ids):
    """The message positions each active level-0 summary covers."""
    pos = {i: n for n, i in enumerate(ids)}
    return sorted(
        tuple(sorted(pos[i] for i in s.payload["source_ids"] if i in pos))
        for s in _summaries(weave, sid, include_inactive=False)
        if s.payload.get("level", 0) == 0
    )


def test_a_backlog_is_compacted_as_a_worker_that_kept_up_would_have(weave_factory):
    """Maintenance may be far behind when it runs (a burst of turns, a busy machine).
    The summaries must not depend on that: compacting a stored backlog at once gives the
    segments that compacting after every turn gave."""
    talk = chatter(40)
    policy = CompactionPolicy(segment_turns=4, merge_after=100)
    kept_up, kept_engine = _engine(weave_factory, policy=policy)
    behind, behind_engine = _engine(weave_factory, policy=policy)
    ids_up: list[str] = []
    for n, m in enumerate(talk):
        ids_up += say(kept_up, "s", [m], prefix=f"m{n}", maintain=False)
        kept_engine.compact("s", window_tokens=300, model="gpt-4")
    ids_behind = say(behind, "s", talk, prefix="m", maintain=False)
    behind_engine.compact("s", window_tokens=300, model="gpt-4")
    made = _covered(kept_up, "s", ids_up)
    assert len(made) >= 3  # the trigger was passed several times
    assert _covered(behind, "s", ids_behind) == made
