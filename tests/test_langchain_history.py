"""BeeWeaveChatMessageHistory: round trips, RunnableWithMessageHistory, dedup with the
handler, clear, async — on SQLite and Neo4j.  The chat model is FAKE (labelled)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from beeweave_core.events import EventType
from beeweave_langchain.callbacks import BeeWeaveCallbackHandler
from beeweave_langchain.history import BeeWeaveChatMessageHistory
from beeweave_langchain.testing import FakeToolCallingChatModel, calls, tool_call


def test_round_trip_keeps_every_message_field(weave_factory, backend):
    weave = weave_factory(backend)
    h = BeeWeaveChatMessageHistory(weave, "s-rt", user_id="u-1")
    call = tool_call("lookup_order", {"order_id": "ORD-10001"}, "c-1")
    msgs = [
        SystemMessage("You are terse."),
        HumanMessage("refund ORD-10001", name="ana"),
        calls(call, content="looking it up"),
        ToolMessage('{"amount_eur": 12.5}', tool_call_id="c-1", artifact={"rows": 1}),
        AIMessage(
            "Refunded 12.5 EUR.",
            usage_metadata={"input_tokens": 9, "output_tokens": 4, "total_tokens": 13},
        ),
        HumanMessage([{"type": "text", "text": "thanks"}]),
    ]
    h.add_messages(msgs)
    got = BeeWeaveChatMessageHistory(weave, "s-rt").messages
    assert [type(m) for m in got] == [type(m) for m in msgs]
    assert [m.content for m in got] == [m.content for m in msgs]
    assert got[1].name == "ana"
    assert got[2].tool_calls == [call]
    assert (got[3].tool_call_id, got[3].artifact) == ("c-1", {"rows": 1})
    assert got[4].usage_metadata["total_tokens"] == 13
    tl = weave.store.timeline("s-rt")
    (inv,) = [e for e in tl if e.type == EventType.TOOL_INVOCATION]
    (res,) = [e for e in tl if e.type == EventType.TOOL_RESULT]
    assert res.parents == (inv.id,)  # the history keeps the causal wiring too
    assert all(e.meta.get("user_id") == "u-1" for e in tl)


def test_same_text_twice_is_kept_twice(weave_factory):
    weave = weave_factory()
    h = BeeWeaveChatMessageHistory(weave, "s-twice")
    h.add_user_message("ok")
    h.add_ai_message("sure")
    h.add_user_message("ok")
    h.add_ai_message("sure")
    assert [m.content for m in h.messages] == ["ok", "sure", "ok", "sure"]


@pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")
def test_runnable_with_message_history_and_handler_store_each_message_once(weave_factory, backend):
    weave = weave_factory(backend)
    model = FakeToolCallingChatModel(
        messages=iter(["Hi Ana!", "You said your name is Ana."])
    )  # FAKE LLM
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: BeeWeaveChatMessageHistory(weave, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    handler = BeeWeaveCallbackHandler(weave)
    cfg = {"configurable": {"session_id": "s-rwmh"}, "callbacks": [handler],
           "metadata": {"beeweave_session_id": "s-rwmh"}}  # fmt: skip
    assert chain.invoke({"question": "I am Ana"}, config=cfg).content == "Hi Ana!"
    second = chain.invoke({"question": "What is my name?"}, config=cfg)
    assert second.content == "You said your name is Ana."
    # the model's second prompt carried the first turn, read back from the store
    assert [m.content for m in model.received[1]] == [
        "Be brief.", "I am Ana", "Hi Ana!", "What is my name?",
    ]  # fmt: skip
    weave.flush()
    tl = weave.store.timeline("s-rwmh")
    said = [(e.type, e.content) for e in tl if e.type != EventType.MODEL_CALL]
    assert said == [
        (EventType.SYSTEM_PROMPT, "Be brief."),
        (EventType.USER_MESSAGE, "I am Ana"),
        (EventType.ASSISTANT_MESSAGE, "Hi Ana!"),
        (EventType.USER_MESSAGE, "What is my name?"),
        (EventType.ASSISTANT_MESSAGE, "You said your name is Ana."),
    ]
    # the template's system prompt is in the graph, but not in the history (the template
    # adds it on every call; the history would otherwise send it twice)
    assert [m.content for m in BeeWeaveChatMessageHistory(weave, "s-rwmh").messages] == [
        "I am Ana", "Hi Ana!", "What is my name?", "You said your name is Ana.",
    ]  # fmt: skip


def test_clear_hides_the_session_and_new_messages_still_count(weave_factory):
    weave = weave_factory()
    h = BeeWeaveChatMessageHistory(weave, "s-clear")
    h.add_messages([HumanMessage("hi"), AIMessage("hello")])
    h.clear()
    assert h.messages == []
    assert len(weave.store.timeline("s-clear", include_inactive=True)) == 2  # kept on disk
    h.add_messages([HumanMessage("hi")])  # the same words again are a new message
    assert [m.content for m in h.messages] == ["hi"]


def test_bad_input_is_refused_clearly(weave_factory):
    weave = weave_factory()
    with pytest.raises(ValueError, match="session_id"):
        BeeWeaveChatMessageHistory(weave, "")
    h = BeeWeaveChatMessageHistory(weave, "s-bad")
    with pytest.raises(TypeError, match="LangChain messages"):
        h.add_messages(["not a message"])  # type: ignore[list-item]
    assert h.messages == []


async def test_async_methods(weave_factory):
    weave = weave_factory()
    h = BeeWeaveChatMessageHistory(weave, "s-async")
    await h.aadd_messages([HumanMessage("a"), AIMessage("b")])
    assert [m.content for m in await h.aget_messages()] == ["a", "b"]
    await h.aclear()
    assert await h.aget_messages() == []


def test_a_budgeted_history_keeps_the_prompt_within_its_budget(weave_factory, backend):
    from beeweave_core.tokens import TokenCounter
    from beeweave_langchain.messages import messages_to_dicts

    weave = weave_factory(backend, index=False)
    answers = [f"Crate {i} holds {i * 7} jars of plum jam, shelf B{i}." for i in range(16)]
    model = FakeToolCallingChatModel(messages=iter(answers))  # FAKE LLM
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{q}")])
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda sid: BeeWeaveChatMessageHistory(weave, sid, budget_tokens=300),
        input_messages_key="q", history_messages_key="history",
    )  # fmt: skip
    cfg = {"configurable": {"session_id": "s-budget"}}
    for i in range(16):
        chain.invoke({"q": f"What is in crate {i}? Please list the jars and the shelf."}, cfg)
    counter = TokenCounter()
    budgeted = BeeWeaveChatMessageHistory(weave, "s-budget", budget_tokens=300).messages
    whole = BeeWeaveChatMessageHistory(weave, "s-budget").messages
    assert counter.count_messages(messages_to_dicts(budgeted)) <= 300
    assert counter.count_messages(messages_to_dicts(whole)) > 600 and len(whole) == 32
    assert budgeted[-1].content == answers[-1]  # the newest turn is kept verbatim
    assert len(model.received[-1]) < len(whole)  # the model's prompt stopped growing
    with pytest.raises(ValueError, match="budget_tokens"):
        BeeWeaveChatMessageHistory(weave, "s-budget", budget_tokens=0)
