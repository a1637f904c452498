"""Memory the agent uses on purpose: the core operations and their LangChain / LlamaIndex
tools, driven by real agents (LangGraph ``create_react_agent``, LlamaIndex
``FunctionAgent``) on a real SQLite store with the real Chroma index and offline MiniLM
embeddings.  The LLMs are the only fakes (labelled FAKE): scripted tool-calling models.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import create_react_agent
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM

from beeweave_core import Weave
from beeweave_core.events import EdgeType, EventType, Status
from beeweave_core.memory_ops import MemoryOps, namespace
from beeweave_langchain import BeeWeaveCallbackHandler
from beeweave_langchain import memory_tools as lc_memory_tools
from beeweave_langchain.testing import FakeToolCallingChatModel, calls, tool_call
from beeweave_llamaindex import instrument
from beeweave_llamaindex import memory_tools as li_memory_tools

SEATING = "Priya always wants a window seat on trains and planes, never the aisle."
SEATING_Q = "where does she like to sit when she travels?"
DISTRACTOR = "The quarterly budget review happens in the Lisbon office."
IDS = re.compile(r"\[([0-9a-f-]{36})\]")


@pytest.fixture
def weave(tmp_path: Path) -> Any:
    w = Weave.open(f"sqlite:///{tmp_path / 'w.db'}", tenant="acme", spool_dir=tmp_path / "sp",
                   vector_url=str(tmp_path / "chroma"))  # fmt: skip
    yield w
    w.close()


def _langgraph_run(weave: Any, session: str, user_text: str, replies: list[AIMessage]) -> list[Any]:
    model = FakeToolCallingChatModel(messages=iter(replies))  # FAKE LLM (scripted replies)
    tools = lc_memory_tools(weave, user_id="priya", agent_id="lg-agent")
    graph = create_react_agent(model, tools)
    handler = BeeWeaveCallbackHandler(weave, user_id="priya", agent_id="lg-agent")
    config = {"callbacks": [handler], "configurable": {"thread_id": session}}
    out = graph.invoke({"messages": [("user", user_text)]}, config=config)
    assert weave.flush()
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def _li_agent(weave: Any, session: str, script: list[tuple[str, dict[str, Any]]]) -> Any:
    """A LlamaIndex FunctionAgent whose FAKE LLM makes the scripted tool calls in order,
    then answers with the last tool result."""
    instrument(weave, session_id=session, user_id="priya", agent_id="li-agent")
    tools = li_memory_tools(weave, user_id="priya", agent_id="li-agent", session_id=session)

    def respond(messages: list[ChatMessage], **kw: Any) -> ChatMessage:
        done = sum(1 for m in messages if m.role.value == "tool")
        if done < len(script):
            name, args = script[done]
            return ChatMessage(role="assistant", blocks=[ToolCallBlock(
                tool_call_id=f"li-{done}", tool_name=name, tool_kwargs=args)])  # fmt: skip
        return ChatMessage(role="assistant", content=messages[-1].content or "")

    llm = MockFunctionCallingLLM(response_generator=respond)  # FAKE LLM (scripted)
    return FunctionAgent(tools=tools, llm=llm)


def _stored(weave: Any, text: str) -> Any:
    mems = weave.store.timeline(namespace("priya", "default"), types=(EventType.MEMORY,))
    found = [m for m in mems if m.content == text]
    assert len(found) == 1, [m.content for m in mems]
    return found[0]


def test_langgraph_stores_in_one_session_and_recalls_in_another(weave: Any) -> None:
    remembered = _langgraph_run(weave, "monday", f"Note for later: {SEATING}", [
        calls(tool_call("remember", {"text": SEATING, "kind": "preference", "tags": ["travel"]})),
        calls(tool_call("remember", {"text": DISTRACTOR})),
        AIMessage(content="Noted."),
    ])  # fmt: skip
    assert remembered[0].content.startswith("remembered ")
    mem = _stored(weave, SEATING)
    # provenance: the memory points at the user turn of the session it was said in
    user_turn = [e for e in weave.store.timeline("monday") if e.type == EventType.USER_MESSAGE][0]
    assert mem.payload["source_ids"] == [user_turn.id]
    derived = weave.store.edges(event_id=mem.id, types=[EdgeType.DERIVED_FROM])
    assert [e.dst for e in derived] == [user_turn.id]
    assert mem.agent_id == "lg-agent" and mem.user_id == "priya" and "travel" in mem.tags

    recalled = _langgraph_run(weave, "friday", "Book my train to Porto.", [
        calls(tool_call("recall", {"query": SEATING_Q, "k": 1})),
        AIMessage(content="Booking a window seat."),
    ])  # fmt: skip
    text = recalled[0].content
    assert IDS.findall(text) == [mem.id], text  # by meaning: no word of the query is in it
    assert "window seat" in text and "Lisbon" not in text
    assert not any(e.type == EventType.MEMORY and e.content == SEATING
                   for e in weave.store.timeline("friday"))  # fmt: skip


async def test_llamaindex_function_agent_stores_and_recalls(weave: Any) -> None:
    agent = _li_agent(weave, "li-1", [("remember", {"text": SEATING, "kind": "preference"}),
                                      ("remember", {"text": DISTRACTOR})])  # fmt: skip
    assert str(await agent.run(f"Please keep in mind: {SEATING}")).startswith("remembered ")
    mem = _stored(weave, SEATING)
    assert weave.flush()
    li_user = [e for e in weave.store.timeline("li-1") if e.type == EventType.USER_MESSAGE]
    assert mem.payload["source_ids"] == [li_user[-1].id]

    agent = _li_agent(weave, "li-2", [("recall", {"query": SEATING_Q, "k": 1})])
    answer = str(await agent.run("Book me a flight to Oslo."))
    assert IDS.findall(answer) == [mem.id], answer


async def test_cross_framework_both_ways(weave: Any) -> None:
    # stored by LangGraph, recalled by LlamaIndex
    _langgraph_run(weave, "lg", "remember my seating", [
        calls(tool_call("remember", {"text": SEATING, "kind": "preference"})),
        AIMessage(content="ok"),
    ])  # fmt: skip
    seat = _stored(weave, SEATING)
    agent = _li_agent(weave, "li", [("recall", {"query": SEATING_Q, "k": 1})])
    assert IDS.findall(str(await agent.run("Book a train."))) == [seat.id]
    # stored (and corrected) by LlamaIndex, recalled by LangGraph
    agent = _li_agent(weave, "li", [("remember", {"text": DISTRACTOR, "kind": "fact"})])
    await agent.run("note the review location")
    budget = _stored(weave, DISTRACTOR)
    moved = "The quarterly budget review happens in the Porto office."
    agent = _li_agent(weave, "li", [("update_memory", {"memory_id": budget.id, "text": moved,
                                                       "reason": "office moved"})])  # fmt: skip
    assert f"updated {budget.id} -> " in str(await agent.run("the review moved to Porto"))
    out = _langgraph_run(weave, "lg2", "where is the review?", [
        calls(tool_call("recall", {"query": "which office hosts the budget review", "k": 1})),
        AIMessage(content="Porto."),
    ])  # fmt: skip
    assert "Porto office" in out[0].content and "Lisbon" not in out[0].content
    new = _stored(weave, moved)
    assert new.payload["version"] == 2 and new.payload["previous"] == budget.id
    (old,) = weave.store.get([budget.id], include_inactive=True)
    assert old.status == Status.INVALIDATED and "office moved" in (old.status_reason or "")
    sup = weave.store.edges(event_id=new.id, types=[EdgeType.SUPERSEDES])
    assert [e.dst for e in sup] == [budget.id]


def test_ops_supersede_forget_list_and_budget(weave: Any) -> None:
    ops = MemoryOps(weave, user_id="priya", agent_id="a", budget_tokens=60)
    first = ops.remember("The staging database runs on port 5433.", kind="decision")
    again = ops.remember("the staging database runs on port 5433")
    assert again.ids == first.ids and again.text.startswith("already remembered")
    changed = ops.remember("The staging database runs on port 6543 now.", kind="decision")
    assert f"supersedes {first.ids[0]}" in changed.text  # same setting, new value
    (old,) = weave.store.get(first.ids[:1], include_inactive=True)
    assert old.status == Status.INVALIDATED
    assert "5433" not in ops.recall("staging database port").text
    # a rejected id, a stale id, a missing reason: one clear line each, nothing changes
    assert ops.call("forget", {"memory_id": first.ids[0], "reason": "x"}).startswith(
        f"error: memory {first.ids[0]} is no longer current"
    )
    assert f"current version: {changed.ids[0]}" in ops.call(
        "update_memory", {"memory_id": first.ids[0], "text": "port 1"})  # fmt: skip
    assert ops.call("forget", {"memory_id": changed.ids[0]}).startswith("error: forget: reason")
    assert ops.call("remember", {"text": "   "}) == "error: a memory needs non-empty text"
    assert ops.call("remember", {"text": "x", "kind": "rumour"}).startswith("error: remember: kind")
    assert ops.call("recall", {"query": "x", "k": 0}).startswith("error: recall: k")
    assert ops.call("teleport", {}) == "error: unknown memory operation 'teleport'"
    assert ops.call("remember", {"text": "x", "scope": "../etc"}).startswith("error: bad scope")
    other = MemoryOps(weave, user_id="mallory")
    assert other.call("forget", {"memory_id": changed.ids[0], "reason": "mine now"}).startswith(
        "error: no memory"
    )  # another user's memory is not theirs to touch
    vendors = ["Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel", "Ironwood",
               "Juniper", "Kauri", "Larch"]  # fmt: skip
    for i, name in enumerate(vendors):
        ops.remember(f"{name} Supplies ships from warehouse W{i * 7} on weekdays.")
    listed = ops.list(limit=100)
    assert ops.counter.count_text(listed.text) <= 60
    assert "more not shown: token budget" in listed.text
    assert listed.text.startswith("13 memories")
    assert IDS.findall(listed.text) == listed.ids and 0 < len(listed.ids) < 13
    assert ops.forget(changed.ids[0], "moved to managed Postgres").ids == changed.ids[:1]
    assert changed.ids[0] not in ops.list(limit=100, kind="decision").text


def test_scopes_and_the_shared_namespace(weave: Any) -> None:
    billing = MemoryOps(weave, user_id="priya", agent_id="billing", scope="billing")
    travel = MemoryOps(weave, user_id="priya", agent_id="travel", scope="travel")
    billing.remember("Invoices for Priya go to accounts@priya.example.")
    note = travel.remember("Priya is travelling to Oslo next week.", shared=True)
    assert "accounts@" not in travel.list().text  # another scope is not read
    assert note.ids[0] in billing.list().text  # the shared namespace is read by everyone
    assert "by travel" in billing.recall("Oslo trip").text


def test_file_tool_in_both_frameworks(weave: Any) -> None:
    lc = {t.name: t for t in lc_memory_tools(weave, user_id="priya", files=True)}
    li = {t.metadata.name: t for t in li_memory_tools(weave, user_id="priya", files=True)}
    assert set(lc) == set(li) == {"remember", "recall", "update_memory", "forget",
                                  "list_memories", "memory"}  # fmt: skip
    made = lc["memory"].invoke({"command": "create", "path": "/memories/trips.md",
                                "file_text": "Porto in June"})  # fmt: skip
    assert made == "File created successfully at: /memories/trips.md"
    seen = li["memory"].call(command="view", path="/memories/trips.md")
    assert str(seen).endswith("     1\tPorto in June")
    assert lc["memory"].invoke({"command": "delete", "path": "/tmp/x"}).startswith("Error:")
