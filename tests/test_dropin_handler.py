"""The callback handler picks each run's session the way the host framework names it.

The chat model is FAKE (``FakeToolCallingChatModel``, labelled); RunnableWithMessageHistory,
LangGraph, the bus and SQLite are real.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from beeweave_core.events import EventType
from beeweave_langchain.callbacks import BeeWeaveCallbackHandler
from beeweave_langchain.testing import FakeToolCallingChatModel


def _user_texts(weave, session: str) -> list[str]:
    return [e.content for e in weave.store.timeline(session) if e.type == EventType.USER_MESSAGE]


def test_two_users_in_parallel_through_message_history_land_in_two_sessions(weave_factory):
    weave = weave_factory()
    handler = BeeWeaveCallbackHandler(weave)
    histories: dict[str, InMemoryChatMessageHistory] = {}
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{input}")]
    )
    model = FakeToolCallingChatModel(messages=iter(["hi there"] * 4))  # FAKE LLM
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda sid: histories.setdefault(sid, InMemoryChatMessageHistory()),
        input_messages_key="input",
        history_messages_key="history",
    )

    def ask(user: str) -> str:
        cfg = {"callbacks": [handler], "configurable": {"session_id": user}}
        return chain.invoke({"input": "hello"}, config=cfg).content

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(ask, ["alice", "bob"])) == ["hi there", "hi there"]
    weave.flush()
    assert _user_texts(weave, "alice") == ["hello"]
    assert _user_texts(weave, "bob") == ["hello"]  # not dropped as a duplicate of alice's
    assert "default" not in {s.session_id for s in weave.store.sessions()}
    assert handler.failures == 0


def test_session_sources_in_order_and_a_run_without_one_gets_its_own(weave_factory, caplog):
    weave = weave_factory()
    model = FakeToolCallingChatModel(messages=iter(["ok"] * 10))  # FAKE LLM
    chain = ChatPromptTemplate.from_messages([("human", "{q}")]) | model

    def ask(handler, q, **cfg):
        chain.invoke({"q": q}, config={"callbacks": [handler], **cfg})

    ask(BeeWeaveCallbackHandler(weave, session_id="fixed"), "one",
        configurable={"thread_id": "t1"})  # fmt: skip
    handler = BeeWeaveCallbackHandler(weave)
    ask(handler, "two", configurable={"thread_id": "t2", "session_id": "s2"})
    ask(handler, "three", configurable={"session_id": "s3"})
    ask(handler, "four", metadata={"beeweave_session_id": "m4"}, configurable={"thread_id": "x"})
    with caplog.at_level(logging.WARNING, logger="beeweave.langchain"):
        ask(handler, "five")
        ask(handler, "six")
    weave.flush()
    assert _user_texts(weave, "fixed") == ["one"]
    assert _user_texts(weave, "t2") == ["two"]
    assert _user_texts(weave, "s3") == ["three"]
    assert _user_texts(weave, "m4") == ["four"]
    own = sorted(s.session_id for s in weave.store.sessions() if s.session_id.startswith("run-"))
    assert len(own) == 2 and {t for s in own for t in _user_texts(weave, s)} == {"five", "six"}
    assert sum("names no session" in r.getMessage() for r in caplog.records) == 1
    assert handler.failures == 0
