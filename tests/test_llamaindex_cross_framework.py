"""One memory across frameworks: what a LangGraph agent decided for a user is recalled by a
LlamaIndex agent for the same user in another session — and the reverse.

Both sides use their real BeeWeave components (LangChain: ``BeeWeaveCallbackHandler`` +
``beeweave_context_hook``; LlamaIndex: ``instrument`` + ``BeeWeaveChatMemory``) on one
real SQLite store.  The LLMs are the only fakes: ``FakeToolCallingChatModel`` (LangChain)
and the scripted ``MockFunctionCallingLLM`` (LlamaIndex).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from beeweave_core.events import EventType
from beeweave_langchain import BeeWeaveCallbackHandler, beeweave_context_hook
from beeweave_langchain.testing import FakeToolCallingChatModel, calls, tool_call
from beeweave_llamaindex import BeeWeaveChatMemory, instrument

PARQUET = ("Decision: we export the quarterly report as Parquet files partitioned by month, "
           "and we keep 36 months of history.")  # fmt: skip
INVOICES = "Decision: invoices are always sent on the 5th business day with net 30 payment terms."


@tool
def save_note(text: str) -> str:
    """Save a note for the team."""
    return f"saved note ({len(text)} chars)"


def save_note_li(text: str) -> str:
    """Save a note for the team."""
    return f"saved note ({len(text)} chars)"


def langgraph_agent(
    weave: Any, session_id: str, user_id: str, replies: list[Any]
) -> tuple[Any, dict[str, Any], Any, Any]:
    model = FakeToolCallingChatModel(messages=iter(replies))  # FAKE LLM (scripted replies)
    hook = beeweave_context_hook(weave, session_id=session_id, user_id=user_id, budget_tokens=3000)
    graph = create_react_agent(model, [save_note], pre_model_hook=hook)
    handler = BeeWeaveCallbackHandler(weave, session_id=session_id, user_id=user_id,
                                      agent_id="langgraph-agent")  # fmt: skip
    config = {"callbacks": [handler], "configurable": {"thread_id": session_id}}
    return graph, config, model, hook.hook  # type: ignore[attr-defined]


def recall_answer(seen: list[list[ChatMessage]]) -> Any:
    """FAKE LLM for LlamaIndex: answer from whatever its context says about the topic."""

    def respond(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen.append(list(messages))
        context = "\n".join(m.content or "" for m in messages)
        if "Parquet" in context:
            return ChatMessage(
                role="assistant", content="We agreed on Parquet, partitioned by month."
            )
        return ChatMessage(role="assistant", content="I have no record of that.")

    return respond


async def test_langgraph_decision_recalled_by_llamaindex(weave_factory: Any) -> None:
    weave = weave_factory("sqlite")
    # session A — LangGraph agent, user U
    graph, config, _, _ = langgraph_agent(weave, "A", "U", [
        calls(tool_call("save_note", {"text": "quarterly report: Parquet, monthly partitions"})),
        AIMessage(content="Noted: Parquet, partitioned by month, 36 months kept."),
    ])  # fmt: skip
    await graph.ainvoke({"messages": [("user", PARQUET)]}, config=config)
    assert weave.flush()
    a_events = weave.store.timeline("A")
    assert any(e.type == EventType.USER_MESSAGE and e.content == PARQUET for e in a_events)
    assert {e.meta.get("user_id") for e in a_events if e.type == EventType.USER_MESSAGE} == {"U"}

    # session B — LlamaIndex agent, same user U, nothing in B about Parquet
    instrument(weave, session_id="B", user_id="U")
    memory = BeeWeaveChatMemory.from_defaults(weave=weave, session_id="B", user_id="U",
                                              token_limit=2000)  # fmt: skip
    seen: list[list[ChatMessage]] = []
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(save_note_li)],
                          llm=MockFunctionCallingLLM(response_generator=recall_answer(seen)))  # fmt: skip
    answer = await agent.run("Which file format did we pick for the quarterly report export?",
                             memory=memory)  # fmt: skip
    assert str(answer) == "We agreed on Parquet, partitioned by month."
    # it came through the memory's recalled layer, with provenance pointing at session A
    recalled = [m for m in seen[0] if m.role.value == "system" and "Parquet" in (m.content or "")]
    assert recalled, [m.content for m in seen[0]]
    pieces = memory.last_context.layers["recalled"].pieces
    assert any(p.session_id == "A" and "Parquet" in p.text for p in pieces)
    assert not any("Parquet" in e.content for e in weave.store.timeline("B")
                   if e.type == EventType.USER_MESSAGE)  # fmt: skip


async def test_llamaindex_decision_recalled_by_langgraph(weave_factory: Any) -> None:
    weave = weave_factory("sqlite")
    # session C — LlamaIndex agent, user W, records the decision (and calls a tool)
    instrument(weave, session_id="C", user_id="W")
    memory = BeeWeaveChatMemory.from_defaults(weave=weave, session_id="C", user_id="W")

    def note_then_confirm(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        """FAKE LLM: save a note, then confirm."""
        if messages[-1].role.value == "tool":
            return ChatMessage(role="assistant", content="Noted: 5th business day, net 30.")
        return ChatMessage(role="assistant", blocks=[ToolCallBlock(
            tool_call_id="li-1", tool_name="save_note_li",
            tool_kwargs={"text": "invoices: 5th business day, net 30"})])  # fmt: skip

    agent = FunctionAgent(tools=[FunctionTool.from_defaults(save_note_li)],
                          llm=MockFunctionCallingLLM(response_generator=note_then_confirm))  # fmt: skip
    assert str(await agent.run(INVOICES, memory=memory)) == "Noted: 5th business day, net 30."
    assert weave.flush()
    assert {e.meta.get("user_id") for e in weave.store.timeline("C")} == {"W"}

    # session D — LangGraph agent, same user W: the model's prompt holds the decision
    graph, config, model, hook = langgraph_agent(weave, "D", "W", [
        AIMessage(content="Invoices go out on the 5th business day, net 30."),
    ])  # fmt: skip
    await graph.ainvoke({"messages": [("user", "When do we send invoices again?")]},
                        config=config)  # fmt: skip
    prompt = "\n".join(str(m.content) for m in model.received[0])
    assert "5th business day" in prompt and "net 30" in prompt
    pieces = hook.last.layers["recalled"].pieces  # the assembly says where it came from
    assert any(p.session_id == "C" and "5th business day" in p.text for p in pieces)
    d_users = [e.content for e in weave.store.timeline("D") if e.type == EventType.USER_MESSAGE]
    assert d_users == ["When do we send invoices again?"]
