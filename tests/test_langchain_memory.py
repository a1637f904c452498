"""BeeWeaveMemory: a legacy chain that used ConversationBufferMemory works unchanged after
the swap, within a token limit, across processes.  The LLMs are FAKE (labelled)."""

from __future__ import annotations

import uuid

import pytest
from langchain_classic.chains import ConversationChain, LLMChain
from langchain_classic.memory import ConversationBufferMemory
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler

from beeweave_core.tokens import TokenCounter
from beeweave_langchain.memory import BeeWeaveMemory
from beeweave_langchain.messages import messages_to_dicts
from beeweave_langchain.testing import FakeToolCallingChatModel

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

QUESTIONS = ["Hi, I'm Ana.", "I need a nightly ETL job.", "What's my name?"]
ANSWERS = ["Hello Ana!", "Sure, nightly it is.", "Your name is Ana."]


def llm_prompts(tracer: RunCollectorCallbackHandler) -> list[str]:
    out: list[str] = []
    stack = list(reversed(tracer.traced_runs))
    while stack:
        run = stack.pop()
        if run.run_type == "llm":
            out.append(run.inputs["prompts"][0])
        stack.extend(reversed(run.child_runs))
    return out


def run_chain(memory) -> tuple[list[str], list[str]]:
    chain = ConversationChain(llm=FakeListLLM(responses=list(ANSWERS)), memory=memory)  # FAKE LLM
    tracer = RunCollectorCallbackHandler()  # langchain_core's own tracer, to see the prompts
    outs = [
        chain.invoke({"input": q}, config={"callbacks": [tracer]})["response"] for q in QUESTIONS
    ]
    return outs, llm_prompts(tracer)


def test_conversation_chain_works_unchanged_after_the_swap(weave_factory, backend):
    weave = weave_factory(backend)
    buf_out, buf_prompts = run_chain(ConversationBufferMemory())
    bee_out, bee_prompts = run_chain(BeeWeaveMemory(weave=weave, session_id="s-conv"))
    assert bee_out == buf_out == ANSWERS
    assert len(bee_prompts) == len(buf_prompts) == len(QUESTIONS)
    # every earlier turn the buffer memory showed the model, BeeWeave showed too, in order
    for buf, bee in zip(buf_prompts, bee_prompts, strict=True):
        history = buf.split("Current conversation:\n", 1)[1].rsplit("\nHuman:", 1)[0]
        lines = [x for x in history.splitlines() if x.strip()]
        positions = [bee.find(x) for x in lines]
        assert all(p >= 0 for p in positions) and positions == sorted(positions)
    assert "Human: Hi, I'm Ana.\nAI: Hello Ana!" in bee_prompts[2]


def test_llm_chain_with_custom_keys_and_prefixes(weave_factory):
    weave = weave_factory()
    memory = BeeWeaveMemory(weave=weave, session_id="s-keys", memory_key="chat_history",
                            input_key="question", human_prefix="User", ai_prefix="Bot")  # fmt: skip
    prompt = PromptTemplate.from_template("{chat_history}\nUser: {question}\nBot:")
    chain = LLMChain(llm=FakeListLLM(responses=["42.", "Still 42."]), prompt=prompt, memory=memory)
    chain.invoke({"question": "Answer?"})
    chain.invoke({"question": "Again?"})
    assert memory.memory_variables == ["chat_history"]
    text = memory.load_memory_variables({"question": "x"})["chat_history"]
    assert "User: Answer?\nBot: 42.\nUser: Again?\nBot: Still 42." in text


def test_return_messages_with_a_chat_prompt(weave_factory):
    weave = weave_factory()
    memory = BeeWeaveMemory(weave=weave, session_id="s-msgs", return_messages=True)
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{input}")]
    )
    model = FakeToolCallingChatModel(messages=iter(["Hello Ana!", "Ana."]))  # FAKE LLM
    chain = ConversationChain(llm=model, prompt=prompt, memory=memory)
    chain.invoke({"input": "I'm Ana"})
    chain.invoke({"input": "Who am I?"})
    sent = model.received[1]
    assert [(type(m), m.content) for m in sent[-3:]] == [
        (HumanMessage, "I'm Ana"), (AIMessage, "Hello Ana!"), (HumanMessage, "Who am I?"),
    ]  # fmt: skip
    loaded = memory.load_memory_variables({"input": "x"})["history"]
    assert all(isinstance(m, BaseMessage) for m in loaded)


def test_context_stays_within_the_token_limit(weave_factory):
    weave = weave_factory()
    limit = 400
    bee = BeeWeaveMemory(weave=weave, session_id="s-limit", max_token_limit=limit)
    buf = ConversationBufferMemory()
    turns = [(f"Status update {i}: copied partition p{i} of the orders table.", f"Ok, p{i} done.")
              for i in range(40)]  # fmt: skip
    for q, a in turns:
        bee.save_context({"input": q}, {"response": a})
        buf.save_context({"input": q}, {"response": a})
    counter = TokenCounter()
    messages = BeeWeaveMemory(weave=weave, session_id="s-limit", max_token_limit=limit,
                              return_messages=True).load_memory_variables({"input": "batch size?"})  # fmt: skip
    sent = counter.count_messages(messages_to_dicts(messages["history"]))
    assert sent <= limit
    assert counter.count_text(buf.load_memory_variables({})["history"]) > 2 * limit
    text = bee.load_memory_variables({"input": "what batch size and time limit?"})["history"]
    assert text.rstrip().endswith(
        "Human: Status update 39: copied partition p39 of the orders table.\nAI: Ok, p39 done."
    )  # the latest turn, verbatim
    assert bee.last_context.total_tokens <= limit


def test_turns_survive_the_process_and_clear_hides_them(weave_factory, backend):
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    w1 = weave_factory(backend, tenant=tenant)
    BeeWeaveMemory(weave=w1, session_id="s-p").save_context({"input": "remember JOB-7731"},
                                                            {"output": "Remembered."})  # fmt: skip
    w1.close()
    w2 = weave_factory(backend, tenant=tenant)
    m2 = BeeWeaveMemory(weave=w2, session_id="s-p")
    assert "Human: remember JOB-7731\nAI: Remembered." in m2.load_memory_variables({})["history"]
    assert [m.content for m in m2.chat_memory.messages] == ["remember JOB-7731", "Remembered."]
    m2.clear()
    assert m2.load_memory_variables({})["history"] == ""


def test_bad_input_gets_clear_errors(weave_factory):
    weave = weave_factory()
    memory = BeeWeaveMemory(weave=weave, session_id="s-bad")
    with pytest.raises(ValueError, match="multiple output keys"):
        memory.save_context({"input": "q"}, {"a": "1", "b": "2"})
    with pytest.raises(ValueError, match="One input key expected"):
        memory.save_context({"input": "q", "other": "x"}, {"output": "a"})
    with pytest.raises(ValueError, match="max_token_limit"):
        BeeWeaveMemory(weave=weave, session_id="s-bad", max_token_limit=0)
    assert memory.chat_memory.messages == []  # nothing half-written


async def test_async_load_and_save(weave_factory):
    weave = weave_factory()
    memory = BeeWeaveMemory(weave=weave, session_id="s-async")
    await memory.asave_context({"input": "ping"}, {"output": "pong"})
    loaded = await memory.aload_memory_variables({"input": "again"})
    assert "Human: ping\nAI: pong" in loaded["history"]
    await memory.aclear()
    assert (await memory.aload_memory_variables({}))["history"] == ""
