"""Long-term memory: extraction, versions, invalidation by a change of plan, conflicts,
lifespans, cross-session recall — on real stores (SQLite, and Neo4j for invalidation)."""

from __future__ import annotations

import time

from beeweave_core.config import ContextConfig, WeaveConfig
from beeweave_core.context import decay
from beeweave_core.events import EdgeType, Status
from beeweave_core.text.language import fold

from .context_helpers import chatter, memories, say


def _by_text(weave, sid, needle, *, include_inactive=True):
    return [
        m for m in memories(weave, sid, include_inactive=include_inactive) if needle in m.content
    ]


def test_changed_plan_is_invalidated_and_no_longer_recalled(backend, weave_factory):
    weave = weave_factory(backend, index=False)
    say(weave, "s", [
        {"role": "system", "content": "You help build a crawler."},
        {"role": "user", "content": "Store results in SQLite."},
        {"role": "assistant", "content": "OK."},
        *chatter(4),
        {"role": "user", "content": "Actually, drop SQLite: store the results as JSON Lines files, one per day."},
        {"role": "assistant", "content": "Switching the output."},
        *chatter(4),
    ])  # fmt: skip
    ctx = weave.assemble("s", "Where are results stored now?", budget_tokens=600, model="gpt-4")
    text = fold(ctx.text())
    assert "json lines" in text
    assert "store results in sqlite" not in text
    (old,) = _by_text(weave, "s", "Store results in SQLite")
    assert old.status == Status.INVALIDATED and old.status_reason.startswith("overturned by #")
    (decision,) = _by_text(weave, "s", "drop SQLite")
    assert decision.status == Status.ACTIVE and decision.payload["kind"] == "decision"
    assert decision.payload["overturned"][0]["memory"] == old.id
    sup = weave.store.edges(event_id=decision.id, types=[EdgeType.SUPERSEDES])
    assert [e.dst for e in sup] == [old.id]
    assert any("JSON Lines" in i.text for i in ctx.working_state.decisions)


def test_retriever_does_not_return_the_overturned_memory(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [{"role": "user", "content": "Store results in SQLite."},
                     {"role": "user", "content": "Actually, drop SQLite: store the results as JSON Lines files."}])  # fmt: skip
    weave.context.update("s")
    (old,) = _by_text(weave, "s", "Store results in SQLite")
    hits = weave.retrieve("SQLite results", session_id="s", k=20)
    assert hits and old.id not in {h.event.id for h in hits}


def test_chinese_change_of_plan_invalidates_and_keeps_the_reason(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [{"role": "user", "content": "空值用列均值填充。"},
                     {"role": "assistant", "content": "好的，已记录。"},
                     {"role": "user", "content": "方案调整：空值改用中位数填充，不再用均值，因为数据偏态。"}])  # fmt: skip
    weave.context.update("s")
    (old,) = _by_text(weave, "s", "列均值填充")
    assert old.status == Status.INVALIDATED
    (new,) = _by_text(weave, "s", "中位数")
    assert new.payload["kind"] == "decision" and new.payload["reason"] == "数据偏态"
    ctx = weave.assemble("s", "现在空值用什么填充？", budget_tokens=400, model="gpt-4o-mini")
    assert "列均值填充" not in ctx.text() and "中位数" in ctx.text()


def test_cancel_that_invalidates_the_previous_instruction(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [{"role": "user", "content": "Serve the admin UI on port 8080."},
                     {"role": "assistant", "content": "Noted."},
                     {"role": "user", "content": "Cancel that."}])  # fmt: skip
    weave.context.update("s")
    (old,) = _by_text(weave, "s", "port 8080")
    assert old.status == Status.INVALIDATED
    (note,) = _by_text(weave, "s", "Cancelled an earlier instruction")
    assert "8080" not in note.content  # the record of the change does not repeat the old plan
    ctx = weave.assemble("s", "which port?", budget_tokens=300)
    assert "8080" not in ctx.text().replace("Cancel that.", "")


def test_one_overturned_clause_leaves_a_revised_version(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "user", "content": "It must finish within 45 minutes, use batches of 5,000 rows, "
                                    "and every API call needs a timeout of 30 seconds."},
        {"role": "user", "content": "Change of plan: use batches of 2,000 rows instead of 5,000 — the warehouse throttles."},
    ])  # fmt: skip
    weave.context.update("s")
    (old,) = _by_text(weave, "s", "45 minutes, use batches of 5,000")
    assert old.status == Status.INVALIDATED
    active = memories(weave, "s")
    revised = [m for m in active if m.payload.get("revision_of") == old.id]
    assert len(revised) == 1
    r = revised[0].content
    assert "45 minutes" in r and "30 seconds" in r and "5,000" not in r
    assert revised[0].payload["version"] == 2
    ctx = weave.assemble("s", "batch size?", budget_tokens=400)
    assert (
        "5,000 rows," not in ctx.text()
        and "2,000 rows" in ctx.text()
        and "45 minutes" in ctx.text()
    )


def test_repeats_link_and_near_duplicates_version(weave_factory):
    weave = weave_factory(index=False)
    ids = say(weave, "s", [
        {"role": "user", "content": "Use the user agent string BeeBot/3.2 for the crawler."},
        {"role": "user", "content": "Use the user agent string BeeBot/3.2 for the crawler."},
        {"role": "user", "content": "Use the user agent string BeeBot/3.2 for the crawler, please."},
    ])  # fmt: skip
    weave.context.update("s")
    everything = _by_text(weave, "s", "BeeBot/3.2")
    assert len(everything) == 2, "a verbatim repeat is one memory, a reworded one a new version"
    v1, v2 = sorted(everything, key=lambda m: m.payload["version"])
    derived = {e.dst for e in weave.store.edges(event_id=v1.id, types=[EdgeType.DERIVED_FROM])}
    assert derived == {ids[0], ids[1]}
    assert v1.status == Status.INVALIDATED and "newer version" in v1.status_reason
    assert (
        v2.status == Status.ACTIVE
        and v2.payload["previous"] == v1.id
        and v2.payload["version"] == 2
    )
    assert [e.dst for e in weave.store.edges(event_id=v2.id, types=[EdgeType.SUPERSEDES])] == [
        v1.id
    ]


def test_a_restated_instruction_with_a_new_value_supersedes_the_old(weave_factory):
    """No cue word: the later value for the same setting wins; the old one stays for audit."""
    weave = weave_factory(index=False)
    say(weave, "s", [{"role": "user", "content": "Limit the crawler to 19 requests per minute per domain."},
                     *chatter(2),
                     {"role": "user", "content": "Limit the crawler to 25 requests per minute per domain."}])  # fmt: skip
    ws = weave.context.working_state("s")
    assert ws.conflicts == []
    mems = _by_text(weave, "s", "requests per minute")
    old = next(m for m in mems if "19" in m.content)
    new = next(m for m in mems if "25" in m.content)
    assert old.status != Status.ACTIVE and new.status == Status.ACTIVE
    assert old.id in [
        e.dst for e in weave.store.edges(event_id=new.id, types=[EdgeType.SUPERSEDES])
    ]
    ctx = weave.assemble("s", "rate limit?", budget_tokens=500)
    assert "25 requests" in ctx.text() and "19 requests" not in ctx.text()
    # measurements of a series are not contradictions
    say(
        weave,
        "m",
        [{"role": "user", "content": f"Sample {i} stayed near {i * 7} units."} for i in range(6)],
    )
    assert weave.context.working_state("m").conflicts == []


def test_lifespan_by_kind_decays_and_expires(weave_factory):
    weave = weave_factory(index=False)
    long_ago = time.time() - 200 * 86400
    say(
        weave,
        "old",
        [
            {"role": "user", "content": "The staging host is stage-7.internal."},
            {"role": "user", "content": "I prefer answers as Markdown tables."},
        ],
        ts=long_ago,
    )
    weave.context.update("old")
    fact = _by_text(weave, "old", "stage-7")[0]
    pref = _by_text(weave, "old", "Markdown")[0]
    assert fact.payload["kind"] == "fact" and pref.payload["kind"] == "preference"
    assert decay(fact) < 0.01 < 0.4 < decay(pref) < 0.6  # half-lives 30 and 180 days
    say(weave, "new", [{"role": "user", "content": "Which staging host and table format again?"}])
    ctx = weave.assemble("new", "staging host and table format", budget_tokens=600)
    recalled = " ".join(p.text for p in ctx.layers["recalled"].pieces)
    assert "Markdown tables" in recalled  # a preference outlives 200 days
    assert "stage-7" not in recalled  # a fact that old has expired


def test_memories_follow_capture_through_the_bus_and_survive_restart(weave_factory, tmp_path):
    weave = weave_factory(index=False)
    engine = weave.context  # hangs the memory writer on the bus
    weave.emit("user_message", "Deduplicate on the key column customer_ref_alpha.", session_id="s",
               role="user", meta={"user_id": "u1"})  # fmt: skip
    weave.flush()
    mems = memories(weave, "s")
    assert [m.content for m in mems] == ["Deduplicate on the key column customer_ref_alpha."]
    assert mems[0].payload["kind"] == "constraint"
    # a second engine over the same store (a restart) does not extract it again
    again = weave_factory(index=False, tenant=weave.tenant)
    assert again.context.update("s") == []
    assert len(memories(again, "s", include_inactive=True)) == 1
    assert engine.memory is not again.context.memory


def test_other_sessions_of_the_same_user_are_recalled_with_their_origin(weave_factory):
    weave = weave_factory(index=False)
    say(
        weave,
        "old",
        [{"role": "user", "content": "My reports must use the EUR currency code."}],
        user_id="ana",
    )
    say(
        weave,
        "other",
        [{"role": "user", "content": "My reports must use the USD currency code."}],
        user_id="bob",
    )
    say(weave, "new", [{"role": "user", "content": "Draft the monthly report."}], user_id="ana")
    ctx = weave.assemble("new", "which currency code do my reports use?", budget_tokens=500)
    text = ctx.text()
    assert "EUR" in text and "USD" not in text
    piece = next(p for p in ctx.layers["recalled"].pieces if "EUR" in p.text)
    assert piece.session_id == "old" and "session old" in piece.text
    assert piece.note == "via retriever"


def test_optional_llm_extractor_adds_what_rules_miss(weave_factory):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from beeweave_langchain import LangChainLLM

    # FAKE LLM: the scripted extraction a real model would return as JSON lines
    fake = GenericFakeChatModel(
        messages=iter(['{"kind": "preference", "text": "The user likes short weekly summaries."}'])
    )
    weave = weave_factory(
        index=False, config=WeaveConfig(context=ContextConfig(memory_llm=LangChainLLM(fake)))
    )
    say(
        weave,
        "s",
        [{"role": "user", "content": "Short weekly summaries work best for me honestly"}],
    )
    weave.context.update("s")
    by_llm = [m for m in memories(weave, "s") if m.payload.get("extractor") == "llm"]
    assert [m.content for m in by_llm] == ["The user likes short weekly summaries."]
    assert by_llm[0].payload["kind"] == "preference"
    src = [e.dst for e in weave.store.edges(event_id=by_llm[0].id, types=[EdgeType.DERIVED_FROM])]
    assert len(src) == 1 and weave.store.get(src)[0].type.value == "user_message"


def test_a_reworded_change_keeps_what_it_overturned(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "user", "content": "Store results in SQLite."},
        {"role": "user", "content": "Actually, drop SQLite: store the results as JSON Lines files."},
        {"role": "user", "content": "Actually, drop SQLite: store the results as JSON Lines files, please."},
        *chatter(2),
    ])  # fmt: skip
    weave.context.update("s")
    (latest,) = [m for m in memories(weave, "s") if "JSON Lines" in m.content]
    assert latest.payload["version"] == 2
    assert latest.payload["overturned"][0]["text"] == "Store results in SQLite."
    ctx = weave.assemble("s", "where?", budget_tokens=400)
    assert "store results in sqlite" not in fold(ctx.text())
