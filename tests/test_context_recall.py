"""What the recalled layer spends its room on when the session does not fit.

Real SQLite stores, the real retriever and tokenizer; the conversations are written for
these tests (a chatty session that keeps repeating itself, a value set, changed and set
back, a tool result asked about in words it does not use).
"""

from __future__ import annotations

import json
import time
from typing import Any

from beeweave_core.context import PRESETS
from beeweave_core.text import language as L
from beeweave_core.tokens import TokenCounter

from .context_helpers import call, exchanges, say

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


def _tool_then_chatter(ask: str, tool: str, output: object, done: str) -> list[dict[str, Any]]:
    """A request answered by one tool call, then 80 exchanges of small talk after it."""
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": ask},
        {"role": "assistant", "content": "", "tool_calls": [call("t1", tool, {"root": "/"})]},
        {"role": "tool", "tool_call_id": "t1", "name": tool, "content": json.dumps(output)},
        {"role": "assistant", "content": done},
    ]
    for i in range(80):
        turns += _refrain(i)
    return turns


def _asked_in_600(weave: Any, session_id: str, question: str) -> str:
    """The text of a 600-token context for ``question`` (checked to fit)."""
    weave.flush(30, wait_index=True)
    ctx = weave.assemble(
        session_id, question, budget_tokens=600, counter=TokenCounter(encoding="cl100k_base")
    )
    assert ctx.total_tokens <= 600
    return str(ctx.text())


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
    turns = _tool_then_chatter("Please take an inventory of the archive.", "inventory",
                               report, "The inventory is done.")  # fmt: skip
    say(weave, "stocktake", turns)
    assert "48213" in _asked_in_600(weave, "stocktake", "Wie viele Dinge lagen dort insgesamt?")


def test_a_question_about_the_past_gets_the_room_the_newest_turns_keep_it_otherwise(
    weave_factory: Any,
) -> None:
    weave = weave_factory()
    things = ["tax", "payroll", "lease", "insurance", "pension", "customs", "grant", "audit"]
    turns = exchanges(
        48,  # more shelves than the budget holds: recall needs the room
        lambda i: f"Vault shelf {i + 1} holds the {things[i % 8]} records from {1990 + i}.",
        lambda i: f"Filed shelf {i + 1}.",
    ) + exchanges(
        30,
        lambda i: (
            f"The courier van number {40 + i} left depot {chr(65 + i % 26)} at "
            f"{6 + i % 12} o'clock."
        ),
        lambda i: f"Van {40 + i} is on its way.",
    )
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


def test_a_follow_up_about_the_past_keeps_the_turn_it_replies_to(weave_factory: Any) -> None:
    weave = weave_factory()
    crops = ["basil", "chard", "leek", "fennel"]
    turns = exchanges(  # more than the budget holds: recall fills it
        60,
        lambda i: (
            f"Greenhouse bed {i + 1} grows the {crops[i % 4]} seedlings of batch "
            f"{300 + i}, watered every {2 + i % 3} days from the rain barrel on the north side, "
            f"and its label shows the sowing week {10 + i % 40} and the tray count {4 + i % 7}."
        ),
        lambda i: f"Logged bed {i + 1}.",
    ) + exchanges(
        30,
        lambda i: f"Delivery truck {70 + i} unloaded {5 + i % 9} pallets at gate {i % 4 + 1}.",
        lambda i: f"Truck {70 + i} is logged.",
    )
    turns.append({"role": "user", "content": "Any offers for new irrigation hoses?"})
    turns.append({"role": "assistant", "content": "The lowest offer came from Halvorsen "
                                                  "Supply at 1,380 euros for forty hoses."})  # fmt: skip
    say(weave, "nursery", turns)
    weave.flush(30, wait_index=True)
    counter = TokenCounter(encoding="cl100k_base")
    question = "Is that enough for all the greenhouse beds with seedlings?"
    weave.emit("user_message", question, session_id="nursery", role="user")
    weave.flush(30, wait_index=True)
    ctx = weave.assemble("nursery", question, budget_tokens=600, counter=counter,
                         phase="requirement")  # fmt: skip
    floor = PRESETS["requirement"].immediate * 600
    # the request is a turn of the session, and its own best match: it does not make
    # the question one about the newest turns, so recall gets the room ...
    assert ctx.layers["immediate"].tokens < 0.6 * floor
    assert "Greenhouse bed" in ctx.text()
    assert "Halvorsen Supply at 1,380 euros" in ctx.text()  # ... and "that" is still there


def _settled_session(weave: Any, sid: str, turns: list[dict[str, Any]]) -> Any:
    """``turns``, then a long chatty stretch so none of them is among the newest turns;
    maintenance has read the session (the working state holds its memories)."""
    for i in range(50):
        turns += _refrain(i)
    say(weave, sid, turns)
    weave.flush(30, wait_index=True)
    weave.context.update(sid)
    return weave


def test_a_change_kept_as_a_memory_is_read_after_the_recalled_turn_it_changes(
    weave_factory: Any,
) -> None:
    turns = [
        {"role": "user", "content": "Ship the nightly backups to the cold tier."},
        {"role": "assistant", "content": "Sure."},
    ]
    turns += exchanges(  # reports about backups: recall has more candidates than room
        30,
        lambda i: f"Did the backup of laptop L-{100 + i} finish?",
        lambda i: f"Yes, laptop L-{100 + i} was backed up at 0{i % 6}:{10 + i} with {i + 2} GB.",
    )
    turns += [
        {"role": "user", "content": "Pulling anything back from there takes hours, so we use "
                                    "the warm tier from now on."},
        {"role": "assistant", "content": "Understood."},
    ]  # fmt: skip
    weave = _settled_session(weave_factory(), "backups", turns)
    said = [m.content for m in weave.context.memories("backups")]
    # the premise: the first wording is a request (a turn), the second a memory
    assert not any("Ship the nightly" in t for t in said)
    assert any("warm tier from now on" in t for t in said)
    for phase in (None, "execution"):
        ctx = weave.assemble(
            "backups", "Where should the nightly backups be shipped?", budget_tokens=700,
            counter=TokenCounter(encoding="cl100k_base"), phase=phase,
        )  # fmt: skip
        text = ctx.text()
        assert "backups to the cold tier" in text and "warm tier from now on" in text
        assert text.rfind("backups to the cold tier") < text.rfind("warm tier from now on"), text


def test_a_memory_shows_the_short_turn_it_was_said_in(weave_factory: Any) -> None:
    weave = _settled_session(weave_factory(), "digest", [
        {"role": "user", "content": "The Friday digest is not working for me, nobody reads it. "
                                    "Just ping me in chat when a build breaks."},
        {"role": "assistant", "content": "Will do."},
    ])  # fmt: skip
    (mem,) = [m for m in weave.context.memories("digest") if "Friday digest" in m.content]
    assert "ping me" not in mem.content  # the premise: one sentence of the turn is the memory
    items = [i for i in weave.context.working_state("digest").items() if mem.id in i.event_ids]
    assert [i.text for i in items] == [
        "The Friday digest is not working for me, nobody reads it. "
        "Just ping me in chat when a build breaks."
    ]
    ctx = weave.assemble(
        "digest", "How should you tell me about broken builds?", budget_tokens=400,
        counter=TokenCounter(encoding="cl100k_base"),
    )  # fmt: skip
    assert "Just ping me in chat when a build breaks." in ctx.text()


def test_a_memory_read_among_recalled_lines_is_dated_by_its_turn(weave_factory: Any) -> None:
    from beeweave_core.context.assembler import day_of

    weave = weave_factory()
    now = time.time()  # days apart, recent (a memory not affirmed for long goes dormant)
    first, second, third = now - 9 * 86_400, now - 6 * 86_400, now - 86_400
    turns = [
        {"role": "user", "content": "Ship the nightly backups to the cold tier."},
        {"role": "assistant", "content": "Sure."},
    ]
    for i in range(30):
        turns += [
            {"role": "user", "content": f"Did the backup of laptop L-{100 + i} finish?"},
            {"role": "assistant", "content": f"Yes, laptop L-{100 + i} was backed up at "
                                             f"0{i % 6}:{10 + i} with {i + 2} GB."},
        ]  # fmt: skip
    say(weave, "dated", turns, ts=first, prefix="a")
    say(weave, "dated", [
        {"role": "user", "content": "Pulling anything back from there takes hours, so we use "
                                    "the warm tier from now on."},
        {"role": "assistant", "content": "Understood."},
    ], ts=second, prefix="b")  # fmt: skip
    chat: list[dict[str, Any]] = []
    for i in range(50):
        chat += _refrain(i)
    say(weave, "dated", chat, ts=third, prefix="c")
    weave.flush(30, wait_index=True)
    ctx = weave.assemble(
        "dated", "Where should the nightly backups be shipped?", budget_tokens=700,
        counter=TokenCounter(encoding="cl100k_base"),
    )  # fmt: skip
    text = ctx.text()
    note = text.find("(decision) Pulling anything back")
    assert note > 0, text  # the premise: the change is a memory read among recalled lines
    # the line sits under the day it was said, not under the day of the line before it
    assert text.rfind(f"— {day_of(second)} —", 0, note) > text.rfind(
        f"— {day_of(first)} —", 0, note
    )


def test_a_tool_result_asked_about_before_maintenance_read_it_still_reaches_recall(
    weave_factory: Any,
) -> None:
    """Asked right after a burst of writes, before maintenance has read any of them: a
    tool result older than the newest turns is offered all the same (read from the
    store between what maintenance read and the tail)."""
    weave = weave_factory()
    scan = {"totals": {"files_found": 73918, "bytes": 5120443}, "dirs": [
        {"path": f"/data/d{i}", "ok": i % 4 != 0} for i in range(40)]}  # fmt: skip
    turns = _tool_then_chatter("Scan the shared drive, please.", "scan", scan, "The scan finished.")
    with weave.context.maintenance.step_lock:  # maintenance reads nothing meanwhile
        say(weave, "drive", turns, maintain=False)
        assert "73918" in _asked_in_600(weave, "drive", "一共找到了多少个？")
