"""Long-term memory on real stores: what becomes a memory (by speech act), supersession,
proposals taken up or turned down, repeats, lifespans, the bus path and restarts."""

from __future__ import annotations

import time

from beeweave_core.config import ContextConfig, WeaveConfig
from beeweave_core.context import decay
from beeweave_core.events import EdgeType, Status
from beeweave_core.text.language import fold

from .context_helpers import chatter, exchanges, memories, say


def _by_text(weave, sid, needle, *, include_inactive=True):
    return [
        m for m in memories(weave, sid, include_inactive=include_inactive) if needle in m.content
    ]


def test_a_new_value_for_a_setting_supersedes_the_old_and_the_history_shows_both(
    backend, weave_factory
):
    weave = weave_factory(backend, index=False)
    ids = say(weave, "s", [
        {"role": "system", "content": "You run the photo studio's booking desk."},
        {"role": "user", "content": "Portrait sessions are booked in 45-minute slots."},
        {"role": "assistant", "content": "Understood."},
        *chatter(3),
        {"role": "user", "content": "Portrait sessions are booked in 60-minute slots from now on."},
        {"role": "assistant", "content": "Switched."},
    ])  # fmt: skip
    (old,) = _by_text(weave, "s", "45-minute")
    (new,) = _by_text(weave, "s", "60-minute")
    assert old.status == Status.INVALIDATED and old.status_reason.startswith("superseded by #")
    assert new.status == Status.ACTIVE and new.payload["overturned"][0]["memory"] == old.id
    assert ids[1] in new.payload["overturned"][0]["sources"]  # the turn that said it
    sup = weave.store.edges(event_id=new.id, types=[EdgeType.SUPERSEDES])
    assert [e.dst for e in sup] == [old.id]
    # the history fits: every turn verbatim, the new value after the old one
    ctx = weave.assemble("s", "How long are portrait slots?", budget_tokens=2_000)
    text = ctx.text()
    assert text.index("45-minute") < text.index("60-minute")
    assert [m["content"] for m in ctx.messages[1:]] == [
        m.content for m in weave.store.timeline("s") if m.type.value.endswith("message")
    ]
    # the working state holds only what is in force
    ws = weave.context.working_state("s")
    assert "60-minute" in ws.render() and "45-minute" not in ws.render()


def test_a_recalled_old_value_is_followed_by_what_replaced_it(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "user", "content": "Portrait sessions are booked in 45-minute slots."},
        {"role": "assistant", "content": "Understood."},
        *chatter(6),
        {"role": "user", "content": "Portrait sessions are booked in 60-minute slots from now on."},
        {"role": "assistant", "content": "Switched."},
        *chatter(30),
    ])  # fmt: skip
    ctx = weave.assemble("s", "portrait sessions slots", budget_tokens=400, model="gpt-4")
    assert ctx.total_tokens <= 400 < ctx.full_history_tokens
    recalled = "\n".join(p.text for p in ctx.layers["recalled"].pieces)
    assert "60-minute" in recalled
    if "45-minute" in recalled:  # shown, then what replaced it, and said so
        assert recalled.index("45-minute") < recalled.index("60-minute")
        assert "later on this" in recalled


def _records(weave, sid, said, reply, n):
    """``n`` records said by the user (``said(i)``), each acknowledged; their memories."""
    say(weave, sid, exchanges(n, said, lambda _i: reply))
    return memories(weave, sid, include_inactive=True)


def test_records_of_a_list_named_by_numbers_are_all_kept(weave_factory):
    """A list of look-alike records (a number names each, and each holds something of
    its own) is many items: none supersedes another, so none is pointed at another as
    its "later" value.  Before, most of such a list went inactive, each record taken as
    the next value of the one before."""
    weave = weave_factory(index=False)
    kits = ["soldering iron", "oscilloscope probe", "bench multimeter", "hot-air station"]
    mems = _records(weave, "lab", lambda i: f"Drawer {40 + i} keeps the {kits[i % 4]} "
                    f"with {3 + i % 5} spare tips.", "Got it.", 16)  # fmt: skip
    drawers = [m for m in mems if "Drawer" in m.content]
    assert len(drawers) == 16
    assert all(m.status == Status.ACTIVE for m in drawers), [
        (m.content, m.status_reason) for m in drawers if m.status != Status.ACTIVE
    ]
    ctx = weave.assemble("lab", "which drawer keeps the oscilloscope probe?", budget_tokens=300)
    assert "later on this" not in ctx.text()
    parts = ["扳手", "万用表", "电烙铁", "示波器探头"]  # the same in Chinese: N号 names an item
    mems = _records(weave, "lab-zh", lambda i: f"{20 + i}号抽屉里放着{parts[i % 4]}，"
                    f"还有{2 + i % 3}卷胶带。", "收到。", 12)  # fmt: skip
    drawers = [m for m in mems if "抽屉" in m.content]
    assert len(drawers) == 12 and all(m.status == Status.ACTIVE for m in drawers)


def test_small_talk_questions_and_tasks_are_not_memories(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "user", "content": "haha, what a morning"},
        {"role": "user", "content": "Where did we leave the signed lease?"},
        {"role": "user", "content": "Could you draft the welcome email for the new tenants?"},
        {"role": "user", "content": "ok thanks"},
        {"role": "user", "content": "The boiler in flat 3 was serviced in January."},
    ])  # fmt: skip
    assert [m.content for m in memories(weave, "s")] == [
        "The boiler in flat 3 was serviced in January."
    ]


def test_a_bare_yes_takes_up_the_proposal_and_a_refusal_records_it_as_turned_down(weave_factory):
    weave = weave_factory(index=False)
    ids = say(weave, "s", [
        {"role": "user", "content": "Plan the choir's autumn rehearsals."},
        {"role": "assistant", "content": "Shall we rehearse on Tuesdays at 19:30?"},
        {"role": "user", "content": "yes"},
        {"role": "assistant", "content": "Should we add a Saturday sectional at 10:00?"},
        {"role": "user", "content": "no"},
    ])  # fmt: skip
    (taken,) = _by_text(weave, "s", "Tuesdays at 19:30")
    assert taken.status == Status.ACTIVE and taken.payload["source_ids"] == [ids[1], ids[2]]
    (turned,) = _by_text(weave, "s", "Saturday sectional")
    assert turned.status == Status.INVALIDATED and turned.payload["rejected"] is True
    assert turned.status_reason.startswith("turned down by the user")
    ws = weave.context.working_state("s").render()
    assert "19:30" in ws and "Saturday" not in ws  # never shown as current


def test_repeats_link_and_a_confirmation_is_linked_to_what_it_repeats(weave_factory):
    weave = weave_factory(index=False)
    ids = say(weave, "s", [
        {"role": "user", "content": "The press embargo lifts at 08:00 CET."},
        {"role": "assistant", "content": "Noted: embargo lifts at 08:00 CET."},
        {"role": "user", "content": "The press embargo lifts at 08:00 CET."},
    ])  # fmt: skip
    (mem,) = _by_text(weave, "s", "embargo")
    linked = {e.dst for e in weave.store.edges(event_id=mem.id, types=[EdgeType.DERIVED_FROM])}
    assert linked == {ids[0], ids[1], ids[2]}  # said, confirmed, said again: one memory


def test_lifespan_by_kind_decays_and_expires(weave_factory):
    weave = weave_factory(index=False)
    long_ago = time.time() - 200 * 86400
    say(weave, "old", [{"role": "user", "content": "The staging host is stage-7.internal."},
                       {"role": "user", "content": "I prefer answers as Markdown tables."}],
        ts=long_ago)  # fmt: skip
    fact = _by_text(weave, "old", "stage-7")[0]
    pref = _by_text(weave, "old", "Markdown")[0]
    assert fact.payload["kind"] == "fact" and pref.payload["kind"] == "preference"
    assert decay(fact) < 0.01 < 0.4 < decay(pref) < 0.6  # half-lives 30 and 180 days


def test_memories_follow_capture_through_the_bus_and_survive_restart(weave_factory):
    weave = weave_factory(index=False)
    engine = weave.context  # subscribes maintenance to the bus
    weave.emit("user_message", "Use order_key_beta as the key column when removing duplicates.", session_id="s",
               role="user", meta={"user_id": "u1"})  # fmt: skip
    weave.flush()
    engine.update("s")
    mems = memories(weave, "s")
    assert [m.content for m in mems] == [
        "Use order_key_beta as the key column when removing duplicates."
    ]
    assert mems[0].payload["kind"] in ("constraint", "decision")
    # a second engine over the same store (a restart) does not extract it again
    again = weave_factory(index=False, tenant=weave.tenant)
    assert again.context.update("s") == []
    assert len(memories(again, "s", include_inactive=True)) == 1
    assert engine.memory is not again.context.memory


def test_other_sessions_of_the_same_user_are_recalled_with_their_origin(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "old", [{"role": "user", "content": "My invoices must use the EUR currency code."}],
        user_id="ana")  # fmt: skip
    say(weave, "other", [{"role": "user", "content": "My invoices must use the USD currency code."}],
        user_id="bob")  # fmt: skip
    say(weave, "new", [{"role": "user", "content": "Draft the monthly invoice."}], user_id="ana")
    ctx = weave.assemble("new", "which currency code do my invoices use?", budget_tokens=500)
    text = ctx.text()
    assert "EUR" in text and "USD" not in text
    piece = next(p for p in ctx.layers["recalled"].pieces if "EUR" in p.text)
    assert piece.session_id == "old" and "[session old]" in text
    assert piece.note.startswith("via retriever")


def test_optional_llm_extractor_adds_what_the_classifier_misses(weave_factory):
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
    by_llm = [m for m in memories(weave, "s") if m.payload.get("extractor") == "llm"]
    assert [m.content for m in by_llm] == ["The user likes short weekly summaries."]
    assert by_llm[0].payload["kind"] == "preference"
    src = [e.dst for e in weave.store.edges(event_id=by_llm[0].id, types=[EdgeType.DERIVED_FROM])]
    assert len(src) == 1 and weave.store.get(src)[0].type.value == "user_message"


def test_a_setting_changed_twice_keeps_both_old_values_overturned(weave_factory):
    weave = weave_factory(index=False)
    say(weave, "s", [
        {"role": "user", "content": "Portrait sessions are booked in 45-minute slots."},
        *chatter(2),
        {"role": "user", "content": "Portrait sessions are booked in 60-minute slots from now on."},
        *chatter(2),
        {"role": "user", "content": "Portrait sessions are booked in 90-minute slots from now on."},
    ])  # fmt: skip
    (latest,) = [m for m in memories(weave, "s") if "90-minute" in m.content]
    gone = {fold(o["text"]) for o in latest.payload["overturned"]}
    assert any("45-minute" in t for t in gone) and any("60-minute" in t for t in gone)


def test_how_far_apart_two_statements_were_said_counts_turns_not_stored_events(weave_factory):
    """Audit records, model calls and memories are stored between the turns, as many as
    the agent's timing made; supersession's distance is in conversation turns, also
    after a restart (the writer reads its place back from the memories)."""
    weave = weave_factory(index=False)
    say(weave, "s", [{"role": "user", "content": "Archive the build logs after 14 days."},
                     {"role": "assistant", "content": "Understood."}], prefix="a")  # fmt: skip
    for n in range(25):  # bookkeeping of model calls, between two turns
        weave.emit("model_call", "", session_id="s", role="assistant", key=f"call-{n}")
    weave.flush()
    say(weave, "s", [{"role": "user", "content": "Archive the build logs after 30 days now."}],
        prefix="b")  # fmt: skip
    mems = memories(weave, "s", include_inactive=True)
    assert [m.payload["source_turn"] for m in mems] == [1, 3]
    assert mems[1].seq - mems[0].seq > 20  # the stored events are far apart
    restarted = weave_factory(index=False, tenant=weave.tenant)
    say(restarted, "s", [{"role": "assistant", "content": "Noted."},
                         {"role": "user", "content": "Archive the build logs after 45 days."}],
        prefix="c")  # fmt: skip
    turns = [m.payload["source_turn"] for m in memories(restarted, "s", include_inactive=True)]
    assert turns == [1, 3, 5]
