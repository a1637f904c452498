"""Second process of the end-to-end test: resume a LangGraph thread from BeeWeave.

``python -m tests.langchain_resume URL TENANT THREAD TURN`` opens the weave a first
process wrote, rebuilds the same agent (checkpointer, context hook, callback
handler, FAKE model — labelled: it replays the scripted turn ``TURN``), reads the
thread's state from the checkpointer, runs one more user turn and prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import warnings

from beeweave_core.weave import Weave
from beeweave_langchain import BeeWeaveCallbackHandler, BeeWeaveCheckpointer

from .conftest import neo4j_auth
from .langchain_helpers import build_agent, fake_model, user_turn


def main(url: str, tenant: str, thread: str, turn: int) -> dict:
    warnings.simplefilter("ignore")
    weave = Weave.open(url, tenant=tenant, auth=None if url.startswith("sqlite") else neo4j_auth())
    try:
        saver = BeeWeaveCheckpointer(weave)
        model = fake_model(1, start=turn)  # FAKE LLM: the scripted reply for this turn
        agent, _hook = build_agent(weave, model, saver)
        cfg = {"callbacks": [BeeWeaveCallbackHandler(weave, user_id="u-e2e")],
               "configurable": {"thread_id": thread}}  # fmt: skip
        before = agent.get_state(cfg).values.get("messages", [])
        out = agent.invoke({"messages": [("user", user_turn(turn))]}, cfg)
        weave.flush()
        return {
            "messages_before": len(before),
            "first_before": before[0].content if before else None,
            "messages_after": len(out["messages"]),
            "answer": out["messages"][-1].content,
            "prompt_roles": [m.type for m in model.received[0]],
        }
    finally:
        weave.close()


if __name__ == "__main__":
    url, tenant, thread, turn = sys.argv[1:5]
    print(json.dumps(main(url, tenant, thread, int(turn))))
