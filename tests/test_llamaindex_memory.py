"""``BeeWeaveChatMemory`` against what LlamaIndex expects of a ``BaseMemory``, and
``BeeWeaveMemoryBlock`` inside LlamaIndex's own ``Memory``.

Real SQLite store, real tokenizer; the only fake is the LLM (``MockLLM`` for its
metadata, the scripted ``MockFunctionCallingLLM`` in the agent test).
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLM
from llama_index.core.memory import BaseMemory, Memory
from sqlalchemy.ext.asyncio import create_async_engine

from beeweave_core.events import EventType, Status
from beeweave_core.tokens import TokenCounter
from beeweave_llamaindex import BeeWeaveChatMemory, BeeWeaveMemoryBlock, instrument
from beeweave_llamaindex.messages import to_dict

from .llamaindex_fakes import TASKS, TOOLS, TURNS, ScriptedModel, by_type, fake_llm

CONVERSATION = [
    ChatMessage(role="user", content="Convert 100 EUR to USD please."),
    ChatMessage(
        role="assistant",
        blocks=[
            ToolCallBlock(
                tool_call_id="c1",
                tool_name="convert_currency",
                tool_kwargs={"amount": 100, "currency": "EUR"},
            )
        ],
    ),  # fmt: skip
    ChatMessage(role="tool", content="108.00 USD", additional_kwargs={"tool_call_id": "c1"}),
    ChatMessage(role="assistant", content="100 EUR is 108.00 USD."),
]


@pytest.fixture
def weave(weave_factory: Any) -> Any:
    return weave_factory("sqlite")


def memory_for(weave: Any, session_id: str = "s1", **kw: Any) -> BeeWeaveChatMemory:
    return BeeWeaveChatMemory.from_defaults(weave=weave, session_id=session_id, **kw)


def plain(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [to_dict(m) for m in messages]


def test_is_a_base_memory_built_like_chat_memory_buffer(weave: Any) -> None:
    m = memory_for(weave, token_limit=500, user_id="u1")
    assert isinstance(m, BaseMemory)
    assert (m.session_id, m.token_limit, m.user_id) == ("s1", 500, "u1")
    by_key = BeeWeaveChatMemory.from_defaults(weave=weave, chat_store_key="k")
    assert by_key.session_id == "k"  # ChatMemoryBuffer's name for it
    # like ChatMemoryBuffer: 75% of the LLM's context window when no limit is given
    assert memory_for(weave, llm=MockLLM()).token_limit == int(
        MockLLM().metadata.context_window * 0.75
    )
    assert memory_for(weave).token_limit == 3000
    assert "weave" not in m.to_dict() and m.to_dict()["session_id"] == "s1"
    with pytest.raises(ValueError, match="weave="):
        BeeWeaveChatMemory.from_defaults(weave="not a weave", session_id="s1")
    generated = BeeWeaveChatMemory.from_defaults(weave=weave)  # as ChatMemoryBuffer: optional
    assert (
        generated.session_id.startswith("chat-")
        and generated.chat_store_key == generated.session_id
    )


def test_put_then_get_all_round_trips_tool_calls(weave: Any) -> None:
    m = memory_for(weave)
    for msg in CONVERSATION:
        m.put(msg)
    got = m.get_all()
    assert plain(got) == plain(CONVERSATION)
    assert got[1].blocks[0].tool_call_id == "c1" and got[2].additional_kwargs == {
        "tool_call_id": "c1"
    }
    events = weave.store.timeline("s1")
    ids = {e.id: e for e in events}
    (res,) = by_type(events, EventType.TOOL_RESULT)
    inv = ids[res.parents[0]]
    assert inv.type == EventType.TOOL_INVOCATION and inv.payload["tool_call_id"] == "c1"
    assert ids[inv.parents[0]].type == EventType.ASSISTANT_MESSAGE
    final = by_type(events, EventType.ASSISTANT_MESSAGE)[-1]
    assert final.parents == (res.id,)
    with pytest.raises(TypeError, match="ChatMessage"):
        m.put({"role": "user", "content": "hi"})  # type: ignore[arg-type]


def test_same_words_twice_are_two_events(weave: Any) -> None:
    m = memory_for(weave)
    m.put_messages([ChatMessage(role="user", content="ok"), ChatMessage(role="user", content="ok")])
    assert [x.content for x in m.get_all()] == ["ok", "ok"]


async def test_async_twins(weave: Any) -> None:
    m = memory_for(weave)
    await m.aput(CONVERSATION[0])
    await m.aput_messages(CONVERSATION[1:])
    assert plain(await m.aget_all()) == plain(CONVERSATION)
    assert plain(await m.aget()) == plain(m.get())
    await m.aset(CONVERSATION[:1])
    assert plain(await m.aget_all()) == plain(CONVERSATION[:1])
    await m.areset()
    assert await m.aget_all() == []


def test_set_replaces_and_reset_clears_recoverably(weave: Any) -> None:
    m = memory_for(weave)
    m.put_messages(CONVERSATION)
    m.set([ChatMessage(role="user", content="Start over: 50 GBP.")])
    assert plain(m.get_all()) == [{"role": "user", "content": "Start over: 50 GBP."}]
    m.reset()
    assert m.get_all() == [] and m.get() == []
    kept = weave.store.timeline("s1", include_inactive=True)
    assert len(kept) >= len(CONVERSATION) + 1
    assert {e.status for e in kept} == {Status.DELETED}
    m.put(ChatMessage(role="user", content="new start"))
    assert plain(m.get_all()) == [{"role": "user", "content": "new start"}]


def test_get_is_the_assembled_context_within_the_limit(weave: Any) -> None:
    m = memory_for(weave, token_limit=120)
    for i in range(30):
        m.put(ChatMessage(role="user", content=f"Message {i}: the batch size is {1000 + i} rows."))
        m.put(ChatMessage(role="assistant", content=f"Noted, batch {i}."))
    got = m.get("what is the batch size?")
    assert got and all(isinstance(x, ChatMessage) for x in got)
    assert TokenCounter().count_messages(plain(got)) <= 120
    assert len(got) < 60  # older turns did not fit
    assert got[-1].content == "Noted, batch 29."  # the latest turn is kept verbatim
    assert m.last_context is not None and m.last_context.messages


async def test_function_agent_with_memory_sees_each_message_once(weave: Any) -> None:
    """Inside an instrumented run the memory hides the run's not-yet-put tool traffic, so
    the model never sees a tool call twice; and memory + instrumentation store it once."""
    instrument(weave, session_id="s1", user_id="u1")
    m = memory_for(weave, user_id="u1", token_limit=4000)
    script = ScriptedModel(TASKS)
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(script))
    for text in TURNS:
        await agent.run(text, memory=m)
    for prompt in script.seen:
        call_ids = [
            b.tool_call_id for x in prompt for b in x.blocks if isinstance(b, ToolCallBlock)
        ]
        result_ids = [
            x.additional_kwargs["tool_call_id"] for x in prompt if x.role == MessageRole.TOOL
        ]
        assert len(call_ids) == len(set(call_ids)) and sorted(call_ids) == sorted(result_ids)
        users = [x.content for x in prompt if x.role == MessageRole.USER]
        assert len(users) == len(set(users))
    # the second turn's model saw the first turn (history came back from the store)
    second = next(p for p in script.seen if any("Compare 50" in (x.content or "") for x in p))
    assert any("129.60" in (x.content or "") for x in second)
    assert weave.flush()
    events = weave.store.timeline("s1")
    assert len(by_type(events, EventType.USER_MESSAGE)) == 3
    assert len(by_type(events, EventType.ASSISTANT_MESSAGE)) == script.calls
    assert len(by_type(events, EventType.TOOL_RESULT)) == 6
    assert plain(m.get_all())[0] == {"role": "user", "content": TURNS[0]}


def test_chat_engine_with_memory_and_instrumentation(weave: Any) -> None:
    """SimpleChatEngine puts the user message, gets the context, calls the LLM, puts the
    answer: with instrumentation on, each message is one event and the chain is intact."""
    instrument(weave, session_id="chat", user_id="u1")
    memory = memory_for(weave, session_id="chat", user_id="u1", token_limit=500)
    engine = SimpleChatEngine.from_defaults(
        llm=MockLLM(max_tokens=4),  # FAKE LLM: answers "text text text text"
        memory=memory,
        system_prompt="Be brief.",
    )
    engine.chat("Hello, my order id is ORD-5.")
    engine.chat("What was my order id?")
    assert plain(memory.get_all()) == [
        {"role": "user", "content": "Hello, my order id is ORD-5."},
        {"role": "assistant", "content": "text text text text"},
        {"role": "user", "content": "What was my order id?"},
        {"role": "assistant", "content": "text text text text"},
    ]
    events = weave.store.timeline("chat")
    ids = {e.id: e for e in events}
    calls = by_type(events, EventType.MODEL_CALL)
    answers = by_type(events, EventType.ASSISTANT_MESSAGE)
    assert len(calls) == len(answers) == 2  # the MockLLM's nested complete() is not a 2nd call
    for call, answer in zip(calls, answers, strict=True):
        assert answer.parents == (call.id,)
        assert [ids[p].type for p in call.parents] == [EventType.USER_MESSAGE]
    assert [ids[c.parents[0]].content for c in calls] == [
        "Hello, my order id is ORD-5.", "What was my order id?"
    ]  # fmt: skip
    # the second call was sent the first turn too (the memory's context)
    assert calls[1].payload["messages"] == 4  # prefix system + user, answer, user


async def test_memory_block_in_llamaindex_memory(weave: Any) -> None:
    weave.emit("user_message", "Decision: the quarterly report is exported as Parquet, "
               "partitioned by month.", session_id="old", meta={"user_id": "u1"}, role="user")  # fmt: skip
    weave.emit("user_message", "I prefer tea over coffee.", session_id="other-user",
               meta={"user_id": "u2"}, role="user")  # fmt: skip
    assert weave.flush()
    block = BeeWeaveMemoryBlock(weave=weave, user_id="u1", k=3)
    engine = create_async_engine("sqlite+aiosqlite:///:memory:")  # Memory never closes its own
    memory = Memory.from_defaults(session_id="li-chat", token_limit=2000, memory_blocks=[block],
                                  async_engine=engine)  # fmt: skip
    question = ChatMessage(role="user", content="How do we export the quarterly report?")
    try:
        await memory.aput(question)
        messages = await memory.aget()
    finally:
        await engine.dispose()
    system = messages[0]
    assert system.role == MessageRole.SYSTEM
    assert (
        "<beeweave_memory>" in system.content and "Parquet, partitioned by month" in system.content
    )
    assert "session old" in system.content and "tea" not in system.content
    truncated = await block.atruncate("line one\nline two\nline three", 3)
    assert truncated is not None and truncated.count("\n") < 2
