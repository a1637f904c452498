"""Summarizers behind one protocol: any chat model, or none at all.

The compactor only needs "turn these edited lines into shorter text, and keep these
values if you can".  :class:`LLMSummarizer` asks a LangChain ``BaseChatModel`` or a
LlamaIndex ``LLM`` with a structured prompt; :class:`ExtractiveSummarizer` keeps the
sentences that carry numbers, identifiers, constraints and decisions, offline and in
microseconds.  Both are checked the same way afterwards (verified retention).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from beeweave_core.context.editing import SourceLine
from beeweave_core.text import language as L


@runtime_checkable
class Summarizer(Protocol):
    """Turns edited source lines into a summary; ``must_keep`` lists values to keep."""

    name: str

    def summarize(self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()) -> str: ...

    async def asummarize(
        self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()
    ) -> str: ...


# ---------------------------------------------------------------- extractive
def sentence_weight(sentence: str, role: str) -> float:
    """How much a sentence carries: values, constraint/decision/preference cues, todos."""
    if L.is_ack(sentence) or L.is_transient(sentence):
        return 0.0
    values = L.key_values(sentence)
    if L.is_question(sentence) and not values:
        return 0.0  # an open question lives in the working state, not in a summary
    w = 0.0
    if values:
        w += 2.0
    if L.CONSTRAINT.search(sentence) or L.IMPERATIVE.search(sentence):
        w += 1.5
    if L.DECISION.search(sentence) or L.PREFERENCE.search(sentence):
        w += 1.5
    if L.TODO.search(sentence) or L.reason_of(sentence):
        w += 1.0
    if role == "user":
        w += 0.5
    return w


class ExtractiveSummarizer:
    """Offline summarizer: the sentences worth keeping, verbatim, one line per turn.

    A sentence is kept when it carries a number, an identifier or quoted value, or a
    constraint / decision / preference / todo cue (English and Chinese).  Tool lines
    are already digests (``name(args) → key fields``) and are always kept.  Nothing is
    paraphrased, so what is kept is exactly what was said.
    """

    name = "extractive"

    def __init__(self, *, min_weight: float = 1.5) -> None:
        self.min_weight = min_weight

    def summarize(self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()) -> str:
        out: list[str] = []
        seen: set[str] = set()
        for line in lines:
            if line.role == "tool":
                kept = [line.text]
            else:
                kept = []
                for s in L.sentences(line.text):
                    f = L.fold(s)
                    if f in seen:
                        continue
                    forced = any(L.value_present(v, f) for v in must_keep)
                    if forced or sentence_weight(s, line.role) >= self.min_weight:
                        kept.append(s)
                        seen.add(f)
            if kept:
                out.append(f"- #{line.seq} {line.role}: {' '.join(kept)}")
        return "\n".join(out)

    async def asummarize(
        self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()
    ) -> str:
        return self.summarize(lines, must_keep=must_keep)


# ----------------------------------------------------------------------- LLM
SUMMARY_SYSTEM_PROMPT = """You compress part of a conversation between a user and an AI agent \
into notes the agent will rely on later instead of the original turns.

Keep, word for word: every number with its unit, identifier, file name, URL, quoted string \
and the wording of every constraint ("must", "never", "at most ...").
Write short "- " bullets under these headings, leaving out empty ones:
Goal / Constraints / Preferences / Confirmed parameters / Decisions (with their reasons) / \
Done (with key parameters and results) / Todos / Open questions.
Leave out: greetings, acknowledgements, chatter, raw tool dumps (keep only their key results), \
and plans the user later overturned.
Reply with the notes only."""


def _lines_text(lines: Sequence[SourceLine]) -> str:
    return "\n".join(line.render() for line in lines)


def build_prompt(lines: Sequence[SourceLine], must_keep: Sequence[str] = ()) -> str:
    seqs = [ln.seq for ln in lines]
    head = f"Conversation turns #{min(seqs)}-#{max(seqs)}:\n" if seqs else "Conversation:\n"
    body = head + _lines_text(lines)
    if must_keep:
        body += (
            "\n\nYour previous notes lost these values; they MUST appear verbatim this time: "
            + ", ".join(must_keep)
        )
    return body


def _text_of(out: Any) -> str:
    """Text of a LangChain message, a LlamaIndex response, or a plain string."""
    if isinstance(out, str):
        return out
    msg = getattr(out, "message", None)  # LlamaIndex ChatResponse
    if msg is not None and hasattr(msg, "content"):
        return str(msg.content or "")
    content = getattr(out, "content", None)  # LangChain AIMessage
    if isinstance(content, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
    if content is not None:
        return str(content)
    text = getattr(out, "text", None)  # LlamaIndex CompletionResponse
    return str(text if text is not None else out)


def _is_llamaindex_llm(llm: Any) -> bool:
    try:
        from llama_index.core.base.llms.base import BaseLLM
    except ImportError:  # LlamaIndex not installed
        return False
    return isinstance(llm, BaseLLM)


def _li_messages(system: str, user: str) -> list[Any]:
    from llama_index.core.llms import ChatMessage

    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


def _lc_messages(system: str, user: str) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    return [SystemMessage(content=system), HumanMessage(content=user)]


def call_llm(llm: Any, system: str, user: str) -> str:
    """One chat turn with a LangChain chat model / runnable or a LlamaIndex LLM."""
    if _is_llamaindex_llm(llm):
        return _text_of(llm.chat(_li_messages(system, user)))
    if hasattr(llm, "invoke"):
        return _text_of(llm.invoke(_lc_messages(system, user)))
    if callable(llm):
        return _text_of(llm(system + "\n\n" + user))
    raise TypeError(
        f"unsupported LLM {type(llm).__name__}: pass a LangChain BaseChatModel or a LlamaIndex LLM"
    )


async def acall_llm(llm: Any, system: str, user: str) -> str:
    if _is_llamaindex_llm(llm):
        return _text_of(await llm.achat(_li_messages(system, user)))
    if hasattr(llm, "ainvoke"):
        return _text_of(await llm.ainvoke(_lc_messages(system, user)))
    return await asyncio.to_thread(call_llm, llm, system, user)


class LLMSummarizer:
    """Summaries written by a chat model, with a structured prompt.

    ``llm`` is any LangChain ``BaseChatModel`` (``ChatOpenAI``, ``ChatOllama`` …) or
    LlamaIndex ``LLM``; neither package is imported unless that kind of model is
    passed.  The compactor checks every summary for lost values and asks again with
    the missing ones named (``must_keep``), so a model that paraphrases ``17 seconds``
    into "a short timeout" is caught, not trusted.
    """

    def __init__(self, llm: Any, *, system_prompt: str = SUMMARY_SYSTEM_PROMPT) -> None:
        if llm is None:
            raise ValueError("LLMSummarizer needs a chat model (LangChain or LlamaIndex)")
        self.llm = llm
        self.system_prompt = system_prompt
        self.name = f"llm:{getattr(llm, 'model_name', None) or getattr(llm, 'model', None) or type(llm).__name__}"

    def summarize(self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()) -> str:
        if not lines:
            return ""
        return call_llm(self.llm, self.system_prompt, build_prompt(lines, must_keep)).strip()

    async def asummarize(
        self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()
    ) -> str:
        if not lines:
            return ""
        return (
            await acall_llm(self.llm, self.system_prompt, build_prompt(lines, must_keep))
        ).strip()
