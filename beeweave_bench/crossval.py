"""Leave-one-group-out cross-validation: choose settings on some groups, report on the rest.

A benchmark over a handful of conversations can be won by tuning to them; the honest
figure is the one measured on a conversation the choice never saw.  Each group (a
conversation) is held out in turn: the candidate with the best mean score over the
other groups' questions is chosen, and that candidate's score on the held-out group is
what gets reported.  A candidate is only a name here: the caller scores each one on
each question beforehand, so choosing costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: One candidate's per-question scores, by group (a question's score: higher is better).
Scores = Mapping[str, Sequence[float]]


@dataclass(frozen=True)
class Fold:
    """One held-out group: what was chosen without it, and how that did on and off it."""

    held_out: str
    chosen: str
    dev: float  # the chosen candidate's mean over the other groups' questions
    held: float  # its mean over the held-out group's questions


def mean_over(scores: Scores, groups: Sequence[str]) -> float:
    """Mean per-question score over ``groups`` pooled (a large group counts more)."""
    values = [v for g in groups for v in scores.get(g, ())]
    return sum(values) / len(values) if values else float("nan")


def choose(table: Mapping[str, Scores], groups: Sequence[str]) -> str:
    """The candidate with the best pooled mean over ``groups``.

    Ties go to the earlier candidate, so a grid listed from the simplest setting on
    prefers it unless another is strictly better.
    """
    if not table:
        raise ValueError("no candidates to choose from")
    best, best_score = "", float("-inf")
    for name, scores in table.items():
        score = mean_over(scores, groups)
        if score > best_score:
            best, best_score = name, score
    return best


def leave_one_out(table: Mapping[str, Scores], groups: Sequence[str]) -> list[Fold]:
    """One fold per group: choose on all the others, score on it."""
    if len(groups) < 2:
        raise ValueError(f"cross-validation needs at least two groups, got {len(groups)}")
    folds = []
    for held in groups:
        train = [g for g in groups if g != held]
        name = choose(table, train)
        folds.append(
            Fold(held, name, mean_over(table[name], train), mean_over(table[name], [held]))
        )
    return folds
