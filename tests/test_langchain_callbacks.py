"""BeeWeaveCallbackHandler: causes, dedup of re-sent history, parallel + nested runs,
REFERS_TO, token coalescing, errors, async — on SQLite and Neo4j.

The chat model is FAKE (``FakeToolCallingChatModel``, labelled); tools, LangGraph,
the bus and the stores are real.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent

from beeweave_core.events import EdgeType, EventType
from beeweave_langchain.callbacks import AsyncBeeWeaveCallbackHandler, BeeWeaveCallbackHandler
from beeweave_langchain.testing import FakeToolCallingChatModel, calls, tool_call

from .langchain_helpers import TOOLS, assert_tool_chains, by_id, fake_model, refers_to

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")


def run_agent(weave, handler, thread: str, turns: int, start: int = 0) -> dict[str, Any]:
    agent = create_react_agent(fake_model(turns, start), TOOLS, checkpointer=InMemorySaver())
    cfg = {"callbacks": [handler], "configurable": {"thread_id": thread}}
    out: dict[str, Any] = {}
    for i in range(turns):
        out = agent.invoke({"messages": [("user", f"refund order {i}")]}, config=cfg)
    return out


def types_of(store, sid):
    return [e.type for e in store.timeline(sid)]


def test_react_agent_gets_full_causal_chain(weave_factory, backend):
    weave = weave_factory(backend)
    handler = BeeWeaveCallbackHandler(weave, user_id="u-1", agent_id="refunds")
    out = run_agent(weave, handler, "t-chain", turns=3)
    assert weave.flush()
    s = weave.store
    assert assert_tool_chains(s, "t-chain") == 6
    tl = s.timeline("t-chain")
    # every model call re-sent the whole history, yet each user message is stored once
    users = [e for e in tl if e.type == EventType.USER_MESSAGE]
    assert [u.content for u in users] == ["refund order 0", "refund order 1", "refund order 2"]
    assert sum(e.type == EventType.ASSISTANT_MESSAGE for e in tl) == 9
    assert sum(e.type == EventType.MODEL_CALL for e in tl) == 9
    # the state's messages and the stored conversation agree one to one
    assert len(out["messages"]) == len(
        [
            e
            for e in tl
            if e.type
            in (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_RESULT)
        ]
    )
    assert all(e.meta == {"user_id": "u-1", "agent_id": "refunds"} for e in tl)
    # and re-sent messages are not even re-emitted (no duplicate work for the store)
    assert weave.stats()["duplicates"] == 0 and weave.stats()["written"] == len(tl)
    assert {e.source["framework"] for e in tl} == {"langchain"}
    assert handler.failures == 0


def test_refers_to_links_reused_tool_values(weave_factory, backend):
    weave = weave_factory(backend)
    run_agent(weave, BeeWeaveCallbackHandler(weave), "t-refs", turns=2)
    assert weave.flush()
    s = weave.store
    ev = by_id(s.timeline("t-refs"))
    links = refers_to(s, "t-refs")
    refunds = [
        e
        for e in ev.values()
        if e.type == EventType.TOOL_INVOCATION and e.payload["name"] == "refund"
    ]
    assert len(refunds) == 2
    for inv in refunds:
        targets = [ev[d] for src, d in links if src == inv.id]
        # the refund's customer and amount came from the lookup result just before it
        assert len(targets) == 1 and targets[0].type == EventType.TOOL_RESULT
        assert targets[0].payload["name"] == "lookup_order"
        assert inv.payload["args"]["customer"] in targets[0].content
    lookups = [
        e
        for e in ev.values()
        if e.type == EventType.TOOL_INVOCATION and e.payload["name"] == "lookup_order"
    ]
    assert not [1 for src, _ in links if src in {x.id for x in lookups}]  # nothing reused there


def test_redelivered_callbacks_store_nothing_twice(weave_factory):
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-redeliver")
    model = FakeToolCallingChatModel(messages=iter(["hello back"] * 2))
    prompt = [HumanMessage("hello", id="m-1")]
    run_id = uuid.uuid4()
    for _ in range(2):  # the same hooks delivered twice (a retrying transport)
        h.on_chat_model_start({}, [prompt], run_id=run_id)
        res = model.generate([prompt])
        res.generations[0][0].message.id = "lc_run--fixed"
        h.on_llm_end(res, run_id=run_id)
    weave.flush()
    tl = weave.store.timeline("s-redeliver")
    assert [e.type for e in tl] == [
        EventType.USER_MESSAGE,
        EventType.MODEL_CALL,
        EventType.ASSISTANT_MESSAGE,
    ]
    assert weave.stats()["duplicates"] >= 1


def test_same_words_twice_are_two_events(weave_factory):
    """Id-less messages (legacy chains): the key counts occurrences, so "ok" said twice
    is two events, while the re-sent history maps back to them."""
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-ok")
    model = FakeToolCallingChatModel(messages=iter(["a1", "a2", "a3"]))
    history: list = []
    for text in ["ok", "ok", "something else"]:
        history.append(HumanMessage(text))
        reply = model.invoke(history, config={"callbacks": [h]})
        history.append(AIMessage(reply.content))  # re-added without its id, as old memories do
    weave.flush()
    tl = weave.store.timeline("s-ok")
    assert [e.content for e in tl if e.type == EventType.USER_MESSAGE] == [
        "ok",
        "ok",
        "something else",
    ]
    assert [e.content for e in tl if e.type == EventType.ASSISTANT_MESSAGE] == ["a1", "a2", "a3"]
    calls_ = [e for e in tl if e.type == EventType.MODEL_CALL]
    users = [e for e in tl if e.type == EventType.USER_MESSAGE]
    assert [c.parents for c in calls_] == [(u.id,) for u in users]


def test_parallel_runs_share_one_handler(weave_factory, backend):
    weave = weave_factory(backend)
    handler = BeeWeaveCallbackHandler(weave)  # session from each run's thread_id
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            run_agent(weave, handler, f"t-par-{k}", turns=3, start=10 * k)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and handler.failures == 0
    assert weave.flush()
    for k in range(4):
        sid = f"t-par-{k}"
        assert assert_tool_chains(weave.store, sid) == 6
        ids = {e.id for e in weave.store.timeline(sid)}
        for e in weave.store.timeline(sid):  # no parent crosses into another run's session
            assert set(e.parents) <= ids
        users = [e.content for e in weave.store.timeline(sid) if e.type == EventType.USER_MESSAGE]
        assert users == ["refund order 0", "refund order 1", "refund order 2"]


def test_nested_graph_inherits_session_and_causes(weave_factory):
    weave = weave_factory()
    handler = BeeWeaveCallbackHandler(weave)
    inner = create_react_agent(fake_model(1), TOOLS)  # a compiled graph used as a node

    outer = StateGraph(MessagesState)
    outer.add_node("specialist", inner)
    outer.add_edge(START, "specialist")
    graph = outer.compile(checkpointer=InMemorySaver())
    graph.invoke({"messages": [("user", "refund order 0")]},
                 config={"callbacks": [handler], "configurable": {"thread_id": "t-nested"}})  # fmt: skip
    assert weave.flush()
    assert assert_tool_chains(weave.store, "t-nested") == 2
    assert [s.session_id for s in weave.store.sessions()] == ["t-nested"]


async def test_async_handler_records_the_same_chain(weave_factory):
    weave = weave_factory()
    handler = AsyncBeeWeaveCallbackHandler(weave, session_id="s-async")
    agent = create_react_agent(fake_model(2), TOOLS)
    history: list = []
    for i in range(2):
        out = await agent.ainvoke({"messages": [*history, ("user", f"refund order {i}")]},
                                  config={"callbacks": [handler]})  # fmt: skip
        history = out["messages"]
    assert weave.flush()
    assert assert_tool_chains(weave.store, "s-async") == 4
    assert handler.failures == 0


def test_streamed_tokens_are_coalesced(weave_factory):
    weave = weave_factory(coalesce_window=5.0)
    h = BeeWeaveCallbackHandler(weave, session_id="s-stream")
    model = FakeToolCallingChatModel(messages=iter(["one two three four five six seven"]))
    chunks = list(model.stream([HumanMessage("count")], config={"callbacks": [h]}))
    assert len(chunks) > 5
    weave.flush()
    tl = weave.store.timeline("s-stream")
    assert [e.type for e in tl] == [
        EventType.USER_MESSAGE, EventType.MODEL_CALL, EventType.INTERNAL_THOUGHT, EventType.ASSISTANT_MESSAGE,
    ]  # fmt: skip
    stream = tl[2]
    assert stream.content == "one two three four five six seven"
    assert stream.payload["coalesced"]["fragments"] == len([c for c in chunks if c.content])
    assert stream.parents == (tl[1].id,)


def test_tool_error_is_recorded_and_the_chain_still_raises_its_own(weave_factory):
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-err")
    from .langchain_helpers import lookup_order

    with pytest.raises(ValueError, match="no order ORD-1"):
        lookup_order.invoke({"name": "lookup_order", "args": {"order_id": "ORD-1"}, "id": "c-9", "type": "tool_call"},
                            config={"callbacks": [h]})  # fmt: skip
    weave.flush()
    inv, err = weave.store.timeline("s-err")
    assert inv.type == EventType.TOOL_INVOCATION and inv.payload["tool_call_id"] == "c-9"
    assert err.type == EventType.ERROR and err.parents == (inv.id,)
    assert err.payload["error_type"] == "ValueError" and "no order ORD-1" in err.content
    assert h.failures == 0


def test_handler_bugs_never_reach_the_chain(weave_factory):
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-bad")
    # a malformed hook (not a message list) is swallowed, logged and counted
    h.on_chat_model_start({}, [[object()]], run_id=uuid.uuid4())
    h.on_llm_end(object(), run_id=uuid.uuid4())
    assert h.failures == 1  # the unknown run in on_llm_end is ignored, not a failure
    assert h.raise_error is False

    # an unserialisable tool output is stored in its canonical form, not lost
    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque 42>"

    run = uuid.uuid4()
    h.on_tool_start({"name": "t"}, "x", run_id=run, inputs={"x": 1})
    h.on_tool_end(Opaque(), run_id=run)
    weave.flush()
    res = weave.store.timeline("s-bad", types=[EventType.TOOL_RESULT])[0]
    assert "<Opaque 42>" in res.content


def test_legacy_text_chain_records_input_and_answer(weave_factory):
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-legacy")
    llm = FakeListLLM(responses=["Paris."])  # FAKE LLM (labelled)
    chain = PromptTemplate.from_template("Q: {question}\nA:") | llm
    assert chain.invoke({"question": "Capital of France?"}, config={"callbacks": [h]}) == "Paris."
    weave.flush()
    user, call, answer = weave.store.timeline("s-legacy")
    assert (user.type, user.content) == (EventType.USER_MESSAGE, "Capital of France?")
    assert call.type == EventType.MODEL_CALL and call.parents == (user.id,)
    assert (answer.type, answer.content, answer.parents) == (
        EventType.ASSISTANT_MESSAGE,
        "Paris.",
        (call.id,),
    )


def test_unseen_history_after_restart_is_not_duplicated(weave_factory, backend):
    """A new process (new weave, new handler) re-sends a history whose messages are stored."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    w1 = weave_factory(backend, tenant=tenant)
    out = run_agent(w1, BeeWeaveCallbackHandler(w1), "t-restart", turns=2)
    assert w1.flush()
    before = len(w1.store.timeline("t-restart"))
    w1.close()
    w2 = weave_factory(backend, tenant=tenant)
    h2 = BeeWeaveCallbackHandler(w2)
    agent = create_react_agent(fake_model(1, start=2), TOOLS)
    agent.invoke({"messages": [*out["messages"], ("user", "refund order 2")]},
                 config={"callbacks": [h2], "configurable": {"thread_id": "t-restart"}})  # fmt: skip
    assert w2.flush()
    tl = w2.store.timeline("t-restart")
    assert len(tl) == before + 11  # user + 3 × (call, answer) + 2 × (invocation, result)
    assert [e.content for e in tl if e.type == EventType.USER_MESSAGE] == [
        "refund order 0", "refund order 1", "refund order 2",
    ]  # fmt: skip
    assert assert_tool_chains(w2.store, "t-restart") == 6
    # the value index was rebuilt from the store: the new refund still links back
    assert refers_to(w2.store, "t-restart")


def test_tool_messages_without_handler_run_are_linked_by_tool_call_id(weave_factory):
    """History from elsewhere (no tool callbacks seen): results still hang off their call."""
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-hist")
    model = FakeToolCallingChatModel(messages=iter(["done"]))
    history = [
        HumanMessage("refund ORD-10001", id="h1"),
        calls(tool_call("lookup_order", {"order_id": "ORD-10001"}, "c-1")),
        ToolMessage('{"order_id": "ORD-10001"}', tool_call_id="c-1", id="t1"),
    ]
    history[1].id = "a1"
    model.invoke(history, config={"callbacks": [h]})
    weave.flush()
    ev = {e.type: e for e in weave.store.timeline("s-hist")}
    tl = weave.store.timeline("s-hist")
    res = next(e for e in tl if e.type == EventType.TOOL_RESULT)
    inv = next(e for e in tl if e.type == EventType.TOOL_INVOCATION)
    call = next(e for e in tl if e.type == EventType.MODEL_CALL)
    assert res.parents == (inv.id,) and call.parents == (res.id,)
    assert ev[EventType.ASSISTANT_MESSAGE].content == "done"
    assert weave.store.edges(event_id=res.id, types=[EdgeType.CAUSED_BY]) != []


def test_root_lambda_chain_with_chat_model(weave_factory):
    """Runs whose callbacks come from a plain Runnable (no LangGraph) still link."""
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-lambda")
    model = FakeToolCallingChatModel(messages=iter(["pong"]))
    chain = RunnableLambda(lambda x: [HumanMessage(x)]) | model
    assert chain.invoke("ping", config={"callbacks": [h]}).content == "pong"
    weave.flush()
    assert types_of(weave.store, "s-lambda") == [
        EventType.USER_MESSAGE, EventType.MODEL_CALL, EventType.ASSISTANT_MESSAGE,
    ]  # fmt: skip


def test_tool_call_ids_reused_every_turn_stay_apart(weave_factory):
    """Some model servers number tool calls per response ("call_0" every turn)."""
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave)
    script = []
    for i in range(3):
        o = f"ORD-{10_000 + i}"
        script += [calls(tool_call("lookup_order", {"order_id": o}, "call_0")), f"done {o}"]
    agent = create_react_agent(
        FakeToolCallingChatModel(messages=iter(script)), TOOLS, checkpointer=InMemorySaver()
    )  # FAKE LLM (labelled)
    cfg = {"callbacks": [h], "configurable": {"thread_id": "t-reuse"}}
    for i in range(3):
        agent.invoke({"messages": [("user", f"order {i}")]}, config=cfg)
    assert weave.flush()
    assert assert_tool_chains(weave.store, "t-reuse") == 3
    results = weave.store.timeline("t-reuse", types=[EventType.TOOL_RESULT])
    assert [r.payload["tool_call_id"] for r in results] == ["call_0"] * 3
    assert [f"ORD-{10_000 + i}" in r.content for i, r in enumerate(results)] == [True] * 3


def test_parallel_tool_calls_all_feed_the_next_model_call(weave_factory, backend):
    weave = weave_factory(backend)
    h = BeeWeaveCallbackHandler(weave)
    script = [
        calls(tool_call("lookup_order", {"order_id": "ORD-10001"}),
              tool_call("lookup_order", {"order_id": "ORD-10002"})),
        "Both found.",
    ]  # fmt: skip
    agent = create_react_agent(FakeToolCallingChatModel(messages=iter(script)), TOOLS)  # FAKE LLM
    agent.invoke({"messages": [("user", "look up two orders")]},
                 config={"callbacks": [h], "configurable": {"thread_id": "t-two"}})  # fmt: skip
    assert weave.flush()
    assert assert_tool_chains(weave.store, "t-two") == 2
    tl = weave.store.timeline("t-two")
    results = {e.id for e in tl if e.type == EventType.TOOL_RESULT}
    second_call = [e for e in tl if e.type == EventType.MODEL_CALL][1]
    assert set(second_call.parents) == results  # the call consumed both results


def test_an_error_unwinding_nested_runs_is_one_event(weave_factory):
    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-unwind")

    def boom(_x):
        raise RuntimeError("disk full")

    chain = RunnableLambda(lambda x: x) | (RunnableLambda(lambda x: x) | RunnableLambda(boom))
    for _ in range(2):  # two failures: two events
        with pytest.raises(RuntimeError, match="disk full"):
            chain.invoke("go", config={"callbacks": [h]})
    weave.flush()
    errors = weave.store.timeline("s-unwind", types=[EventType.ERROR])
    assert [e.content for e in errors] == ["RuntimeError: disk full"] * 2
    assert h.failures == 0 and not h._runs  # every run closed, nothing retained


def test_legacy_agent_executor_is_wired_by_cause(weave_factory):
    """A text-LLM ReAct agent (no tool_call_ids): thought → tool call → result → next call."""
    from langchain_classic.agents import AgentExecutor
    from langchain_classic.agents import create_react_agent as classic_react_agent

    from .langchain_helpers import lookup_order

    weave = weave_factory()
    h = BeeWeaveCallbackHandler(weave, session_id="s-exec")
    prompt = PromptTemplate.from_template(
        "Tools: {tools}\n{tool_names}\nQ: {input}\n{agent_scratchpad}"
    )
    llm = FakeListLLM(responses=[  # FAKE LLM (labelled)
        "Thought: look it up\nAction: lookup_order\nAction Input: ORD-10001",
        "Thought: done\nFinal Answer: 13.87 EUR",
    ])  # fmt: skip
    executor = AgentExecutor(
        agent=classic_react_agent(llm, [lookup_order], prompt), tools=[lookup_order]
    )
    assert (
        executor.invoke({"input": "amount of ORD-10001?"}, config={"callbacks": [h]})["output"]
        == "13.87 EUR"
    )
    weave.flush()
    user, call1, ans1, thought, inv, res, call2, ans2 = weave.store.timeline("s-exec")
    assert [e.type for e in (user, call1, ans1, thought, inv, res, call2, ans2)] == [
        EventType.USER_MESSAGE, EventType.MODEL_CALL, EventType.ASSISTANT_MESSAGE,
        EventType.INTERNAL_THOUGHT, EventType.TOOL_INVOCATION, EventType.TOOL_RESULT,
        EventType.MODEL_CALL, EventType.ASSISTANT_MESSAGE,
    ]  # fmt: skip
    assert call1.parents == (user.id,) and ans1.parents == (call1.id,)
    assert thought.parents == (ans1.id,) and inv.parents == (thought.id,)
    assert res.parents == (inv.id,) and call2.parents == (res.id,) and ans2.parents == (call2.id,)
    assert "13.87" in res.content and h.failures == 0
