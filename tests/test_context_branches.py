"""Context follows the branch: a LangGraph thread rewound to an earlier checkpoint or
forked never shows the model the abandoned turns, switching back shows them again,
and a deleted thread's content never reaches a new run on the same thread id.

The chat model is a FAKE (``FakeToolCallingChatModel`` replaying scripted answers and
recording every prompt it receives: the spy); the store, checkpointer and LangGraph
are real.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.prebuilt import create_react_agent

from beeweave_langchain.checkpoint import BeeWeaveCheckpointer
from beeweave_langchain.hooks import beeweave_context_hook
from beeweave_langchain.testing import FakeToolCallingChatModel

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


def _agent(weave: Any, saver: BeeWeaveCheckpointer) -> tuple[FakeToolCallingChatModel, Any]:
    answers = iter([AIMessage(content=f"Done, step {i}.") for i in range(50)])
    spy = FakeToolCallingChatModel(messages=answers)  # FAKE LLM: the spy
    hook = beeweave_context_hook(weave, budget_tokens=4_000)
    return spy, create_react_agent(spy, [], pre_model_hook=hook, checkpointer=saver)


def _prompt(spy: FakeToolCallingChatModel) -> str:
    return "\n".join(str(m.content) for m in spy.received[-1])


def _say(agent: Any, text: str, config: dict[str, Any]) -> None:
    agent.invoke({"messages": [("user", text)]}, config)


def test_rewind_and_fork_show_only_the_branch(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    saver = BeeWeaveCheckpointer.from_weave(weave)
    spy, agent = _agent(weave, saver)
    cfg = {"configurable": {"thread_id": "ferry"}}
    _say(agent, "Book the ferry to Harwich for Tuesday morning.", cfg)
    fork_point = agent.get_state(cfg).config
    _say(agent, "Add a cabin, and the locker code is 7319.", cfg)
    assert "7319" in _prompt(spy) and "Harwich" in _prompt(spy)
    # rewind: resume from the checkpoint before the cabin turn
    _say(agent, "Make it a reclining seat in the lounge instead.", fork_point)
    p = _prompt(spy)
    assert "Harwich" in p and "reclining seat" in p
    assert "7319" not in p and "cabin" not in p  # the abandoned future is not shown
    # fork: a named branch at the same point
    saver.fork(fork_point, "overnight")
    _say(agent, "Switch to the overnight sailing with a bicycle.", cfg)
    p = _prompt(spy)
    assert "Harwich" in p and "bicycle" in p
    assert "7319" not in p and "reclining" not in p
    # switching back to main shows main's turns again
    saver.switch_branch("ferry", "main")
    _say(agent, "What did I book so far?", cfg)
    p = _prompt(spy)
    assert "reclining seat" in p and "bicycle" not in p and "7319" not in p


def test_delete_thread_then_a_new_run_starts_clean(weave_factory: Any) -> None:
    weave = weave_factory(index=False)
    saver = BeeWeaveCheckpointer.from_weave(weave)
    spy, agent = _agent(weave, saver)
    cfg = {"configurable": {"thread_id": "payments"}}
    _say(agent, "My card number is 4929 1188 0021 7765, charge the deposit to it.", cfg)
    assert "4929 1188 0021 7765" in _prompt(spy)
    saver.delete_thread("payments")
    _say(agent, "Hello again, what do you know about my payment details?", cfg)
    p = _prompt(spy)
    assert "Hello again" in p and "4929" not in p and "deposit" not in p
    weave.flush()
    assert all("4929" not in e.content for e in weave.store.timeline("payments"))
    ctx = weave.assemble("payments", "card number", budget_tokens=2_000, record=False)
    assert "4929" not in ctx.text()
    assert weave.store.search_text("4929", session_id="payments") == []
