"""End to end, offline: a LlamaIndex ``FunctionAgent`` with tools and ``BeeWeaveChatMemory``
runs a multi-turn task under ``instrument()``; the event DAG holds every tool call and
result with the right CAUSED_BY chain — on SQLite and on a real Neo4j server.

The only fake is the LLM: llama-index-core's ``MockFunctionCallingLLM`` driven by a
script (tests/llamaindex_fakes.py).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.agent.workflow import FunctionAgent

from beeweave_core.events import EventType
from beeweave_llamaindex import BeeWeaveChatMemory, instrument

from .llamaindex_fakes import (
    TASKS,
    TOOLS,
    TURNS,
    ScriptedModel,
    by_type,
    check_tool_chain,
    fake_llm,
)


async def test_function_agent_multi_turn_dag(backend: str, weave_factory: Any) -> None:
    weave = weave_factory(backend)
    handler = instrument(weave, session_id="task-1", user_id="u1")
    memory = BeeWeaveChatMemory.from_defaults(weave=weave, session_id="task-1", user_id="u1",
                                              token_limit=3000)  # fmt: skip
    script = ScriptedModel(TASKS)
    agent = FunctionAgent(tools=TOOLS, llm=fake_llm(script), system_prompt="You are a cashier.")
    answers = [str(await agent.run(text, memory=memory)) for text in TURNS]
    assert answers == [
        "100 EUR is 108.00 USD; with 20% tax that is 129.60 USD.",
        "50 EUR is 54.00 USD and 50 GBP is 63.50 USD.",
        "Found it: ORD-77: shipped on 2024-05-02, 3 items",
    ]
    assert weave.flush()
    assert handler.failures == 0

    counts = check_tool_chain(weave.store, "task-1")
    assert counts == {"users": 3, "results": 6, "invocations": 6}
    events = weave.store.timeline("task-1")
    # instrumentation and memory saw the same messages: each is stored once
    assert [e.content for e in by_type(events, EventType.USER_MESSAGE)] == TURNS
    assert len(by_type(events, EventType.ASSISTANT_MESSAGE)) == script.calls
    assert len(by_type(events, EventType.MODEL_CALL)) == script.calls
    # turn 3's failing lookup: an error result and an error event, both under the invocation
    ids = {e.id: e for e in events}
    (err,) = by_type(events, EventType.ERROR)
    failed = [e for e in by_type(events, EventType.TOOL_RESULT) if e.payload["is_error"]]
    assert len(failed) == 1 and failed[0].parents == err.parents
    assert ids[err.parents[0]].payload["args"] == {"order_id": "XYZ-1"}
    # parallel calls of turn 2 both hang off one answer and feed one next model call
    turn2 = [
        e
        for e in by_type(events, EventType.TOOL_INVOCATION)
        if e.payload["args"].get("amount") == 50
    ]
    assert len(turn2) == 2 and turn2[0].parents == turn2[1].parents
    nxt = [c for c in by_type(events, EventType.MODEL_CALL)
           if {ids[p].type for p in c.parents} == {EventType.TOOL_RESULT}
           and ids[c.parents[0]].parents[0] in {t.id for t in turn2}]  # fmt: skip
    assert len(nxt) == 1 and len(nxt[0].parents) == 2

    # the memory carried the history: turn 2's first model call saw turn 1's answer
    turn2_prompt = next(p for p in script.seen if (p[-1].content or "").startswith("Compare 50"))
    assert any("129.60 USD" in (m.content or "") for m in turn2_prompt)
    # and a fresh memory on the same session (a restarted process) returns it too
    again = BeeWeaveChatMemory.from_defaults(weave=weave, session_id="task-1", token_limit=3000)
    text = "\n".join(m.content or "" for m in again.get("what did the order lookup say?"))
    assert "ORD-77: shipped on 2024-05-02" in text
