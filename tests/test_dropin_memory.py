"""``BeeWeaveMemory`` swapped into ConversationBufferMemory's own usage: same script, same
outputs, same attributes.  The LLM is FAKE (``FakeListLLM``, labelled); SQLite is real."""

from __future__ import annotations

import pytest
from langchain_classic.chains import ConversationChain
from langchain_classic.memory import ConversationBufferMemory
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage, HumanMessage

from beeweave_langchain.memory import BeeWeaveMemory

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

TURNS = ["Good morning, I keep bees on a roof.", "How many hives fit there?", "And in winter?"]
REPLIES = ["Lovely hobby.", "Two or three small ones.", "Wrap them against the wind."]


def script(memory) -> dict:
    """What a ConversationChain user does with its memory, and what they look at."""
    chain = ConversationChain(llm=FakeListLLM(responses=list(REPLIES)), memory=memory)  # FAKE
    outputs = [chain.invoke({"input": t})["response"] for t in TURNS]
    memory.save_context({"input": "one more"}, {"output": "noted"})
    seen = {
        "outputs": outputs,
        "buffer": memory.buffer,
        "buffer_as_str": memory.buffer_as_str,
        "buffer_as_messages": [(m.type, m.content) for m in memory.buffer_as_messages],
        "loaded": memory.load_memory_variables({"input": "next"}),
        "variables": memory.memory_variables,
        "settings": [getattr(memory, a) for a in ("memory_key", "human_prefix", "ai_prefix",
                                                  "return_messages", "input_key", "output_key")],
        "history": [(m.type, m.content) for m in memory.chat_memory.messages],
    }  # fmt: skip
    memory.clear()
    seen["after_clear"] = memory.buffer
    return seen


def test_conversation_chain_script_same_with_buffer_memory_and_beeweave_memory(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "home"))
    bee = BeeWeaveMemory()  # no arguments, as ConversationBufferMemory()
    assert bee.session_id and bee.weave is not None
    try:
        assert script(bee) == script(ConversationBufferMemory())
    finally:
        bee.weave.close()
    assert (tmp_path / "home" / "beeweave.db").exists()


def test_return_messages_and_prefixes_match(weave_factory):
    kw = {"return_messages": True, "human_prefix": "Keeper", "ai_prefix": "Guide"}
    bee = BeeWeaveMemory(weave=weave_factory(), **kw)
    buf = ConversationBufferMemory(**kw)
    for m in (bee, buf):
        m.save_context({"input": "Is propolis sticky?"}, {"output": "Very."})
    assert [(m.type, m.content) for m in bee.buffer] == [(m.type, m.content) for m in buf.buffer]
    assert bee.buffer_as_str == buf.buffer_as_str == "Keeper: Is propolis sticky?\nGuide: Very."


def test_a_given_chat_memory_is_read_and_mirrored_not_ignored(weave_factory):
    weave = weave_factory()
    given = InMemoryChatMessageHistory()
    given.add_messages([HumanMessage("My queen is marked blue."), AIMessage("Noted: blue.")])
    memory = BeeWeaveMemory(weave=weave, session_id="apiary", chat_memory=given)
    assert memory.chat_memory is given
    memory.save_context({"input": "Which colour?"}, {"output": "Blue."})
    expected = ["My queen is marked blue.", "Noted: blue.", "Which colour?", "Blue."]
    assert [m.content for m in given.messages] == expected
    weave.flush()
    stored = [e.content for e in weave.store.timeline("apiary")]
    assert stored == expected  # mirrored into the weave, each once
    assert "My queen is marked blue." in memory.load_memory_variables({"input": "x"})["history"]
