"""Shared pieces of the LangChain tests: real tools, a scripted FAKE model, DAG checks."""

from __future__ import annotations

import json
import zlib
from typing import Any

from langchain_core.tools import tool

from beeweave_core.events import EdgeType, Event, EventType
from beeweave_langchain.testing import FakeToolCallingChatModel, calls, tool_call

ORDERS = {f"ORD-{10_000 + i}": {"amount_eur": round(12.5 + i * 1.37, 2), "customer": f"CUST-{7000 + i}"} for i in range(100)}  # fmt: skip


@tool
def lookup_order(order_id: str) -> dict:
    """Look up an order by id: amount and customer."""
    if order_id not in ORDERS:
        raise ValueError(f"no order {order_id}")
    return {"order_id": order_id, **ORDERS[order_id]}


@tool
def refund(customer: str, amount_eur: float) -> str:
    """Refund an amount to a customer."""
    ref = zlib.crc32(f"{customer}/{amount_eur}".encode()) % 10_000
    return f"refund RF-{ref:04d} of {amount_eur} EUR to {customer}"


TOOLS = [lookup_order, refund]


def order_turn(i: int) -> list[Any]:
    """One user turn of the FAKE model's script: look up, refund (reusing values), answer."""
    oid = f"ORD-{10_000 + i % 100}"
    o = ORDERS[oid]
    return [
        calls(tool_call("lookup_order", {"order_id": oid})),
        calls(tool_call("refund", {"customer": o["customer"], "amount_eur": o["amount_eur"]})),
        f"Refunded {o['amount_eur']} EUR for {oid}.",
    ]


def fake_model(turns: int, start: int = 0) -> FakeToolCallingChatModel:
    """FAKE LLM (labelled): replays :func:`order_turn` for ``turns`` user turns."""
    script = [m for i in range(start, start + turns) for m in order_turn(i)]
    return FakeToolCallingChatModel(messages=iter(script))


def by_id(events: list[Event]) -> dict[str, Event]:
    return {e.id: e for e in events}


def assert_tool_chains(store: Any, session_id: str) -> int:
    """Every tool result hangs off its invocation → the answer that asked → the model call
    → what that call consumed; the next model call consumed the result.  Returns how many
    results were checked."""
    events = store.timeline(session_id)
    ev = by_id(events)
    results = [e for e in events if e.type == EventType.TOOL_RESULT]
    calls_ = [e for e in events if e.type == EventType.MODEL_CALL]
    for r in results:
        tcid = r.payload["tool_call_id"]
        assert len(r.parents) == 1, r
        inv = ev[r.parents[0]]
        assert inv.type == EventType.TOOL_INVOCATION and inv.payload["tool_call_id"] == tcid
        (ans_id,) = inv.parents
        ans = ev[ans_id]
        assert ans.type == EventType.ASSISTANT_MESSAGE
        assert tcid in [tc["id"] for tc in ans.payload["tool_calls"]]
        (call_id,) = ans.parents
        call = ev[call_id]
        assert call.type == EventType.MODEL_CALL and call.parents
        assert all(
            ev[p].type in (EventType.USER_MESSAGE, EventType.TOOL_RESULT) for p in call.parents
        )
        later = [c for c in calls_ if c.seq > r.seq]
        assert later and r.id in later[0].parents, f"next model call did not consume {tcid}"
        # the graph itself (edges, not just the stored fields) reaches a user message
        anc = store.ancestors(r.id, depth=12, edge_types=[EdgeType.CAUSED_BY])
        assert any(a.type == EventType.USER_MESSAGE for a, _ in anc)
        assert [a.id for a, d in anc if d == 1] == [inv.id]
    return len(results)


def refers_to(store: Any, session_id: str) -> set[tuple[str, str]]:
    return {(e.src, e.dst) for e in store.edges(session_id=session_id, types=[EdgeType.REFERS_TO])}


def tool_args(event: Event) -> dict[str, Any]:
    return event.payload.get("args") or json.loads(event.content)


BUDGET = 700


def user_turn(i: int) -> str:
    return f"please refund order ORD-{10_000 + i % 100}"


def answer_for(i: int) -> str:
    return order_turn(i)[-1]  # type: ignore[return-value]


def build_agent(weave: Any, model: Any, checkpointer: Any, budget: int = BUDGET) -> tuple[Any, Any]:
    """The e2e agent: LangGraph ReAct + BeeWeave context hook + the given checkpointer."""
    from langgraph.prebuilt import create_react_agent

    from beeweave_langchain.hooks import beeweave_context_hook

    hook = beeweave_context_hook(weave, budget_tokens=budget)
    agent = create_react_agent(model, TOOLS, pre_model_hook=hook, checkpointer=checkpointer)
    return agent, hook.hook
