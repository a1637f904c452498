"""Summarizers behind one protocol: any chat model, or none at all.

The compactor only needs "turn these edited lines into shorter text, and keep these
values if you can".  :class:`LLMSummarizer` asks an LLM (any
:class:`~beeweave_core.llm.TextLLM`) with a structured prompt;
:class:`ExtractiveSummarizer` keeps the sentences that carry numbers, identifiers,
constraints and decisions, offline and in microseconds.  Both are checked the same way afterwards (verified retention).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from beeweave_core.context.editing import SourceLine
from beeweave_core.llm import ADAPTERS_HINT, TextLLM, as_text_llm
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


class LLMSummarizer:
    """Summaries written by an LLM, with a structured prompt.

    ``llm`` is a :class:`~beeweave_core.llm.TextLLM` (a framework chat model wrapped by
    its integration package: ``beeweave_langchain.LangChainLLM``,
    ``beeweave_llamaindex.LlamaIndexLLM``) or a function ``str -> str``.  The compactor
    checks every summary for lost values and asks again with the missing ones named
    (``must_keep``), so a model that paraphrases ``17 seconds`` into "a short timeout"
    is caught, not trusted.
    """

    def __init__(
        self, llm: TextLLM | Callable[[str], str], *, system_prompt: str = SUMMARY_SYSTEM_PROMPT
    ) -> None:
        if llm is None:
            raise ValueError(f"LLMSummarizer needs an LLM: {ADAPTERS_HINT}")
        self.llm = as_text_llm(llm)
        self.system_prompt = system_prompt
        self.name = f"llm:{self.llm.name}"

    def summarize(self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()) -> str:
        if not lines:
            return ""
        return self.llm.complete(self.system_prompt, build_prompt(lines, must_keep)).strip()

    async def asummarize(
        self, lines: Sequence[SourceLine], *, must_keep: Sequence[str] = ()
    ) -> str:
        if not lines:
            return ""
        reply = await self.llm.acomplete(self.system_prompt, build_prompt(lines, must_keep))
        return reply.strip()
