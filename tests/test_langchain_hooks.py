"""beeweave_context_hook: the model gets the assembled, budgeted context; messages are
recorded once; compaction runs; conversions keep tool calls paired.  FAKE LLM (labelled)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from beeweave_core.events import EdgeType, EventType
from beeweave_core.tokens import TokenCounter
from beeweave_langchain.callbacks import BeeWeaveCallbackHandler
from beeweave_langchain.hooks import beeweave_context_hook, events_of
from beeweave_langchain.messages import dicts_to_messages, messages_to_dicts

from .langchain_helpers import TOOLS, by_id, fake_model, user_turn

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")


def make_agent(weave, turns: int, budget: int, prompt: str | None = None, **kw):
    model = fake_model(turns)  # FAKE LLM (labelled)
    hook = beeweave_context_hook(weave, budget_tokens=budget, **kw)
    agent = create_react_agent(model, TOOLS, pre_model_hook=hook, checkpointer=InMemorySaver(),
                               prompt=prompt)  # fmt: skip
    return agent, model, hook.hook


def test_hook_alone_records_the_conversation_and_bounds_the_prompt(weave_factory, backend):
    weave = weave_factory(backend)
    agent, model, hook = make_agent(weave, 8, budget=500)
    cfg = {"configurable": {"thread_id": "t-hook"}}
    for i in range(8):
        out = agent.invoke({"messages": [("user", user_turn(i))]}, cfg)
    assert weave.flush()
    tl = weave.store.timeline("t-hook")
    ev = by_id(tl)
    # no callbacks: the hook recorded every message of the state once, wired by cause
    assert sum(e.type == EventType.USER_MESSAGE for e in tl) == 8
    results = [e for e in tl if e.type == EventType.TOOL_RESULT]
    assert len(results) == 16
    # only the very last answer is not in yet: the hook sees an answer at the next call
    # (the handler or the checkpointer records it at once)
    assert sum(e.type == EventType.ASSISTANT_MESSAGE for e in tl) == 8 * 3 - 1
    for r in results:
        inv = ev[r.parents[0]]
        assert (
            inv.type == EventType.TOOL_INVOCATION
            and inv.payload["tool_call_id"] == r.payload["tool_call_id"]
        )
        assert ev[inv.parents[0]].type == EventType.ASSISTANT_MESSAGE
    # what the model saw: within budget (exactly counted), a tool call next to its result
    counter = TokenCounter()
    for prompt in model.received:
        assert counter.count_messages(messages_to_dicts(prompt)) <= 500
        for k, m in enumerate(prompt):
            if isinstance(m, ToolMessage):
                prev_calls = {
                    tc["id"] for p in prompt[:k] if isinstance(p, AIMessage) for tc in p.tool_calls
                }
                assert m.tool_call_id in prev_calls
    assert len(model.received[-1]) < len(out["messages"])
    assert hook.last.total_tokens <= 500 and hook.last.full_history_tokens > 500


def test_hook_compacts_long_sessions(weave_factory):
    weave = weave_factory()
    agent, _model, hook = make_agent(weave, 13, budget=400)
    cfg = {"configurable": {"thread_id": "t-compact"}}
    for i in range(12):
        agent.invoke({"messages": [("user", user_turn(i))]}, cfg)
    # maintenance compacts when the agent's loop pauses (or a second after work is due):
    # a loop of fast fake turns may end first, so the test lets it read the session, then
    # the next turn's assembly carries what it wrote
    weave.flush()
    weave.context.settle(["t-compact"])
    agent.invoke({"messages": [("user", user_turn(12))]}, cfg)
    summaries = weave.store.timeline("t-compact", types=[EventType.SUMMARY])
    assert summaries, "compaction never ran"
    assert any(e.type == EdgeType.SUMMARIZES for e in weave.store.edges(event_id=summaries[0].id))
    assert hook.last.compaction is not None


def test_with_handler_each_message_once_and_model_calls_link_the_assembly(weave_factory):
    weave = weave_factory()
    agent, model, hook = make_agent(weave, 3, budget=800, prompt="You handle refunds.")
    h = BeeWeaveCallbackHandler(weave)
    cfg = {"callbacks": [h], "configurable": {"thread_id": "t-both"}}
    for i in range(3):
        agent.invoke({"messages": [("user", user_turn(i))]}, cfg)
    assert weave.flush() and h.failures == 0
    tl = weave.store.timeline("t-both")
    assert sum(e.type == EventType.USER_MESSAGE for e in tl) == 3
    assert sum(e.type == EventType.ASSISTANT_MESSAGE for e in tl) == 9
    # the agent's own system prompt (added around the hook's assembly) reaches the model
    # once, and is kept with each model call, not pinned into the session's context
    assert [m.content for m in model.received[-1]].count("You handle refunds.") == 1
    assert not [e for e in tl if e.type == EventType.SYSTEM_PROMPT]
    assert all(c.payload["system_outside_context"] == ["You handle refunds."]
               for c in tl if c.type == EventType.MODEL_CALL)  # fmt: skip
    retrievals = {e.id for e in tl if e.type == EventType.RETRIEVAL}
    calls_ = [e for e in tl if e.type == EventType.MODEL_CALL]
    assert len(calls_) == 9
    given = []
    for c in calls_:  # each model call points at the assembly it was given
        linked = {e.dst for e in weave.store.edges(event_id=c.id, types=[EdgeType.REFERS_TO])}
        assert len(linked) == 1 and linked <= retrievals
        given += linked
    # its own one: turns handed out again from an earlier call never carry that call's id
    assert len(set(given)) == len(calls_)
    # the messages the model saw map back to stored events
    seen = events_of(weave, model.received[-1])
    assert seen and seen[-1].type == EventType.TOOL_RESULT


async def test_async_agent_with_hook(weave_factory):
    weave = weave_factory()
    agent, model, _hook = make_agent(weave, 2, budget=600)
    for i in range(2):
        out = await agent.ainvoke({"messages": [("user", user_turn(i))]},
                                  {"configurable": {"thread_id": "t-async"}})  # fmt: skip
    assert out["messages"][-1].content.startswith("Refunded")
    assert all((m.id or "").startswith("beeweave:") for m in model.received[-1])


def test_missing_session_is_a_clear_error(weave_factory):
    weave = weave_factory()
    hook = beeweave_context_hook(weave, budget_tokens=300)
    with pytest.raises(ValueError, match="thread_id"):
        hook.invoke({"messages": [HumanMessage("hi")]})
    with pytest.raises(ValueError, match="budget_tokens"):
        beeweave_context_hook(weave, budget_tokens=0)


def test_dict_message_round_trip_keeps_tool_calls():
    msgs = [
        SystemMessage("sys"),
        HumanMessage("q", name="ana"),
        AIMessage(
            "", tool_calls=[{"name": "f", "args": {"x": [1, 2]}, "id": "c1", "type": "tool_call"}]
        ),
        ToolMessage("r", tool_call_id="c1"),
        AIMessage("done"),
    ]
    back = dicts_to_messages(messages_to_dicts(msgs))
    assert [type(m) for m in back] == [type(m) for m in msgs]
    assert back[2].tool_calls == msgs[2].tool_calls and back[3].tool_call_id == "c1"
    assert back[1].name == "ana"
    openai_shape = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": '{"y": 3}'}}]}  # fmt: skip
    (m,) = dicts_to_messages([openai_shape])
    assert m.tool_calls == [{"name": "g", "args": {"y": 3}, "id": "c2", "type": "tool_call"}]
    with pytest.raises(ValueError, match="role/content"):
        dicts_to_messages([{"content": "no role"}])
