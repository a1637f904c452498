"""End to end, offline: a LangGraph ReAct agent with BeeWeave's callback handler,
checkpointer and context hook runs 30 tool-using turns; the event graph has the right
causal chain for every tool result (SQLite and Neo4j); a *new process* resumes the
thread from the checkpointer and carries on.

The chat model is FAKE (``FakeToolCallingChatModel``, labelled) — it replays a script
of tool calls and answers.  Everything else is real: LangGraph, the tools, the
tokenizer, the embedding model, the stores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from beeweave_core.events import EventType
from beeweave_langchain import BeeWeaveCallbackHandler, BeeWeaveCheckpointer

from .langchain_helpers import (
    BUDGET,
    answer_for,
    assert_tool_chains,
    build_agent,
    by_id,
    fake_model,
    refers_to,
    user_turn,
)

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")

TURNS = 30
THREAD = "e2e-thread"
REPO = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(480)
def test_react_agent_30_turns_graph_and_resume(weave_factory, backend):
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    weave = weave_factory(backend, tenant=tenant)
    saver = BeeWeaveCheckpointer(weave)
    handler = BeeWeaveCallbackHandler(weave, user_id="u-e2e")
    model = fake_model(TURNS)  # FAKE LLM (labelled)
    agent, hook = build_agent(weave, model, saver)
    cfg = {"callbacks": [handler], "configurable": {"thread_id": THREAD}}
    prompt_tokens = []
    for i in range(TURNS):
        out = agent.invoke({"messages": [("user", user_turn(i))]}, cfg)
        assert out["messages"][-1].content == answer_for(i)
        prompt_tokens.append(hook.last.total_tokens)
    assert handler.failures == 0
    assert weave.flush()
    store = weave.store

    # 1. every tool result: → its invocation → the answer that asked → the model call →
    #    what the call consumed; and the next model call consumed the result
    assert assert_tool_chains(store, THREAD) == 2 * TURNS
    tl = store.timeline(THREAD)
    counts = Counter(e.type for e in tl)
    assert counts[EventType.USER_MESSAGE] == TURNS  # history re-sent 90 times, stored once
    assert counts[EventType.MODEL_CALL] == counts[EventType.ASSISTANT_MESSAGE] == 3 * TURNS
    assert counts[EventType.TOOL_INVOCATION] == counts[EventType.TOOL_RESULT] == 2 * TURNS
    ev = by_id(tl)
    first_calls = [
        e
        for e in tl
        if e.type == EventType.MODEL_CALL and ev[e.parents[0]].type == EventType.USER_MESSAGE
    ]
    assert [ev[c.parents[0]].content for c in first_calls] == [user_turn(i) for i in range(TURNS)]

    # 2. REFERS_TO: each refund reused the customer and amount its lookup returned
    links = refers_to(store, THREAD)
    for inv in (
        e for e in tl if e.type == EventType.TOOL_INVOCATION and e.payload["name"] == "refund"
    ):
        targets = [ev[d] for s, d in links if s == inv.id and d in ev]
        assert any(t.payload["name"] == "lookup_order" and inv.payload["args"]["customer"] in t.content
                   for t in targets)  # fmt: skip

    # 3. the hook: the model saw a budgeted context, and the session was compacted
    assert max(prompt_tokens) <= BUDGET
    full = hook.last.full_history_tokens
    assert full > 2 * BUDGET and hook.last.total_tokens < full
    assert counts[EventType.SUMMARY] > 0
    last_prompt = model.received[-1]
    assert all((m.id or "").startswith("beeweave:") for m in last_prompt)
    assert len(last_prompt) < len(out["messages"])

    # 4. a new process resumes the thread from the checkpointer
    state_len = len(agent.get_state(cfg).values["messages"])
    assert state_len == 6 * TURNS
    url = weave.url
    weave.close()
    env = {**os.environ, "PYTHONPATH": str(REPO), "BEEWEAVE_HOME": os.environ.get("BEEWEAVE_HOME", str(REPO / ".pytest-beeweave-home"))}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "tests.langchain_resume", url, tenant, THREAD, str(TURNS)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["messages_before"] == state_len and res["first_before"] == user_turn(0)
    assert res["messages_after"] == state_len + 6
    assert res["answer"] == answer_for(TURNS)

    # 5. the graph after the restart: one more turn, wired the same way, nothing doubled
    w2 = weave_factory(backend, tenant=tenant)
    assert assert_tool_chains(w2.store, THREAD) == 2 * (TURNS + 1)
    users = [e.content for e in w2.store.timeline(THREAD, types=[EventType.USER_MESSAGE])]
    assert users == [user_turn(i) for i in range(TURNS + 1)]
