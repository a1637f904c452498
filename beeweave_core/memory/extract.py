"""What a turn states, read by speech act (see :mod:`.acts`): the memory writer's input.

* a user's sentence that states something (a decision, a constraint, a preference, a
  fact) is a statement of that kind;
* a user's reply that only agrees ("yes", "go for it", "可以") turns what the assistant
  just proposed into the user's decision: the proposal's sentences that carry a value
  (or, when none does, its questions), sourced from both turns;
* a reply that only refuses records the proposal as turned down;
* everything else — tasks, questions, acknowledgements, small talk — states nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from beeweave_core.memory.acts import REPLIES, STATEMENTS, classify
from beeweave_core.text import language as L


@dataclass(frozen=True)
class Turn:
    """One user or assistant message."""

    id: str
    seq: int
    role: str  # user | assistant
    text: str


@dataclass(frozen=True)
class Statement:
    """A sentence to remember: its text, kind, the turns it stands on, whether the user
    said (or agreed to) it, and whether it was turned down."""

    text: str
    kind: str
    sources: tuple[str, ...]
    seq: int
    by_user: bool
    rejected: bool = False
    extractor: str = "acts"


def sentences_and_acts(text: str) -> list[tuple[str, str]]:
    """Each sentence of ``text`` with its act."""
    sents = L.sentences(text)
    return list(zip(sents, classify(sents), strict=True))


def statements(turn: Turn, before: Turn | None) -> list[Statement]:
    """What ``turn`` states; ``before`` is the assistant message it answers, if any."""
    if turn.role != "user":
        return []
    acts = sentences_and_acts(turn.text)
    said = [Statement(s, a, (turn.id,), turn.seq, True) for s, a in acts if a in STATEMENTS]
    if not acts or before is None or before.role != "assistant":
        return said
    kinds = [a for _s, a in acts]
    if kinds[0] not in REPLIES:  # a reply answers first ("no — …", "yes, and …")
        return said
    rejected = kinds[0] == "decline"
    taken = [
        Statement(
            p,
            kind if kind in STATEMENTS else "decision",
            (before.id, turn.id),
            turn.seq,
            True,
            rejected,
        )
        for p, kind in proposal(before.text)
    ]
    return taken + said


def proposal(text: str) -> list[tuple[str, str]]:
    """What an assistant message proposes, with each sentence's act: the questions it
    asks that carry a value ("shall I set it to 15%?"), else its questions.  A question
    with no value of its own ("Shall I?") asks about the sentence before it, so that
    sentence stands for it when it carries one.  A message that asks nothing proposes
    nothing: "ok" after a report acknowledges it."""
    acts = sentences_and_acts(text)
    asked: list[tuple[str, str]] = []
    for i, (s, a) in enumerate(acts):
        if a != "question":
            continue
        if not L.key_values(s) and i and L.key_values(acts[i - 1][0]):
            asked.append(acts[i - 1])
        else:
            asked.append((s, a))
    return [(s, a) for s, a in asked if L.key_values(s)] or asked


__all__ = ["Statement", "Turn", "proposal", "sentences_and_acts", "statements"]
