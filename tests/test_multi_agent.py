"""The supervisor case: one weave, one conversation, two sub-agents.  Each sub-agent's
prompt (assembled by BeeWeave's pre-model hook with its ``agent_id``) holds the user's
request, its own task, its own tool calls and results, and the memories shared on
purpose -- never the other sub-agent's tool results or turns.

The routing is a scripted supervisor graph (LangGraph ``StateGraph``); the sub-agents are
``create_react_agent`` graphs whose LLMs are FAKE (``FakeToolCallingChatModel``, scripted).
Store: real SQLite; index: real Chroma with the offline MiniLM embeddings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent

from beeweave_core import Weave
from beeweave_core.events import EventType
from beeweave_langchain import beeweave_context_hook, memory_tools
from beeweave_langchain.testing import FakeToolCallingChatModel, calls, tool_call

SESSION, USER = "trip-ana", "ana"
REQUEST = "Plan my Lisbon trip on 3 May: a morning flight and a hotel near the airport."
LANDING = "Ana's flight TP1351 lands in Lisbon at 14:05 on 3 May."
TASKS = {
    ("flights", 1): "Book a morning flight to Lisbon for 3 May.",
    ("hotels", 1): "Book a hotel near Lisbon airport for 3 May, check-in after the flight lands.",
    ("flights", 2): "Confirm the return flight from Lisbon on 6 May.",
}
FLIGHT_SECRET, HOTEL_SECRET = "ZEBRA-41", "MANGO-88"


@tool
def search_flights(city: str, date: str) -> str:
    """Find flights to a city on a date."""
    return f"TP1351 to {city} on {date}: dep 09:10, arr 14:05, fare class QX7, seat token {FLIGHT_SECRET}"


@tool
def search_hotels(city: str) -> str:
    """Find hotels in a city."""
    return f"Casa Azul in {city}: room 5B held under code {HOTEL_SECRET}, late check-in ok"


def _agent(weave: Weave, name: str, script: list[AIMessage], extra: list[Any]) -> tuple[Any, Any]:
    model = FakeToolCallingChatModel(messages=iter(script))  # FAKE LLM (scripted)
    hook = beeweave_context_hook(weave, session_id=SESSION, user_id=USER, agent_id=name,
                                 budget_tokens=1500)  # fmt: skip
    tools = [*extra, *memory_tools(weave, user_id=USER, agent_id=name, session_id=SESSION)]
    return create_react_agent(model, tools, pre_model_hook=hook, name=name), model


def _supervisor(weave: Weave, agents: dict[str, Any]) -> Any:
    """Scripted routing: flights, hotels, flights again; each gets a task of its own."""
    order = ["flights", "hotels", "flights"]

    def supervisor(state: MessagesState) -> dict[str, Any]:
        if len(state["messages"]) == 1:  # the user's request, shared by every agent
            weave.emit("user_message", REQUEST, session_id=SESSION, role="user",
                       meta={"user_id": USER})  # fmt: skip
        return {}

    def route(state: MessagesState) -> str:
        done = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        return order[done] if done < len(order) else END

    def node(name: str) -> Any:
        def run(state: MessagesState) -> dict[str, Any]:
            turn = sum(1 for m in state["messages"] if getattr(m, "name", None) == name) + 1
            out = agents[name].invoke({"messages": [("user", TASKS[(name, turn)])]})
            return {"messages": [AIMessage(content=out["messages"][-1].content, name=name)]}

        return run

    g = StateGraph(MessagesState)
    g.add_node("supervisor", supervisor)
    for name in ("flights", "hotels"):
        g.add_node(name, node(name))
        g.add_edge(name, "supervisor")
    g.add_edge(START, "supervisor")
    g.add_conditional_edges("supervisor", route, ["flights", "hotels", END])
    return g.compile()


def _text(prompt: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in prompt)


@pytest.fixture
def weave(tmp_path: Path) -> Any:
    w = Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path / "sp",
                   vector_url=str(tmp_path / "chroma"))  # fmt: skip
    yield w
    w.close()


def test_each_sub_agent_sees_its_own_turns_and_the_shared_memory(weave: Weave) -> None:
    flights, flights_llm = _agent(weave, "flights", [
        calls(tool_call("search_flights", {"city": "Lisbon", "date": "3 May"})),
        calls(tool_call("remember", {"text": LANDING, "shared": True})),
        AIMessage(content="Booked TP1351, landing 14:05."),
        AIMessage(content="Return flight on 6 May confirmed."),
    ], [search_flights])  # fmt: skip
    hotels, hotels_llm = _agent(weave, "hotels", [
        calls(tool_call("search_hotels", {"city": "Lisbon"})),
        AIMessage(content="Booked Casa Azul, check-in from 15:00."),
    ], [search_hotels])  # fmt: skip
    graph = _supervisor(weave, {"flights": flights, "hotels": hotels})
    graph.invoke({"messages": [("user", REQUEST)]})

    hotel_prompts = [_text(p) for p in hotels_llm.received]
    flight_prompts = [_text(p) for p in flights_llm.received]
    assert len(hotel_prompts) == 2 and len(flight_prompts) == 4
    for p in hotel_prompts:  # hotels: the request, its task, the shared memory ...
        assert REQUEST in p and TASKS[("hotels", 1)] in p and LANDING in p
        # ... and nothing of the flights agent's own work
        assert FLIGHT_SECRET not in p and "QX7" not in p and TASKS[("flights", 1)] not in p
    assert HOTEL_SECRET in hotel_prompts[1]  # its own tool result, after its call
    for p in flight_prompts:
        assert HOTEL_SECRET not in p and TASKS[("hotels", 1)] not in p
    # flights, back for a second task, still has its own earlier tool result
    assert FLIGHT_SECRET in flight_prompts[3] and TASKS[("flights", 2)] in flight_prompts[3]
    # no tool result of the other agent reaches a prompt as any message, user or not
    for llm, foreign in ((hotels_llm, FLIGHT_SECRET), (flights_llm, HOTEL_SECRET)):
        assert not any(foreign in str(m.content) for p in llm.received for m in p)


def test_agent_view_in_the_core(weave: Weave) -> None:
    """``assemble(agent_id=...)`` without any framework: another agent's system prompt,
    turns, tool result -- and the memory the writer derived from that result -- stay out."""
    sid = "shared-session"

    def emit(type_: str, text: str, agent: str | None, **kw: Any) -> str:
        meta = {"user_id": USER, **({"agent_id": agent} if agent else {})}
        return weave.emit(type_, text, session_id=sid, meta=meta, **kw)

    emit("system_prompt", "You are the flights agent.", "flights", role="system")
    emit("system_prompt", "You are the hotels agent.", "hotels", role="system")
    emit("user_message", REQUEST, None, role="user")
    ask = emit("assistant_message", "", "flights", role="assistant", payload={
        "tool_calls": [{"id": "c1", "name": "search_flights", "args": {"city": "Lisbon"}}]})  # fmt: skip
    inv = emit("tool_invocation", '{"city": "Lisbon"}', "flights", parents=[ask],
               payload={"name": "search_flights", "tool_call_id": "c1", "args": {"city": "Lisbon"}})  # fmt: skip
    emit("tool_result", f"TP1351 arrives 14:05, seat token {FLIGHT_SECRET}", "flights",
         role="tool", parents=[inv], payload={"name": "search_flights", "tool_call_id": "c1"})  # fmt: skip
    emit("assistant_message", "Hotel search next: Casa Azul has rooms.", "hotels", role="assistant")
    assert weave.flush()
    weave.context.update(sid)  # the writer derives memories, the tool result's included
    derived = [m for m in weave.store.timeline(sid, types=[EventType.MEMORY])
               if FLIGHT_SECRET in m.content]  # fmt: skip
    assert derived and all(m.agent_id == "flights" for m in derived)

    hotels = weave.assemble(sid, budget_tokens=2000, agent_id="hotels", record=False).text()
    flights = weave.assemble(sid, budget_tokens=2000, agent_id="flights", record=False).text()
    everyone = weave.assemble(sid, budget_tokens=2000, record=False).text()
    assert REQUEST in hotels and "Casa Azul" in hotels and "hotels agent" in hotels
    assert FLIGHT_SECRET not in hotels and "flights agent" not in hotels
    assert FLIGHT_SECRET in flights and "Casa Azul" not in flights and "hotels agent" not in flights
    assert FLIGHT_SECRET in everyone and "Casa Azul" in everyone  # no agent_id: the whole session
