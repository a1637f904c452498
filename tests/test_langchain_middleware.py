"""BeeWeaveContextMiddleware: a LangChain v1 ``create_agent`` reads BeeWeave's assembled,
budgeted context instead of its full message list; compaction runs; every message is
recorded once, with its causes.

The chat model is FAKE (``FakeToolCallingChatModel``, labelled) — it replays a script of
tool calls and answers and keeps every prompt it was sent.  Everything else is real:
``create_agent`` and its middleware chain, the tools, the tokenizer, the store.
"""

from __future__ import annotations

from collections import Counter

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from beeweave_core.events import EdgeType, EventType
from beeweave_core.tokens import TokenCounter
from beeweave_langchain import (
    AsyncBeeWeaveCallbackHandler,
    BeeWeaveCallbackHandler,
    BeeWeaveContextMiddleware,
)
from beeweave_langchain.hooks import events_of
from beeweave_langchain.messages import messages_to_dicts

from .langchain_helpers import TOOLS, answer_for, assert_tool_chains, by_id, fake_model, user_turn

SYSTEM = "You are RefundBot. Answer in one sentence."
#: Said once, in the first turn; by the last turn that turn is compacted away, so the
#: model can only know it through the working state.
RULE = "Never refund more than 500 EUR without a manager's approval."
BUDGET = 600
TURNS = 10


def make_agent(weave, turns: int, budget: int = BUDGET, **kw):
    model = fake_model(turns)  # FAKE LLM (labelled)
    mw = BeeWeaveContextMiddleware(weave, budget_tokens=budget, **kw)
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[mw],
                         checkpointer=InMemorySaver())  # fmt: skip
    return agent, model, mw


def said(i: int) -> str:
    return f"{user_turn(i)}. {RULE}" if i == 0 else user_turn(i)


def run_turns(agent, thread: str, turns: int, handler=None, text=user_turn):
    """``turns`` user turns on ``thread``; each final answer is the script's."""
    cfg = {"callbacks": [handler] if handler else [], "configurable": {"thread_id": thread}}
    for i in range(turns):
        out = agent.invoke({"messages": [("user", text(i))]}, cfg)
        assert out["messages"][-1].content == answer_for(i)
    return out


def assert_prompt_well_formed(prompt, budget: int, counter: TokenCounter) -> None:
    """Within budget (exactly counted), the system prompt first and once, every tool
    result after the answer that asked for it."""
    assert counter.count_messages(messages_to_dicts(prompt)) <= budget
    assert prompt[0].type == "system" and prompt[0].content == SYSTEM
    assert [m.content for m in prompt].count(SYSTEM) == 1
    for k, m in enumerate(prompt):
        if isinstance(m, ToolMessage):
            asked = {
                tc["id"] for p in prompt[:k] if isinstance(p, AIMessage) for tc in p.tool_calls
            }
            assert m.tool_call_id in asked


def test_create_agent_reads_the_assembly_and_the_graph_is_wired(weave_factory, backend):
    weave = weave_factory(backend)
    agent, model, mw = make_agent(weave, TURNS)
    handler = BeeWeaveCallbackHandler(weave, user_id="u-mw")
    out = run_turns(agent, "t-mw", TURNS, handler, text=said)
    assert handler.failures == 0 and weave.flush()

    # what the model saw, every call: the assembly, within budget, well formed
    counter = TokenCounter()
    assert len(model.received) == 3 * TURNS
    for prompt in model.received:
        assert all((m.id or "").startswith("beeweave:") for m in prompt)
        assert_prompt_well_formed(prompt, BUDGET, counter)
    # the last call: the latest turn verbatim, the first turn only as a BeeWeave note
    last = model.received[-1]
    assert [m.content for m in last if m.type == "human"][-1] == user_turn(TURNS - 1)
    assert isinstance(last[-1], ToolMessage) and "CUST-7009" in last[-1].content
    seen = events_of(weave, last)
    first_user = weave.store.timeline("t-mw", types=[EventType.USER_MESSAGE])[0]
    assert first_user.content == said(0) and first_user.id not in {e.id for e in seen}
    assert not any(RULE in m.content for m in last if m.type == "human")
    # the rule reaches it as a BeeWeave note (the working state's settled items are read
    # among the recalled lines when recall shows any)
    notes = [m.content for m in last if m.type == "system" and m.content.startswith(
        ("Working state", "Recalled by BeeWeave"))]  # fmt: skip
    assert any(RULE in n for n in notes)
    # the conversation outgrew the budget and was compacted; the state kept it all (the
    # last call saw what the bus had stored by then, so its history may trail the flush)
    assert mw.last.full_history_tokens > BUDGET and mw.last.compaction is not None
    # (a read before maintenance has read the session counts only the turns it read)
    weave.context.settle(["t-mw"])
    assert weave.assemble("t-mw", budget_tokens=BUDGET).full_history_tokens > 2 * BUDGET
    assert len(out["messages"]) == 6 * TURNS > len(last)

    # the event graph: each message once, every tool result on its causal chain
    assert assert_tool_chains(weave.store, "t-mw") == 2 * TURNS
    tl = weave.store.timeline("t-mw")
    counts = Counter(e.type for e in tl)
    assert counts[EventType.USER_MESSAGE] == TURNS
    assert counts[EventType.MODEL_CALL] == counts[EventType.ASSISTANT_MESSAGE] == 3 * TURNS
    assert counts[EventType.TOOL_INVOCATION] == counts[EventType.TOOL_RESULT] == 2 * TURNS
    assert counts[EventType.SUMMARY] > 0
    (system,) = [e for e in tl if e.type == EventType.SYSTEM_PROMPT]  # pinned, stored once
    assert system.content == SYSTEM
    assert all(e.meta.get("user_id") == "u-mw" for e in tl if e.type == EventType.MODEL_CALL)
    retrievals = {e.id for e in tl if e.type == EventType.RETRIEVAL}
    for c in (e for e in tl if e.type == EventType.MODEL_CALL):  # each call → its assembly
        linked = {e.dst for e in weave.store.edges(event_id=c.id, types=[EdgeType.REFERS_TO])}
        assert len(linked) == 1 and linked <= retrievals


async def test_async_create_agent(weave_factory):
    weave = weave_factory()
    turns = 4
    agent, model, mw = make_agent(weave, turns, budget=450)
    handler = AsyncBeeWeaveCallbackHandler(weave)
    cfg = {"callbacks": [handler], "configurable": {"thread_id": "t-mw-async"}}
    for i in range(turns):
        out = await agent.ainvoke({"messages": [("user", said(i))]}, cfg)
        assert out["messages"][-1].content == answer_for(i)
    assert handler.failures == 0 and weave.flush()
    counter = TokenCounter()
    for prompt in model.received:
        assert all((m.id or "").startswith("beeweave:") for m in prompt)
        assert_prompt_well_formed(prompt, 450, counter)
    assert [m.content for m in model.received[-1] if m.type == "human"][-1] == user_turn(turns - 1)
    assert mw.last.full_history_tokens > 450
    assert assert_tool_chains(weave.store, "t-mw-async") == 2 * turns
    counts = Counter(e.type for e in weave.store.timeline("t-mw-async"))
    assert counts[EventType.USER_MESSAGE] == turns and counts[EventType.SYSTEM_PROMPT] == 1


def test_without_handler_every_answer_is_recorded_at_once(weave_factory):
    weave = weave_factory()
    agent, _model, _mw = make_agent(weave, 3, budget=800)
    run_turns(agent, "t-mw-alone", 3)
    assert weave.flush()
    tl = weave.store.timeline("t-mw-alone")
    ev = by_id(tl)
    answers = [e for e in tl if e.type == EventType.ASSISTANT_MESSAGE]
    # all 9, the very last one too (the pre-model hook sees an answer only at the next call)
    assert len(answers) == 9 and answers[-1].content == answer_for(2)
    assert sum(e.type == EventType.USER_MESSAGE for e in tl) == 3
    results = [e for e in tl if e.type == EventType.TOOL_RESULT]
    assert len(results) == 6
    for r in results:
        inv = ev[r.parents[0]]
        assert inv.type == EventType.TOOL_INVOCATION
        assert inv.payload["tool_call_id"] == r.payload["tool_call_id"]
        assert ev[inv.parents[0]].type == EventType.ASSISTANT_MESSAGE
    for a in answers:  # each answer hangs off what it answered
        assert ev[a.parents[0]].type in (EventType.USER_MESSAGE, EventType.TOOL_RESULT)


def test_unpinned_system_prompt_stays_outside_the_assembly(weave_factory):
    weave = weave_factory()
    agent, model, _mw = make_agent(weave, 2, budget=800, pin_system_prompt=False)
    handler = BeeWeaveCallbackHandler(weave)
    run_turns(agent, "t-mw-unpinned", 2, handler)
    assert handler.failures == 0 and weave.flush()
    for prompt in model.received:  # the agent's prompt, once, ahead of the assembly
        assert prompt[0].content == SYSTEM and not (prompt[0].id or "").startswith("beeweave:")
        assert [m.content for m in prompt].count(SYSTEM) == 1
    tl = weave.store.timeline("t-mw-unpinned")
    assert not [e for e in tl if e.type == EventType.SYSTEM_PROMPT]
    assert all(c.payload["system_outside_context"] == [SYSTEM]
               for c in tl if c.type == EventType.MODEL_CALL)  # fmt: skip


def test_missing_session_and_bad_budget_are_clear_errors(weave_factory):
    weave = weave_factory()
    model = fake_model(1)  # FAKE LLM (labelled)
    agent = create_agent(model, TOOLS, middleware=[BeeWeaveContextMiddleware(weave)])
    with pytest.raises(ValueError, match="thread_id"):
        agent.invoke({"messages": [("user", user_turn(0))]})
    assert model.received == []  # the model was never called with an unbounded prompt
    with pytest.raises(ValueError, match="budget_tokens"):
        BeeWeaveContextMiddleware(weave, budget_tokens=0)


def test_fixed_session_id_needs_no_thread(weave_factory):
    weave = weave_factory()
    model = fake_model(1)  # FAKE LLM (labelled)
    mw = BeeWeaveContextMiddleware(weave, budget_tokens=500, session_id="fixed")
    out = create_agent(model, TOOLS, middleware=[mw]).invoke({"messages": [("user", user_turn(0))]})
    assert out["messages"][-1].content == answer_for(0)
    assert weave.flush()
    assert [e.content for e in weave.store.timeline("fixed", types=[EventType.USER_MESSAGE])] == [
        user_turn(0)
    ]
