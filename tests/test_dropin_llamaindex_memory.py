"""``BeeWeaveChatMemory`` next to ``ChatMemoryBuffer``: the same calls, with no arguments,
give the same messages and the same surface (``chat_store_key``, ``to_string`` /
``from_string``).  No LLM is involved; SQLite and the offline embeddings are real."""

from __future__ import annotations

import json

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer

from beeweave_llamaindex.memory import BeeWeaveChatMemory

TURNS = [
    ChatMessage(role=MessageRole.USER, content="The greenhouse door sticks in damp weather."),
    ChatMessage(role=MessageRole.ASSISTANT, content="Plane the bottom edge a little."),
    ChatMessage(role=MessageRole.USER, content="Which tool for that?"),
]


def _seen(memory) -> list[tuple[str, str]]:
    return [(m.role.value, m.content) for m in memory.get()]


def test_from_defaults_with_no_arguments_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "home"))
    buf = ChatMemoryBuffer.from_defaults()
    bee = BeeWeaveChatMemory.from_defaults()
    try:
        assert bee.chat_store_key == bee.session_id and bee.session_id
        assert bee.token_limit == buf.token_limit
        for m in TURNS:
            buf.put(m)
            bee.put(m)
        assert _seen(bee) == _seen(buf)
        assert [m.content for m in bee.get_all()] == [m.content for m in buf.get_all()]
        bee.reset()
        buf.reset()
        assert bee.get() == buf.get() == []
    finally:
        bee.weave.close()


def test_chat_store_key_names_the_session_and_string_round_trip(weave_factory):
    weave = weave_factory()
    bee = BeeWeaveChatMemory.from_defaults(
        weave=weave, chat_store_key="greenhouse", token_limit=900
    )
    buf = ChatMemoryBuffer.from_defaults(chat_store_key="greenhouse", token_limit=900)
    assert bee.chat_store_key == buf.chat_store_key == "greenhouse"
    for m in TURNS:
        bee.put(m)
        buf.put(m)
    text = bee.to_string()
    assert json.loads(text)["session_id"] == "greenhouse"
    again = BeeWeaveChatMemory.from_string(text, weave=weave)
    assert (again.session_id, again.token_limit) == ("greenhouse", 900)
    assert _seen(again) == _seen(
        buf
    )  # (ChatMemoryBuffer.to_string raises once it holds messages, with this pydantic)


def test_from_string_reopens_the_store_it_names(tmp_path):
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    from beeweave_core.weave import Weave

    with Weave.open(url, tenant="t1", spool_dir=tmp_path / "spool") as weave:
        first = BeeWeaveChatMemory.from_defaults(weave=weave, session_id="door")
        first.put(TURNS[0])
        text = first.to_string()
    again = BeeWeaveChatMemory.from_string(text)
    try:
        assert again.weave.url == url and again.weave.tenant == "t1"
        assert [m.content for m in again.get_all()] == [TURNS[0].content]
    finally:
        again.weave.close()
