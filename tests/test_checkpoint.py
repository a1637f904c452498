"""What BeeWeaveCheckpointer does beyond the conformance suite, on both backends.

* a LangGraph app with only the checkpointer (no callbacks) gets its messages as
  events, each once, with the tool-call causal chain;
* a thread resumes after the process is recreated (new weave, same file/database),
  and the event graph does not grow copies;
* branches (fork / switch / tree), DeltaChannel-safe pruning, metadata filters,
  exact metadata round-trips, tenant isolation.

The chat model is a FAKE (``FakeToolCallingChatModel`` replaying a script) — the only
fake allowed; everything else is real (SQLite files, the Neo4j server).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import operator
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import create_react_agent

from beeweave_core.checkpoints import PruneLimits
from beeweave_core.events import EdgeType, EventType
from beeweave_core.weave import Weave
from beeweave_langchain.checkpoint import AsyncBeeWeaveCheckpointer, BeeWeaveCheckpointer

from .conftest import neo4j_auth
from .langchain_helpers import TOOLS, fake_model

# the prebuilt agent moved to ``langchain.agents`` (not installed here); same graph
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

MESSAGE_TYPES = {
    EventType.USER_MESSAGE,
    EventType.ASSISTANT_MESSAGE,
    EventType.TOOL_RESULT,
    EventType.SYSTEM_PROMPT,
}


@pytest.fixture
def savers(backend: str, weave_factory: Callable[..., Weave]) -> Iterator[Callable[..., Any]]:
    """``savers(tenant=None, **kw)`` → a checkpointer on a fresh weave of ``backend``.

    Same tenant twice = two processes on the same data.  Neo4j checkpoint nodes of
    every tenant used are purged afterwards (the event fixture purges the events).
    """
    made: list[BeeWeaveCheckpointer] = []

    def make(tenant: str | None = None, **kw: Any) -> BeeWeaveCheckpointer:
        weave = weave_factory(backend, tenant=tenant, index=False)
        saver = BeeWeaveCheckpointer.from_weave(weave, **kw)
        made.append(saver)
        return saver

    yield make
    done: set[str] = set()
    for saver in reversed(made):  # newest first: an older weave may be closed already
        purge = getattr(saver.store, "purge_tenant", None)
        if purge is not None and saver.store.tenant not in done:
            purge()
            done.add(saver.store.tenant)


def _run_turns(agent: Any, config: dict[str, Any], turns: range) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in turns:
        out = agent.invoke({"messages": [("user", f"please refund order number {i}")]}, config)
    return out


def _message_events(weave: Weave, session_id: str) -> list[Any]:
    assert weave.flush(30), "events did not reach the store"
    return [e for e in weave.store.timeline(session_id) if e.type in MESSAGE_TYPES]


# ----------------------------------------------------------------- events
def test_checkpointed_messages_become_events_once(savers: Callable[..., Any]) -> None:
    saver = savers()
    agent = create_react_agent(fake_model(4), TOOLS, checkpointer=saver)
    config = {"configurable": {"thread_id": "order-desk", "user_id": "u-42"}}
    state = _run_turns(agent, config, range(4))
    messages = state["messages"]
    assert len(messages) == 4 * 6  # user, call, result, call, result, answer

    events = _message_events(saver.weave, "order-desk")
    # each message of the state is exactly one event (8 checkpoints per turn re-send them)
    assert sorted(e.payload["message_id"] for e in events) == sorted(m.id for m in messages)
    counts = Counter(e.type for e in events)
    assert counts == {
        EventType.USER_MESSAGE: 4,
        EventType.ASSISTANT_MESSAGE: 12,
        EventType.TOOL_RESULT: 8,
    }
    timeline = saver.weave.store.timeline("order-desk")
    by_id = {e.id: e for e in timeline}
    invocations = [e for e in timeline if e.type == EventType.TOOL_INVOCATION]
    assert len(invocations) == 8
    # order of the conversation is the session order
    assert [e.payload["message_id"] for e in events] == [m.id for m in messages]
    for ev in events:
        assert ev.meta.get("user_id") == "u-42"
        assert ev.source["hook"] == "checkpoint" and ev.source["checkpoint_id"]
    # tool result → its invocation → the assistant message that asked for it
    for result in (e for e in events if e.type == EventType.TOOL_RESULT):
        tcid = result.payload["tool_call_id"]
        (inv_id,) = result.parents
        inv = by_id[inv_id]
        assert inv.type == EventType.TOOL_INVOCATION and inv.payload["tool_call_id"] == tcid
        (ask_id,) = inv.parents
        ask = by_id[ask_id]
        assert ask.type == EventType.ASSISTANT_MESSAGE
        assert tcid in [tc["id"] for tc in ask.payload["tool_calls"]]
        # the edges themselves (not only the stored fields) reach the user's request
        anc = saver.weave.store.ancestors(result.id, depth=8, edge_types=[EdgeType.CAUSED_BY])
        assert any(a.type == EventType.USER_MESSAGE for a, _ in anc)
    # every answer hangs off the message before it; user messages have no cause
    for prev, ev in zip(events, events[1:], strict=False):
        if ev.type == EventType.ASSISTANT_MESSAGE:
            assert ev.parents == (prev.id,)
        if ev.type == EventType.USER_MESSAGE:
            assert ev.parents == ()


def _put_history(saver: BeeWeaveCheckpointer, config: dict[str, Any], history: list[Any]) -> Any:
    """A checkpoint whose messages channel holds ``history`` (what each step stores)."""
    cp = empty_checkpoint()
    version = saver.get_next_version(None, None)
    cp["channel_values"] = {"messages": list(history)}
    cp["channel_versions"] = {"messages": version}
    return saver.put(config, cp, {"source": "loop", "step": len(history)}, {"messages": version})


def test_an_unnamed_message_after_recorded_ones_is_counted_against_the_whole_history(
    savers: Callable[..., Any],
) -> None:
    """Steps pass on only what came after the last recorded message, but a message
    without an id is told apart by how often its text came before: the same short
    reply given twice in one thread is two events, each recorded once."""
    saver = savers()
    config: dict[str, Any] = {"configurable": {"thread_id": "greenhouse", "checkpoint_ns": ""}}
    history: list[BaseMessage] = [
        HumanMessage("water the tomato bed at six", id="h-1"),
        AIMessage("scheduled: tomato bed, 06:00", id="a-1"),
    ]
    config = _put_history(saver, config, history)
    # no id, as a hand-built state may have; the step ends on a message with one
    history += [HumanMessage("thanks"), AIMessage("anything else?", id="a-2")]
    config = _put_history(saver, config, history)
    history.append(HumanMessage("thanks"))
    config = _put_history(saver, config, history)
    config = _put_history(saver, config, history)  # a step that adds nothing

    contents = [e.content for e in _message_events(saver.weave, "greenhouse")]
    assert contents == [
        "water the tomato bed at six",
        "scheduled: tomato bed, 06:00",
        "thanks",
        "anything else?",
        "thanks",
    ]


async def test_async_graph_records_events(backend: str, tmp_path: Any) -> None:
    """``AsyncBeeWeaveCheckpointer.from_conn_string`` + ``graph.ainvoke``: the messages
    become events on both backends; on Neo4j the writes await the async driver, and
    what they write is what the sync store reads (and the other way round)."""
    url = str(tmp_path / "agent.db") if backend == "sqlite" else os.environ["NEO4J_URI"]
    async with AsyncBeeWeaveCheckpointer.from_conn_string(
        url, tenant=f"t-{uuid.uuid4().hex[:12]}", auth=neo4j_auth(),
        weave_options={"spool_dir": tmp_path, "index": False},
    ) as saver:  # fmt: skip
        try:
            agent = create_react_agent(fake_model(2), TOOLS, checkpointer=saver)
            config = {"configurable": {"thread_id": "async-desk"}}
            for i in range(2):
                state = await agent.ainvoke({"messages": [("user", f"refund {i}")]}, config)
            assert (saver.async_store is not None) == (backend == "neo4j")
            events = _message_events(saver.weave, "async-desk")
            assert [e.payload["message_id"] for e in events] == [m.id for m in state["messages"]]
            listed = [c async for c in saver.alist(config)]
            assert [c.config for c in listed] == [c.config for c in saver.list(config)]
            latest = await saver.aget_tuple(config)
            assert latest is not None and latest.config == listed[0].config
            # an awaited write is read back through the sync store …
            await saver.aput_writes(latest.config, [("messages", "async write")], "task-a")
            again = saver.get_tuple(latest.config)
            assert (
                again is not None and ("task-a", "messages", "async write") in again.pending_writes
            )
            # … and a write from another event loop goes through the sync store
            other = saver.aput_writes(latest.config, [("messages", "other loop")], "task-b")
            await asyncio.to_thread(asyncio.run, other)
            last = await saver.aget_tuple(latest.config)
            assert last is not None and ("task-b", "messages", "other loop") in last.pending_writes
            # the task writing again (awaited path too): the first regular write stays
            await saver.aput_writes(latest.config, [("messages", "rewritten")], "task-a")
            kept = saver.get_tuple(latest.config)
            assert (
                kept is not None and ("task-a", "messages", "rewritten") not in kept.pending_writes
            )
            assert len(kept.pending_writes) == len(last.pending_writes)
        finally:
            purge = getattr(saver.store, "purge_tenant", None)
            if purge is not None:
                await asyncio.to_thread(purge)


# ----------------------------------------------------------------- resume
def test_resume_after_process_is_recreated(savers: Callable[..., Any]) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    config = {"configurable": {"thread_id": "support-7"}}
    first = savers(tenant)
    agent = create_react_agent(fake_model(2), TOOLS, checkpointer=first)
    before = _run_turns(agent, config, range(2))["messages"]
    assert len(_message_events(first.weave, "support-7")) == len(before) == 12
    first.weave.close()  # the "process" ends

    second = savers(tenant)  # a new weave on the same file / database and tenant
    agent = create_react_agent(fake_model(1, start=2), TOOLS, checkpointer=second)
    restored = agent.get_state(config)
    assert [m.id for m in restored.values["messages"]] == [m.id for m in before]
    after = _run_turns(agent, config, range(2, 3))["messages"]
    assert [m.id for m in after[:12]] == [m.id for m in before]
    assert len(after) == 18 and "ORD-10002" in after[-1].content
    # the first put after the restart re-sends all 18 messages: still one event each
    events = _message_events(second.weave, "support-7")
    assert sorted(e.payload["message_id"] for e in events) == sorted(m.id for m in after)


# --------------------------------------------------------------- branches
class Counted(TypedDict):
    n: int
    log: Annotated[list[int], operator.add]


def _counter_graph(saver: Any) -> Any:
    b = StateGraph(Counted)
    b.add_node("inc", lambda s: {"n": s["n"] + 1, "log": [s["n"] + 1]})
    b.add_edge(START, "inc")
    b.add_edge("inc", END)
    return b.compile(checkpointer=saver)


def _ancestors(saver: Any, config: Any) -> list[str]:
    """Checkpoint ids from ``config`` up the parent chain to the root."""
    out, tup = [], saver.get_tuple(config)
    while tup is not None:
        out.append(tup.config["configurable"]["checkpoint_id"])
        tup = saver.get_tuple(tup.parent_config) if tup.parent_config else None
    return out


def test_branches_fork_switch_and_tree(savers: Callable[..., Any]) -> None:
    saver = savers()
    graph = _counter_graph(saver)
    config = {"configurable": {"thread_id": "b1"}}
    graph.invoke({"n": 0, "log": []}, config)
    fork_point = saver.get_tuple(config).config
    graph.invoke({}, config)
    graph.invoke({}, config)
    main_head = saver.get_tuple(config).config["configurable"]["checkpoint_id"]
    assert graph.get_state(config).values == {"n": 3, "log": [1, 2, 3]}
    (implicit,) = saver.list_branches("b1")
    assert (implicit.name, implicit.active, implicit.head_checkpoint_id) == (
        "main",
        True,
        main_head,
    )

    branch = saver.fork(fork_point, "what-if")
    assert branch.active and branch.fork_point_id == fork_point["configurable"]["checkpoint_id"]
    assert graph.get_state(config).values == {"n": 1, "log": [1]}  # thread now at the fork
    graph.invoke({}, config)
    assert graph.get_state(config).values == {"n": 2, "log": [1, 2]}
    branches = {b.name: b for b in saver.list_branches("b1")}
    assert set(branches) == {"main", "what-if"} and branches["what-if"].active
    assert branches["main"].head_checkpoint_id == main_head
    alt_head = branches["what-if"].head_checkpoint_id
    # the new checkpoints descend from the fork point, not from main's head
    chain = _ancestors(saver, saver.get_tuple(config).config)
    assert branch.fork_point_id in chain and main_head not in chain
    assert chain.index(branch.fork_point_id) == 3  # one invoke: input, route, step

    saver.switch_branch("b1", "main")
    assert graph.get_state(config).values == {"n": 3, "log": [1, 2, 3]}
    tree = {n.checkpoint_id: n for n in saver.checkpoint_tree("b1")}
    assert tree[main_head].heads == ("main",) and tree[alt_head].heads == ("what-if",)
    assert all(tree[c].parent_checkpoint_id == p for c, p in zip(chain, chain[1:], strict=False))
    # the fork point has two children: the tree really branches there
    kids = [n for n in tree.values() if n.parent_checkpoint_id == branch.fork_point_id]
    assert len(kids) == 2

    with pytest.raises(ValueError, match="active"):
        saver.delete_branch("b1", "main")
    with pytest.raises(ValueError, match="already exists"):
        saver.fork(fork_point, "what-if")
    with pytest.raises(ValueError, match="no branch"):
        saver.switch_branch("b1", "nope")
    saver.delete_branch("b1", "what-if")
    assert [b.name for b in saver.list_branches("b1")] == ["main"]
    # copy_thread carries branches along with the checkpoints
    saver.copy_thread("b1", "b1-copy")
    assert [b.name for b in saver.list_branches("b1-copy")] == ["main"]
    copy = {"configurable": {"thread_id": "b1-copy"}}
    assert graph.get_state(copy).values == {"n": 3, "log": [1, 2, 3]}


# ------------------------------------------------------------------ prune
def _extend(state: list[int], writes: list[list[int]]) -> list[int]:
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class Items(TypedDict):
    """A DeltaChannel (beta): stored as a snapshot every 4th update, else rebuilt from writes."""

    items: Annotated[list[int], DeltaChannel(_extend, snapshot_frequency=4)]
    n: int


def _delta_graph(saver: Any) -> Any:
    b = StateGraph(Items)
    b.add_node("step", lambda s: {"items": [s["n"]], "n": s["n"] + 1})
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=saver)


def test_prune_keeps_what_a_delta_channel_needs(savers: Callable[..., Any]) -> None:
    saver = savers()
    graph = _delta_graph(saver)
    config = {"configurable": {"thread_id": "delta"}}
    graph.invoke({"n": 0, "items": []}, config)
    for _ in range(9):
        graph.invoke({}, config)
    want = list(range(10))
    assert graph.get_state(config).values["items"] == want
    # the chain a DeltaChannel replays: latest back to the nearest stored snapshot
    chain, tup = [], saver.get_tuple(config)
    while tup is not None:
        chain.append(tup.config["configurable"]["checkpoint_id"])
        if "items" in tup.checkpoint["channel_values"]:
            break
        tup = saver.get_tuple(tup.parent_config) if tup.parent_config else None
    before = len(list(saver.list(config)))
    assert 1 < len(chain) < before

    saver.prune(["delta"])
    kept = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
    assert sorted(kept) == sorted(chain)
    assert graph.get_state(config).values["items"] == want  # rebuilt from what was kept
    graph.invoke({}, config)
    assert graph.get_state(config).values["items"] == [*want, 10]

    # a thread without delta channels keeps exactly its newest checkpoint
    plain = _counter_graph(saver)
    cfg2 = {"configurable": {"thread_id": "plain"}}
    plain.invoke({"n": 0, "log": []}, cfg2)
    plain.invoke({}, cfg2)
    saver.prune(["plain"])
    assert len(list(saver.list(cfg2))) == 1
    assert plain.get_state(cfg2).values == {"n": 2, "log": [1, 2]}
    with pytest.raises(ValueError, match="strategy"):
        saver.prune(["plain"], strategy="keep_everything")


def test_prune_keep_last_n_and_by_age(savers: Callable[..., Any]) -> None:
    """Retention: the newest N per thread, none older than an age; the newest always stays."""
    saver = savers()
    plain = _counter_graph(saver)
    cfg = {"configurable": {"thread_id": "aged"}}
    plain.invoke({"n": 0, "log": []}, cfg)
    for _ in range(3):
        plain.invoke({}, cfg)
    time.sleep(0.05)
    mark = time.time()
    time.sleep(0.05)
    for _ in range(3):
        plain.invoke({}, cfg)
    ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg)]  # newest first
    assert len(ids) >= 7
    saver.store.prune(["aged"], limits=PruneLimits(keep_last=len(ids), max_age_days=30,
                                                   now=mark + 30 * 86_400))  # fmt: skip
    left = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg)]
    assert 3 <= len(left) < len(ids) and left == ids[: len(left)]  # only the young ones
    saver.store.prune(["aged"], limits=PruneLimits(keep_last=2))
    assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg)] == ids[:2]
    far = PruneLimits(keep_last=5, max_age_days=1, now=time.time() + 400 * 86_400)
    saver.store.prune(["aged"], limits=far)
    assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg)] == ids[:1]
    assert plain.get_state(cfg).values == {"n": 7, "log": [1, 2, 3, 4, 5, 6, 7]}
    with pytest.raises(ValueError, match="keep_last"):
        saver.store.prune(["aged"], limits=PruneLimits(keep_last=0))


# --------------------------------------------------------------- metadata
def _put(saver: Any, thread: str, metadata: dict[str, Any], parent: Any = None) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [AIMessage(content="hi", id=f"a-{cp['id']}")]}
    cp["channel_versions"] = {"messages": saver.get_next_version(None, None)}
    conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if parent is not None:
        conf["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    return saver.put(conf, cp, metadata, dict(cp["channel_versions"]))


def test_metadata_filters_and_exact_round_trip(savers: Callable[..., Any]) -> None:
    saver = savers(record_messages=False)
    when = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc)
    a = _put(saver, "m", {"source": "input", "step": -1, "info": {"kind": "a", "n": 2}})
    b = _put(saver, "m", {"source": "loop", "step": 0, "info": {"kind": "b"}, "when": when}, a)
    c = _put(saver, "m", {"source": "loop", "step": 1, "flag": True, "score": 0.5}, b)

    def ids(**kw: Any) -> list[str]:
        conf = {"configurable": {"thread_id": "m"}}
        return [t.config["configurable"]["checkpoint_id"] for t in saver.list(conf, **kw)]

    cid = {k: v["configurable"]["checkpoint_id"] for k, v in {"a": a, "b": b, "c": c}.items()}
    assert ids() == [cid["c"], cid["b"], cid["a"]]
    assert ids(filter={"source": "loop"}) == [cid["c"], cid["b"]]
    assert ids(filter={"info.kind": "a"}) == [cid["a"]]  # a path into nested metadata
    assert ids(filter={"info": {"n": 2, "kind": "a"}}) == [cid["a"]]  # key order is irrelevant
    assert ids(filter={"flag": True, "score": 0.5}) == [cid["c"]]
    assert ids(filter={"flag": None}) == [cid["b"], cid["a"]]  # absent counts as null
    assert ids(filter={"source": "loop"}, limit=1) == [cid["c"]]
    assert ids(before=b) == [cid["a"]]
    # a value JSON cannot hold comes back exactly (serde), and filters still work on the rest
    got = saver.get_tuple(b)
    assert got.metadata["when"] == when and isinstance(got.metadata["when"], dt.datetime)
    assert ids(filter={"info.kind": "b"}) == [cid["b"]]
    with pytest.raises(ValueError, match="invalid filter key"):
        ids(filter={"source') OR 1=1 --": "x"})
    # pending writes round-trip typed values in writes_sort_key order
    saver.put_writes(c, [("messages", ToolMessage("r", tool_call_id="x")), ("n", 3)], "task-b")
    saver.put_writes(c, [("n", 1)], "task-a")
    writes = saver.get_tuple(c).pending_writes
    assert [(w[0], w[1]) for w in writes] == [
        ("task-a", "n"),
        ("task-b", "messages"),
        ("task-b", "n"),
    ]
    assert isinstance(writes[1][2], ToolMessage) and writes[1][2].tool_call_id == "x"


def test_tenants_do_not_see_each_other(savers: Callable[..., Any]) -> None:
    alice, bob = savers(f"a-{uuid.uuid4().hex[:8]}"), savers(f"b-{uuid.uuid4().hex[:8]}")
    conf = {"configurable": {"thread_id": "shared-name"}}
    stored = _put(alice, "shared-name", {"source": "input", "step": -1})
    assert bob.get_tuple(conf) is None and list(bob.list(None)) == []
    assert bob.get_tuple(stored) is None
    bob.delete_thread("shared-name")
    bob.prune(["shared-name"], strategy="delete")
    bob.copy_thread("shared-name", "stolen")
    assert list(bob.list({"configurable": {"thread_id": "stolen"}})) == []
    assert alice.get_tuple(conf).config == stored
    assert [t.config for t in alice.list(None)] == [stored]


def test_delete_thread_hides_keeps_or_purges_the_events(savers: Callable[..., Any]) -> None:
    """By default the thread's events are hidden from every read; kept or purged on request."""
    hide, keep, purge = savers(), savers(delete_events="keep"), savers(delete_events=True)
    config = {"configurable": {"thread_id": "gone"}}
    for saver in (hide, keep, purge):
        agent = create_react_agent(fake_model(1), TOOLS, checkpointer=saver)
        n = len(_run_turns(agent, config, range(1))["messages"])
        assert len(_message_events(saver.weave, "gone")) == n == 6
        saver.delete_thread("gone")
        assert saver.get_tuple(config) is None and list(saver.list(config)) == []
    assert len(_message_events(keep.weave, "gone")) == 6
    assert hide.weave.store.timeline("gone") == []
    assert len(hide.weave.store.timeline("gone", include_inactive=True)) >= 6
    assert purge.weave.store.timeline("gone", include_inactive=True) == []


def test_a_task_writing_again_keeps_its_writes_and_replaces_its_error(
    savers: Callable[..., Any],
) -> None:
    """A task re-run after a resume sends its writes again: regular ones keep the
    first value (as SqliteSaver's INSERT OR IGNORE), special ones (an error) are
    replaced; nothing is duplicated."""
    from langgraph.checkpoint.base import WRITES_IDX_MAP

    ERROR = "__error__"  # LangGraph's error channel (its constant is private since 1.0)
    assert ERROR in WRITES_IDX_MAP  # a special write: replaced, not kept

    saver = savers(record_messages=False)
    c = _put(saver, "rerun", {"source": "loop", "step": 0})
    saver.put_writes(c, [("basket", "pears"), (ERROR, "first failure")], "picker")
    saver.put_writes(c, [("basket", "plums"), (ERROR, "second failure")], "picker")
    saver.put_writes(c, [("basket", "figs")], "packer")
    writes = {(w[0], w[1]): w[2] for w in saver.get_tuple(c).pending_writes}
    assert writes == {
        ("picker", "basket"): "pears",
        ("picker", ERROR): "second failure",
        ("packer", "basket"): "figs",
    }
