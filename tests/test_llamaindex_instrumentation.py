"""LlamaIndex instrumentation capture: LLM calls, workflow-agent tool calls, errors, causality.

The LLM is llama-index-core's FAKE ``MockFunctionCallingLLM`` driven by a script
(tests/llamaindex_fakes.py); everything else is real: SQLite files, FunctionTools,
the workflow runtime, LlamaIndex's dispatcher.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.agent.workflow import (
    AgentWorkflow,
    FunctionAgent,
    ReActAgent,
    ToolCall,
    ToolCallResult,
)
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.llm import LLMChatStartEvent
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer

from beeweave_core.events import EventType
from beeweave_llamaindex import BeeWeaveChatMemory, BeeWeaveEventHandler, instrument, session_tags
from beeweave_llamaindex import writer as writer_mod

from .llamaindex_fakes import (
    TASKS,
    TOOLS,
    TURNS,
    ScriptedModel,
    by_type,
    check_tool_chain,
    fake_llm,
)


async def run_turns(agent: Any, memory: Any, turns: list[str]) -> list[str]:
    answers = []
    for text in turns:
        answers.append(str(await agent.run(text, memory=memory)))
    return answers


@pytest.fixture
def weave(weave_factory: Any) -> Any:
    return weave_factory("sqlite")


async def test_function_agent_tool_calls_without_consuming_the_stream(weave: Any) -> None:
    handler = instrument(weave, session_id="s1", user_id="u1")
    script = ScriptedModel(TASKS)
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(script), system_prompt="You are a cashier.")
    answers = await run_turns(agent, ChatMemoryBuffer.from_defaults(), TURNS)
    assert answers[0] == "100 EUR is 108.00 USD; with 20% tax that is 129.60 USD."
    assert weave.flush()
    counts = check_tool_chain(weave.store, "s1")
    assert counts == {"users": 3, "results": 6, "invocations": 6}
    events = weave.store.timeline("s1")
    assert [e.content for e in by_type(events, EventType.USER_MESSAGE)] == TURNS
    # one assistant message and one model call per LLM call, none twice
    assert len(by_type(events, EventType.MODEL_CALL)) == script.calls
    assert len(by_type(events, EventType.ASSISTANT_MESSAGE)) == script.calls
    assert [e.content for e in by_type(events, EventType.SYSTEM_PROMPT)] == ["You are a cashier."]
    assert {e.meta["user_id"] for e in events} == {"u1"}
    assert {e.meta["agent_id"] for e in events} == {"Agent"}
    assert handler.failures == 0


async def test_failing_tool_gives_error_result_and_error_event(weave: Any) -> None:
    instrument(weave, session_id="s1")
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(ScriptedModel(TASKS)))
    answer = await agent.run(TURNS[2], memory=ChatMemoryBuffer.from_defaults())
    assert "ORD-77: shipped" in str(answer)
    assert weave.flush()
    events = weave.store.timeline("s1")
    ids = {e.id: e for e in events}
    failed = [e for e in by_type(events, EventType.TOOL_RESULT) if e.payload["is_error"]]
    assert len(failed) == 1 and "unknown order id 'XYZ-1'" in failed[0].content
    (err,) = by_type(events, EventType.ERROR)
    assert err.content == "ValueError: unknown order id 'XYZ-1'"
    assert err.payload["error_type"] == "builtins.ValueError"
    assert ids[err.parents[0]].payload["args"] == {"order_id": "XYZ-1"}
    check_tool_chain(weave.store, "s1")


async def test_stream_events_and_dag_agree(weave: Any) -> None:
    """The ToolCall/ToolCallResult a caller sees in stream_events() are the DAG's tool events."""
    instrument(weave, session_id="s1")
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(ScriptedModel(TASKS)))
    handler = agent.run(TURNS[1], memory=ChatMemoryBuffer.from_defaults())
    streamed: dict[str, set[str]] = {"call": set(), "result": set()}
    async for ev in handler.stream_events():
        if isinstance(ev, ToolCallResult):
            streamed["result"].add(ev.tool_id)
        elif isinstance(ev, ToolCall):
            streamed["call"].add(ev.tool_id)
    await handler
    assert weave.flush()
    events = weave.store.timeline("s1")
    assert streamed["call"] == streamed["result"] and len(streamed["call"]) == 2
    dag_calls = {e.payload["tool_call_id"] for e in by_type(events, EventType.TOOL_INVOCATION)}
    dag_results = {e.payload["tool_call_id"] for e in by_type(events, EventType.TOOL_RESULT)}
    assert dag_calls == dag_results == streamed["call"]


def react_script(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """FAKE LLM for ReActAgent: act once, then answer from the observation."""
    last = messages[-1].content or ""
    if "Observation:" in last:
        obs = last.split("Observation:", 1)[1].strip()
        return ChatMessage(role="assistant",
                           content=f"Thought: I can answer without using any more tools.\nAnswer: It is {obs}")  # fmt: skip
    return ChatMessage(
        role="assistant",
        content="Thought: I need to convert.\nAction: convert_currency\n"
        'Action Input: {"amount": 10, "currency": "GBP"}',
    )


async def test_react_agent_tool_calls(weave: Any) -> None:
    instrument(weave, session_id="s1")
    agent = ReActAgent(tools=TOOLS, llm=MockFunctionCallingLLM(response_generator=react_script))
    answer = await agent.run("How much is 10 GBP?", memory=ChatMemoryBuffer.from_defaults())
    assert str(answer) == "It is 12.70 USD"
    assert weave.flush()
    events = weave.store.timeline("s1")
    ids = {e.id: e for e in events}
    (inv,) = by_type(events, EventType.TOOL_INVOCATION)
    (res,) = by_type(events, EventType.TOOL_RESULT)
    assert inv.payload["args"] == {"amount": 10, "currency": "GBP"}
    assert res.parents == (inv.id,) and res.content == "12.70 USD"
    asked = ids[inv.parents[0]]  # ReAct's tool call lives in the model's text
    assert asked.type == EventType.ASSISTANT_MESSAGE and "Action: convert_currency" in asked.content
    (user,) = by_type(events, EventType.USER_MESSAGE)
    assert user.id in {e.id for e, _ in weave.store.ancestors(res.id, depth=8)}


async def test_agent_workflow_handoff_records_each_agent(weave: Any) -> None:
    def router(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        """FAKE LLM for the router agent: hand off to the cashier."""
        if any(m.role.value == "tool" for m in messages[-1:]):
            return ChatMessage(role="assistant", content="Handing over.")
        return ChatMessage(role="assistant", blocks=[ToolCallBlock(
            tool_call_id="handoff-1", tool_name="handoff",
            tool_kwargs={"to_agent": "cashier", "reason": "money question"})])  # fmt: skip

    cashier_script = ScriptedModel(TASKS)
    router_agent = FunctionAgent(name="router", description="routes", llm=MockFunctionCallingLLM(
        response_generator=router), can_handoff_to=["cashier"], tools=[])  # fmt: skip
    cashier = FunctionAgent(name="cashier", description="money", tools=TOOLS,
                            llm=fake_llm(cashier_script))  # fmt: skip
    flow = AgentWorkflow(agents=[router_agent, cashier], root_agent="router")
    instrument(weave, session_id="s1")
    answer = await flow.run(TURNS[1], memory=ChatMemoryBuffer.from_defaults())
    assert str(answer).startswith("50 EUR is 54.00 USD")
    assert weave.flush()
    events = weave.store.timeline("s1")
    tools = by_type(events, EventType.TOOL_INVOCATION)
    assert [(e.payload["name"], e.meta["agent_id"]) for e in tools] == [
        ("handoff", "router"), ("convert_currency", "cashier"), ("convert_currency", "cashier")
    ]  # fmt: skip
    check_tool_chain(weave.store, "s1")


async def test_llm_failure_is_one_error_event_caused_by_the_model_call(weave: Any) -> None:
    def broken(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        """FAKE LLM that fails like a provider outage."""
        raise ConnectionError("provider unreachable")

    instrument(weave, session_id="s1")
    agent = FunctionAgent(tools=TOOLS, llm=MockFunctionCallingLLM(response_generator=broken))
    with pytest.raises(Exception, match="provider unreachable"):
        await agent.run("hello", memory=ChatMemoryBuffer.from_defaults())
    assert weave.flush()
    events = weave.store.timeline("s1")
    ids = {e.id: e for e in events}
    (err,) = by_type(events, EventType.ERROR)  # one, though it unwound through several spans
    assert err.content == "ConnectionError: provider unreachable"
    assert ids[err.parents[0]].type == EventType.MODEL_CALL


async def test_a_capture_bug_never_reaches_the_agent(weave: Any, monkeypatch: Any) -> None:
    def bug(self: Any, *a: Any, **k: Any) -> str:
        raise RuntimeError("injected capture bug")

    monkeypatch.setattr(writer_mod.TurnWriter, "tool_invocation", bug)
    handler = instrument(weave, session_id="s1")
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(ScriptedModel(TASKS)))
    answer = await agent.run(TURNS[0], memory=ChatMemoryBuffer.from_defaults())
    assert "129.60" in str(answer)
    assert handler.failures == 2  # both tool calls' capture failed, the agent did not notice
    assert weave.flush()
    assert by_type(weave.store.timeline("s1"), EventType.TOOL_RESULT)  # the rest still recorded


def test_redelivered_event_is_stored_once(weave: Any) -> None:
    handler = BeeWeaveEventHandler(weave=weave, session_id="s1")
    ev = LLMChatStartEvent(messages=[ChatMessage(role="user", content="hi")],
                           additional_kwargs={}, model_dict={"model": "m"}, span_id="span-1")  # fmt: skip
    handler.handle(ev)
    handler.handle(ev)
    assert weave.flush()
    events = weave.store.timeline("s1")
    assert [e.type for e in events] == [EventType.USER_MESSAGE, EventType.MODEL_CALL]
    assert events[1].payload["model"] == "m"


def test_standalone_llm_and_tool_calls(weave: Any) -> None:
    instrument(weave, session_id="s1", agent_id="scripted")
    llm = fake_llm(ScriptedModel(TASKS))
    reply = llm.chat([ChatMessage(role="user", content="hi there")])
    out = TOOLS[0].call(amount=10, currency="EUR")
    assert str(out) == "10.80 USD"
    assert weave.flush()
    events = weave.store.timeline("s1")
    assert [e.type for e in events] == [
        EventType.USER_MESSAGE, EventType.MODEL_CALL, EventType.ASSISTANT_MESSAGE,
        EventType.TOOL_INVOCATION, EventType.TOOL_RESULT,
    ]  # fmt: skip
    assert events[2].content == reply.message.content
    assert events[2].parents == (events[1].id,) and events[1].parents == (events[0].id,)
    assert events[3].payload == {"name": "convert_currency", "args": {"amount": 10, "currency": "EUR"},
                                 "tool_call_id": events[3].payload["tool_call_id"]}  # fmt: skip
    assert events[4].parents == (events[3].id,) and events[4].content == "10.80 USD"
    assert {e.meta.get("agent_id") for e in events} == {"scripted"}


def test_instrument_is_idempotent_and_detaches(weave_factory: Any) -> None:
    weave = weave_factory("sqlite")
    d = get_dispatcher()
    h1 = instrument(weave, session_id="s1")
    assert instrument(weave, session_id="s1") is h1
    assert d.event_handlers.count(h1) == 1 and d.span_handlers.count(h1.span_handler) == 1
    h1.detach()
    assert h1 not in d.event_handlers and h1.span_handler not in d.span_handlers
    TOOLS[1].call(amount=1.0, rate=0.5)
    h2 = instrument(weave, session_id="s1")
    weave.close()  # closing the weave detaches what instrument() attached
    assert h2 not in d.event_handlers and h2.span_handler not in d.span_handlers


async def test_runs_follow_their_memory_and_instrument_retargets(weave: Any) -> None:
    """One handler per weave: a run goes to its BeeWeaveChatMemory's session, and calling
    instrument() again re-aims the default instead of attaching a second recorder."""
    h = instrument(weave, session_id="first", user_id="u1")
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(ScriptedModel(TASKS)))
    mem_a = BeeWeaveChatMemory.from_defaults(weave=weave, session_id="alice", user_id="ua")
    mem_b = BeeWeaveChatMemory.from_defaults(weave=weave, session_id="bob", user_id="ub")
    await agent.run(TURNS[0], memory=mem_a)
    await agent.run(TURNS[1], memory=mem_b)
    assert instrument(weave, session_id="second", user_id="u2") is h
    await agent.run(TURNS[1], memory=ChatMemoryBuffer.from_defaults())
    assert weave.flush()
    sessions = {s.session_id: s for s in weave.store.sessions()}
    assert set(sessions) == {"alice", "bob", "second"}
    assert sessions["alice"].user_ids == ["ua"] and sessions["second"].user_ids == ["u2"]
    for sid in sessions:
        users = by_type(weave.store.timeline(sid), EventType.USER_MESSAGE)
        assert len(users) == 1, sid  # recorded once, by one handler
        check_tool_chain(weave.store, sid)
    assert sum(isinstance(x, BeeWeaveEventHandler) for x in get_dispatcher().event_handlers) == 1


async def test_concurrent_runs_keep_their_own_chains(weave: Any) -> None:
    """Four agent runs interleaved on one event loop: no parent crosses runs or sessions."""
    instrument(weave, session_id="unused")
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(ScriptedModel(TASKS)))
    memories = [BeeWeaveChatMemory.from_defaults(weave=weave, session_id=f"par-{i}")
                for i in range(4)]  # fmt: skip
    await asyncio.gather(*(agent.run(TURNS[i % 2], memory=m) for i, m in enumerate(memories)))
    assert weave.flush()
    for i in range(4):
        sid = f"par-{i}"
        events = weave.store.timeline(sid)
        own = {e.id for e in events}
        assert all(p in own for e in events for p in e.parents), sid
        assert check_tool_chain(weave.store, sid)["results"] == 2
        (user,) = by_type(events, EventType.USER_MESSAGE)
        assert user.content == TURNS[i % 2]


async def test_session_tags_route_a_run(weave: Any) -> None:
    instrument(weave, session_id="default-session")
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(ScriptedModel(TASKS)))
    with session_tags("routed", user_id="u9"):
        await agent.run(TURNS[0], memory=ChatMemoryBuffer.from_defaults())
    assert weave.flush()
    assert {s.session_id for s in weave.store.sessions()} == {"routed"}
    events = weave.store.timeline("routed")
    assert {e.meta["user_id"] for e in events} == {"u9"}
    check_tool_chain(weave.store, "routed")


def test_bad_arguments_are_clear_errors(weave: Any) -> None:
    with pytest.raises(ValueError, match="session_id"):
        BeeWeaveEventHandler(weave=weave, session_id="")
    with pytest.raises(TypeError, match="beeweave_core.Weave"):
        BeeWeaveEventHandler(weave=object(), session_id="s")
