"""Shared pieces of the LlamaIndex tests: a scripted FAKE LLM, real tools, DAG checks.

The LLM is the only fake (project rule): llama-index-core's own
``MockFunctionCallingLLM`` driven by a ``response_generator`` script.  Tools are
ordinary ``FunctionTool``s; stores, tokenizers and embeddings are real.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from beeweave_core.events import EdgeType, Event, EventType


@dataclass
class Task:
    """What the fake model does when a user message contains ``trigger``."""

    trigger: str
    steps: list[list[tuple[str, dict[str, Any]]]]  # tool calls per model step (parallel in one)
    answer: Callable[[list[str], list[ChatMessage]], str]


@dataclass
class ScriptedModel:
    """FAKE LLM script: tool calls per task, then an answer built from the tool results."""

    tasks: list[Task]
    seen: list[list[ChatMessage]] = field(default_factory=list)
    calls: int = 0

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.seen.append(list(messages))
        self.calls += 1
        last_user = max(i for i, m in enumerate(messages) if m.role.value == "user")
        text = messages[last_user].content or ""
        task = next((t for t in self.tasks if t.trigger in text), None)
        if task is None:
            return ChatMessage(role="assistant", content=f"(no script for {text!r})")
        after = messages[last_user + 1 :]
        names = {name for step in task.steps for name, _ in step}
        mine = [  # this task's tool calls so far (a handoff before them is not one)
            [b for b in m.blocks if isinstance(b, ToolCallBlock) and b.tool_name in names]
            for m in after
            if m.role.value == "assistant"
        ]
        mine = [calls for calls in mine if calls]
        done = len(mine)
        call_ids = {b.tool_call_id for calls in mine for b in calls}
        if done < len(task.steps):
            blocks = [
                ToolCallBlock(
                    tool_call_id=f"call-{uuid.uuid4().hex[:10]}", tool_name=name, tool_kwargs=args
                )  # fmt: skip
                for name, args in task.steps[done]
            ]
            return ChatMessage(role="assistant", blocks=blocks)
        results = [
            m.content or ""
            for m in after
            if m.role.value == "tool" and m.additional_kwargs.get("tool_call_id") in call_ids
        ]
        return ChatMessage(role="assistant", content=task.answer(results, list(messages)))


def fake_llm(script: ScriptedModel) -> MockFunctionCallingLLM:
    """llama-index-core's FAKE function-calling LLM, driven by ``script``."""
    return MockFunctionCallingLLM(response_generator=script)


# ---------------------------------------------------------------- real tools
def convert_currency(amount: float, currency: str) -> str:
    """Convert an amount of EUR or GBP to USD."""
    rate = {"EUR": 1.08, "GBP": 1.27}[currency]
    return f"{amount * rate:.2f} USD"


def add_tax(amount: float, rate: float) -> str:
    """Add a tax rate to an amount."""
    return f"{amount * (1 + rate):.2f}"


def lookup_order(order_id: str) -> str:
    """Find an order's status."""
    if not order_id.startswith("ORD-"):
        raise ValueError(f"unknown order id {order_id!r}")
    return f"{order_id}: shipped on 2024-05-02, 3 items"


TOOLS = [FunctionTool.from_defaults(f) for f in (convert_currency, add_tax, lookup_order)]


def first_number(text: str) -> float:
    return float(text.split()[0])


#: A three-turn task: sequential tools, parallel tools, a failing tool.
TASKS = [
    Task("Convert 100 EUR", [[("convert_currency", {"amount": 100, "currency": "EUR"})],
                             [("add_tax", {"amount": 108.0, "rate": 0.2})]],
         lambda r, m: f"100 EUR is {r[0]}; with 20% tax that is {r[1]} USD."),
    Task("Compare 50 EUR and 50 GBP", [[("convert_currency", {"amount": 50, "currency": "EUR"}),
                                        ("convert_currency", {"amount": 50, "currency": "GBP"})]],
         lambda r, m: f"50 EUR is {r[0]} and 50 GBP is {r[1]}."),
    Task("Where is order", [[("lookup_order", {"order_id": "XYZ-1"})],
                            [("lookup_order", {"order_id": "ORD-77"})]],
         lambda r, m: f"Found it: {r[-1]}"),
]  # fmt: skip
TURNS = ["Convert 100 EUR to USD and add 20% tax.", "Compare 50 EUR and 50 GBP in USD.",
         "Where is order 77? Try XYZ-1 first."]  # fmt: skip


# ---------------------------------------------------------------- DAG checks
def by_type(events: Sequence[Event], t: EventType) -> list[Event]:
    return [e for e in events if e.type == t]


def check_tool_chain(store: Any, session_id: str) -> dict[str, int]:
    """Every tool result → its invocation → the assistant message that asked → model call
    → the user message / tool results before it; returns counts for further asserts."""
    events = store.timeline(session_id)
    ids = {e.id: e for e in events}
    users = by_type(events, EventType.USER_MESSAGE)
    results = by_type(events, EventType.TOOL_RESULT)
    invocations = by_type(events, EventType.TOOL_INVOCATION)
    assert results, "no tool results captured"
    for res in results:
        assert len(res.parents) == 1, res
        inv = ids[res.parents[0]]
        assert inv.type == EventType.TOOL_INVOCATION
        assert inv.payload["tool_call_id"] == res.payload["tool_call_id"]
        assert inv.payload["name"] == res.payload["name"]
        (asked_id,) = inv.parents
        asked = ids[asked_id]
        assert asked.type == EventType.ASSISTANT_MESSAGE
        assert res.payload["tool_call_id"] in [c["id"] for c in asked.payload["tool_calls"]]
        (call_id,) = asked.parents
        call = ids[call_id]
        assert call.type == EventType.MODEL_CALL
        assert call.parents, call
        for p in call.parents:
            assert ids[p].type in (EventType.USER_MESSAGE, EventType.TOOL_RESULT)
        # the chain reaches this turn's user message
        anc = {e.id for e, _ in store.ancestors(res.id, depth=12)}
        turn_user = max((u for u in users if u.seq < res.seq), key=lambda u: u.seq)
        assert turn_user.id in anc, f"{res.content!r} does not reach {turn_user.content!r}"
    # a model call after tool results is caused by exactly those results
    for call in by_type(events, EventType.MODEL_CALL):
        kinds = {ids[p].type for p in call.parents}
        if EventType.TOOL_RESULT in kinds:
            assert kinds == {EventType.TOOL_RESULT}
    edges = store.edges(session_id=session_id, types=[EdgeType.CAUSED_BY])
    declared = {(e.id, p) for e in events for p in e.parents}
    assert declared <= {(e.src, e.dst) for e in edges}
    return {"users": len(users), "results": len(results), "invocations": len(invocations)}
