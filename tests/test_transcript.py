"""The one transcript writer (``beeweave_core.transcript``) on real SQLite files: role
aliases, tool parenting with parallel calls, idempotent re-recording, REFERS_TO hand-off,
and the LangChain history and LlamaIndex memory paths minting the same graph."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock

from beeweave_core.context import record_messages
from beeweave_core.events import EdgeType, Event, EventType
from beeweave_core.transcript import Message, ToolCall, canonical_role, transcript_for
from beeweave_core.weave import Weave
from beeweave_langchain.history import BeeWeaveChatMessageHistory
from beeweave_llamaindex import BeeWeaveChatMemory


def open_weave(path: Path, tenant: str = "t-transcript") -> Weave:
    return Weave.open(f"sqlite:///{path}", tenant=tenant, spool_dir=path.parent / "spool",
                      index=False)  # fmt: skip


@pytest.fixture
def weave(tmp_path: Path) -> Iterator[Weave]:
    w = open_weave(tmp_path / "events.db")
    yield w
    w.close()


def graph(weave: Weave, session_id: str) -> list[tuple[str, EventType, tuple[str, ...]]]:
    assert weave.flush()
    return [(e.id, e.type, e.parents) for e in weave.store.timeline(session_id)]


def by_type(events: list[Event], t: EventType) -> list[Event]:
    return [e for e in events if e.type == t]


def test_role_aliases_fold_onto_four_roles_and_unknown_roles_are_refused(weave: Weave) -> None:
    assert [canonical_role(r) for r in ("human", "ai", "developer", "function", "chatbot")] == [
        "user", "assistant", "system", "tool", "assistant",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown role 'narrator'"):
        Message("narrator", "once upon a time")
    w = transcript_for(weave)
    w.record("s-roles", [
        Message("developer", "Answer in one line."),
        Message("human", "How tall is the lighthouse on the north pier?"),
        Message("ai", "", tool_calls=(ToolCall("q-1", "measure", {"object": "lighthouse"}),)),
        Message("function", "31 metres", tool_call_id="q-1"),
        Message("model", "It is 31 metres tall."),
    ])  # fmt: skip
    assert weave.flush()
    events = weave.store.timeline("s-roles")
    assert [(e.type, e.role) for e in events] == [
        (EventType.SYSTEM_PROMPT, "system"),
        (EventType.USER_MESSAGE, "user"),
        (EventType.ASSISTANT_MESSAGE, "assistant"),
        (EventType.TOOL_INVOCATION, "assistant"),
        (EventType.TOOL_RESULT, "tool"),
        (EventType.ASSISTANT_MESSAGE, "assistant"),
    ]
    with pytest.raises(ValueError, match="message 1: unknown role 'narrator'"):
        record_messages(weave.store, "s-roles", [{"role": "user", "content": "hi"},
                                                 {"role": "narrator", "content": "x"}])  # fmt: skip
    assert len(weave.store.timeline("s-roles")) == 6  # the bad list stored nothing


PARALLEL = [
    Message("user", "Compare the rent of flat 4B with flat 7C."),
    Message("assistant", "Looking both up.", tool_calls=(
        ToolCall("r-4b", "rent_of", {"flat": "4B"}), ToolCall("r-7c", "rent_of", {"flat": "7C"}))),
    Message("tool", '{"flat": "7C", "rent": 1385}', tool_call_id="r-7c"),  # answers arrive
    Message("tool", '{"flat": "4B", "rent": 1240}', tool_call_id="r-4b"),  # out of order
    Message("assistant", "7C costs 145 more per month than 4B."),
]  # fmt: skip


def test_parallel_tool_calls_are_parented_by_call_id(weave: Weave) -> None:
    ids = transcript_for(weave).record("s-par", PARALLEL)
    assert weave.flush()
    events = weave.store.timeline("s-par")
    ev = {e.id: e for e in events}
    user, ask, res_7c, res_4b, final = (ev[i] for i in ids if i)
    invs = by_type(events, EventType.TOOL_INVOCATION)
    assert [i.payload["tool_call_id"] for i in invs] == ["r-4b", "r-7c"]
    assert all(i.parents == (ask.id,) for i in invs)  # each call → the answer that asked
    inv_of = {i.payload["tool_call_id"]: i.id for i in invs}
    assert res_7c.parents == (inv_of["r-7c"],) and res_4b.parents == (inv_of["r-4b"],)
    assert ask.parents == (user.id,) and user.parents == ()
    assert final.parents == (res_7c.id, res_4b.id)  # the answer read both results
    assert ask.payload["tool_calls"][1] == {"id": "r-7c", "name": "rent_of", "args": {"flat": "7C"}}


def test_recording_the_same_conversation_again_adds_nothing(tmp_path: Path) -> None:
    w1 = open_weave(tmp_path / "events.db")
    transcript_for(w1).record("s-twice", PARALLEL)
    first = graph(w1, "s-twice")
    transcript_for(w1).record("s-twice", PARALLEL)  # the whole conversation re-sent
    assert graph(w1, "s-twice") == first
    w1.close()
    w2 = open_weave(tmp_path / "events.db")  # a new process: nothing remembered in memory
    transcript_for(w2).record("s-twice", [*PARALLEL, Message("user", "Thanks.")])
    again = graph(w2, "s-twice")
    assert again[: len(first)] == first and len(again) == len(first) + 1
    w2.close()
    assert len(first) == 7  # 5 messages + 2 invocations


def test_same_words_twice_are_two_events_but_one_observer_resending_is_not(weave: Weave) -> None:
    w = transcript_for(weave)
    turn = [Message("user", "ok"), Message("assistant", "Noted."), Message("user", "ok")]
    a = w.record("s-ok", turn)
    b = w.record("s-ok", turn)
    assert a == b and len(set(a)) == 3
    assert weave.flush()
    assert [e.content for e in weave.store.timeline("s-ok")] == ["ok", "Noted.", "ok"]


def test_a_tool_call_reusing_an_earlier_value_refers_to_that_result(weave: Weave) -> None:
    w = transcript_for(weave)
    w.record("s-ref", [
        Message("user", "Cancel my last parcel."),
        Message("assistant", "", tool_calls=(ToolCall("p-1", "last_parcel", {}),)),
        Message("tool", '{"parcel": "PX-55120", "status": "in transit"}', tool_call_id="p-1"),
        Message("assistant", "", tool_calls=(ToolCall("p-2", "cancel", {"parcel": "PX-55120"}),)),
    ])  # fmt: skip
    assert weave.flush()
    events = weave.store.timeline("s-ref")
    (result,) = by_type(events, EventType.TOOL_RESULT)
    cancel = by_type(events, EventType.TOOL_INVOCATION)[-1]
    refs = weave.store.edges(event_id=cancel.id, types=[EdgeType.REFERS_TO])
    assert [e.dst for e in refs] == [result.id]


def test_record_messages_wires_results_to_calls_recorded_by_an_earlier_call(weave: Weave) -> None:
    call = {"id": "k-1", "type": "function",
            "function": {"name": "lookup_bin_day", "arguments": '{"street": "Elm Row"}'}}  # fmt: skip
    first = record_messages(weave.store, "s-split", [
        {"role": "user", "content": "When is bin day on Elm Row?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ], key_prefix="a")  # fmt: skip
    (result_id,) = record_messages(weave.store, "s-split", [
        {"role": "tool", "tool_call_id": "k-1", "content": "Thursday"},
    ], key_prefix="b")  # fmt: skip
    ev = {e.id: e for e in weave.store.timeline("s-split")}
    inv = ev[first[2]]
    assert inv.type == EventType.TOOL_INVOCATION and ev[result_id].parents == (inv.id,)
    # a key prefix makes it idempotent; without one every call is a new conversation
    assert record_messages(weave.store, "s-split", [
        {"role": "tool", "tool_call_id": "k-1", "content": "Thursday"}], key_prefix="b",
    ) == [result_id]  # fmt: skip
    fresh = record_messages(weave.store, "s-split", [{"role": "user", "content": "thanks"}])
    assert fresh != record_messages(weave.store, "s-split", [{"role": "user", "content": "thanks"}])


def langchain_conversation() -> list[Any]:
    calls = [
        {"name": "rent_of", "args": {"flat": "4B"}, "id": "r-4b", "type": "tool_call"},
        {"name": "rent_of", "args": {"flat": "7C"}, "id": "r-7c", "type": "tool_call"},
    ]
    return [
        HumanMessage("Compare the rent of flat 4B with flat 7C."),
        AIMessage("Looking both up.", tool_calls=calls),
        ToolMessage('{"rent": 1240}', tool_call_id="r-4b"),
        ToolMessage('{"rent": 1385}', tool_call_id="r-7c"),
        AIMessage("7C costs 145 more per month than 4B."),
        HumanMessage("ok"),
        AIMessage("Anything else?"),
        HumanMessage("ok"),
    ]


def llamaindex_conversation() -> list[ChatMessage]:
    blocks = [
        TextBlock(text="Looking both up."),
        ToolCallBlock(tool_call_id="r-4b", tool_name="rent_of", tool_kwargs={"flat": "4B"}),
        ToolCallBlock(tool_call_id="r-7c", tool_name="rent_of", tool_kwargs={"flat": "7C"}),
    ]
    return [
        ChatMessage(role="user", content="Compare the rent of flat 4B with flat 7C."),
        ChatMessage(role="assistant", blocks=blocks),
        ChatMessage(role="tool", content='{"rent": 1240}', additional_kwargs={"tool_call_id": "r-4b"}),
        ChatMessage(role="tool", content='{"rent": 1385}', additional_kwargs={"tool_call_id": "r-7c"}),
        ChatMessage(role="assistant", content="7C costs 145 more per month than 4B."),
        ChatMessage(role="user", content="ok"),
        ChatMessage(role="assistant", content="Anything else?"),
        ChatMessage(role="user", content="ok"),
    ]  # fmt: skip


def test_langchain_history_and_llamaindex_memory_mint_the_same_graph(tmp_path: Path) -> None:
    """The same conversation through each framework's own component, each into its own
    SQLite file, gives the same event ids, types and parents: one key scheme."""
    lc = open_weave(tmp_path / "lc" / "events.db")
    BeeWeaveChatMessageHistory(lc, "s-same").add_messages(langchain_conversation())
    li = open_weave(tmp_path / "li" / "events.db")
    memory = BeeWeaveChatMemory.from_defaults(weave=li, session_id="s-same")
    for m in llamaindex_conversation():  # one put at a time, as an agent does
        memory.put(m)
    lc_graph, li_graph = graph(lc, "s-same"), graph(li, "s-same")
    assert [t for _, t, _ in lc_graph].count(EventType.TOOL_INVOCATION) == 2
    assert len(lc_graph) == 10 and lc_graph == li_graph
    # and each framework reads its own messages back
    assert [m.content for m in BeeWeaveChatMessageHistory(lc, "s-same").messages][-3:] == [
        "ok", "Anything else?", "ok",
    ]  # fmt: skip
    assert [m.content for m in memory.get_all()][-3:] == ["ok", "Anything else?", "ok"]
    lc.close()
    li.close()


def test_a_weave_builds_and_owns_its_one_writer(tmp_path: Path) -> None:
    """No registry beside the weaves: each weave holds its writer, and every integration
    asking for it (``transcript_for``) gets that one."""
    first, second = open_weave(tmp_path / "a.db"), open_weave(tmp_path / "b.db")
    try:
        assert transcript_for(first) is first.transcript is transcript_for(first)
        assert first.transcript is not second.transcript
        transcript_for(first).record("s-own", [Message("user", "Hello there.")])
        first.flush()
        assert [e.content for e in first.store.timeline("s-own")] == ["Hello there."]
        assert second.store.timeline("s-own") == []
    finally:
        first.close()
        second.close()
