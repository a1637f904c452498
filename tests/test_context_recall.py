"""What the recalled layer spends its room on when the session does not fit.

Real SQLite stores, the real retriever and tokenizer; the conversations are written for
these tests (a chatty session that keeps repeating itself, a value set, changed and set
back, a tool result asked about in words it does not use).
"""

from __future__ import annotations

import json
from typing import Any

from beeweave_core.context import PRESETS
from beeweave_core.text import language as L
from beeweave_core.tokens import TokenCounter

from .context_helpers import call, say

REFRAINS = [
    "The coffee machine on the second floor is broken again.",
    "I will grab lunch around noon and be back after.",
    "Someone should water the plant by the window.",
    "The printer queue is long this morning.",
]


def _refrain(i: int) -> list[dict[str, Any]]:
    """A pair of turns made only of sentences the session says over and over."""
    a, b = REFRAINS[i % 4], REFRAINS[(i + 1) % 4]
    return [
        {"role": "user", "content": f"{a} {b}"},
        {"role": "assistant", "content": f"Noted. {REFRAINS[(i + 2) % 4]}"},
    ]


def _recalled(ctx: Any) -> list[Any]:
    return [p for p in ctx.provenance if p.layer == "recalled"]


def _said(text: str) -> set[str]:
    return {L.fold(s) for s in L.sentences(text.partition(": ")[2])}


def test_recall_leaves_out_a_line_the_prompt_says_again_later(weave_factory: Any) -> None:
    weave = weave_factory()
    turns = [{"role": "user", "content": "Our staging database runs on host pg-east-4."}]
    turns.append({"role": "assistant", "content": "Good to know."})
    for i in range(60):
        turns += _refrain(i)
    say(weave, "chatty", turns)
    weave.flush(30, wait_index=True)
    ctx = weave.assemble(
        "chatty", "Which host runs the staging database?", budget_tokens=500,
        counter=TokenCounter(encoding="cl100k_base"),
    )  # fmt: skip
    recalled = _recalled(ctx)
    assert "pg-east-4" in ctx.text()
    window = {s for p in ctx.provenance if p.layer == "immediate" for s in _said(": " + p.text)}
    for p in recalled:
        later = set(window)
        for q in recalled:
            if q.seq_range[0] > p.seq_range[0]:
                later |= _said(q.text)
        assert not _said(p.text) <= later, f"recalled line repeats later ones: {p.text!r}"


def test_a_value_set_back_keeps_its_newest_wording_last(weave_factory: Any) -> None:
    weave = weave_factory()
    turns = [
        {"role": "user", "content": "Cap the nightly export at 300 files."},
        {"role": "assistant", "content": "Capped at 300."},
        {"role": "user", "content": "Raise the nightly export cap to 900 files."},
        {"role": "assistant", "content": "Raised to 900."},
        {"role": "user", "content": "Cap the nightly export at 300 files."},
        {"role": "assistant", "content": "Back to 300."},
    ]
    for i in range(40):
        turns += _refrain(i)
    say(weave, "capped", turns)
    weave.flush(30, wait_index=True)
    ctx = weave.assemble(
        "capped", "What is the nightly export cap?", budget_tokens=450,
        counter=TokenCounter(encoding="cl100k_base"),
    )  # fmt: skip
    text = ctx.text()
    assert "900" in text and "300" in text
    assert text.rindex("300 files") > text.rindex("900 files")


def test_a_tool_result_the_question_does_not_word_still_reaches_recall(
    weave_factory: Any,
) -> None:
    weave = weave_factory()
    report = {"summary": {"objects_counted": 48213, "elapsed_ms": 912}, "rows": [
        {"bucket": f"b{i}", "state": "ok" if i % 3 else "cold"} for i in range(40)]}  # fmt: skip
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "Please take an inventory of the archive."},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "inventory", {"root": "/srv"})]},
        {"role": "tool", "tool_call_id": "c1", "name": "inventory", "content": json.dumps(report)},
        {"role": "assistant", "content": "The inventory is done."},
    ]  # fmt: skip
    for i in range(80):
        turns += _refrain(i)
    say(weave, "stocktake", turns)
    weave.flush(30, wait_index=True)
    ctx = weave.assemble(
        "stocktake", "Wie viele Dinge lagen dort insgesamt?", budget_tokens=600,
        counter=TokenCounter(encoding="cl100k_base"),
    )  # fmt: skip
    assert "48213" in ctx.text()
    assert ctx.total_tokens <= 600


def test_a_question_about_the_past_gets_the_room_the_newest_turns_keep_it_otherwise(
    weave_factory: Any,
) -> None:
    weave = weave_factory()
    things = ["tax", "payroll", "lease", "insurance", "pension", "customs", "grant", "audit"]
    turns: list[dict[str, Any]] = []
    for i in range(24):
        turns.append({"role": "user", "content": f"Vault shelf {i + 1} holds the "
                      f"{things[i % 8]} records from {1990 + i}."})  # fmt: skip
        turns.append({"role": "assistant", "content": f"Filed shelf {i + 1}."})
    for i in range(30):
        turns.append({"role": "user", "content": f"The courier van number {40 + i} left "
                      f"depot {chr(65 + i % 26)} at {6 + i % 12} o'clock."})  # fmt: skip
        turns.append({"role": "assistant", "content": f"Van {40 + i} is on its way."})
    say(weave, "archive", turns)
    weave.flush(30, wait_index=True)
    budget, counter = 1000, TokenCounter(encoding="cl100k_base")
    floor = PRESETS["requirement"].immediate * budget
    past = weave.assemble("archive", "Which records are kept on the vault shelves?",
                          budget_tokens=budget, counter=counter, phase="requirement")  # fmt: skip
    recent = weave.assemble("archive", "When did courier van number 69 leave the depot?",
                            budget_tokens=budget, counter=counter, phase="requirement")  # fmt: skip
    assert past.layers["immediate"].tokens < 0.6 * floor  # the floor gave way to recall
    assert past.layers["recalled"].tokens > budget - floor
    assert "Vault shelf" in past.text()
    assert recent.layers["immediate"].tokens >= 0.8 * floor  # the newest turns kept theirs
    assert "van number 69" in recent.text()
