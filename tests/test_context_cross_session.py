"""Recall from a user's other sessions: what it offers, that it follows changes made
after a first call, and that a call's reads do not grow with those sessions' size."""

from __future__ import annotations

import re
import sqlite3

import pytest

from beeweave_bench.assemble import conversation
from beeweave_core.context import record_messages
from beeweave_core.text.language import fold

from .context_helpers import chatter, say


def _facts(n: int, topic: str) -> list[dict[str, str]]:
    """``n`` user facts with values (memories of kind fact, prior below a preference)."""
    out = []
    for i in range(n):
        out.append(
            {"role": "user", "content": f"The {topic} gauge number {i} reads {40 + i} units."}
        )
        out.append({"role": "assistant", "content": "Logged."})
    return out


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"])
def test_an_older_sessions_preference_sharing_no_word_with_the_query_is_recalled(
    backend, weave_factory
):
    weave = weave_factory(backend, index=False)
    say(weave, "spring", [
        {"role": "user", "content": "I prefer replies written in British spelling."},
        {"role": "assistant", "content": "Understood."},
        *_facts(40, "boiler"),
    ], user_id="mira")  # fmt: skip
    for k in range(3):  # later sessions full of facts: the preference is older than all
        say(weave, f"later-{k}", _facts(40, f"pump{k}"), user_id="mira")
    say(weave, "today", [{"role": "user", "content": "Start drafting the onboarding checklist."}],
        user_id="mira")  # fmt: skip
    ctx = weave.assemble("today", "What goes into an onboarding checklist?", budget_tokens=900,
                         use_retriever=False)  # fmt: skip
    piece = next(p for p in ctx.layers["recalled"].pieces if "British spelling" in p.text)
    assert piece.session_id == "spring"
    # another user's sessions are never read
    say(weave, "bob-1", [{"role": "user", "content": "I prefer replies in all capitals."}],
        user_id="bob")  # fmt: skip
    again = weave.assemble("today", "What goes into an onboarding checklist?", budget_tokens=900,
                           use_retriever=False)  # fmt: skip
    assert "British spelling" in again.text() and "capitals" not in again.text()


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"])
def test_what_another_session_learns_after_a_call_reaches_the_next_call(backend, weave_factory):
    weave = weave_factory(backend, index=False)
    say(weave, "ops", [
        {"role": "user", "content": "The nightly backup job copies the ledger tables."},
        {"role": "assistant", "content": "Noted."},
    ], user_id="kai", prefix="a")  # fmt: skip
    say(weave, "desk", [{"role": "user", "content": "Help me plan the week."}], user_id="kai")
    query = "Which host receives the nightly backup copies?"
    first = weave.assemble("desk", query, budget_tokens=700, use_retriever=False)
    assert "ledger tables" in first.text()
    assert "walrus-07" not in first.text()
    say(weave, "ops", [
        {"role": "user", "content": "The nightly backup job ships its copies to host walrus-07."},
        {"role": "assistant", "content": "Noted the host."},
    ], user_id="kai", prefix="b")  # fmt: skip
    second = weave.assemble("desk", query, budget_tokens=700, use_retriever=False)
    assert "walrus-07" in second.text()
    # a change of plan there invalidates the old memory: the next call drops it
    say(weave, "ops", [
        {"role": "user", "content": "Change of plan: the nightly backup job ships its copies to "
                                    "host otter-12 instead of walrus-07."},
        {"role": "assistant", "content": "Switched."},
        *chatter(2),
    ], user_id="kai", prefix="c")  # fmt: skip
    third = weave.assemble("desk", query, budget_tokens=700, use_retriever=False)
    recalled = [fold(p.text) for p in third.layers["recalled"].pieces]
    assert any("otter-12" in t for t in recalled), recalled
    assert not any("walrus-07" in t and "otter-12" not in t for t in recalled), recalled


def _rows_read(conn: sqlite3.Connection, sent: list[str]) -> int:
    """Rows the SELECTs in ``sent`` return, run again."""
    reads = [s for s in sent if re.match(r"\s*(SELECT|WITH)\b", s)]
    return sum(len(conn.execute(sql).fetchall()) for sql in reads)


def _rows_per_call(weave_factory, per_session: int) -> int:
    """Rows a steady call of a short session reads, the user's 20 other sessions
    holding ``per_session`` events each (memories extracted)."""
    weave = weave_factory(index=False)
    for s in range(20):
        record_messages(weave.store, f"past-{s}", conversation(per_session, start=s * per_session),
                        user_id="lena", key_prefix=f"p{s}")  # fmt: skip
    record_messages(weave.store, "now", conversation(12, start=90_000), user_id="lena",
                    key_prefix="n")  # fmt: skip
    weave.assemble("now", budget_tokens=1_500, record=False)  # reads the other sessions once
    counts = []
    conn: sqlite3.Connection = weave.store.connection.conn  # type: ignore[attr-defined]
    for k in range(3):
        record_messages(weave.store, "now", conversation(2, start=80_000 + k)[:2],
                        user_id="lena", key_prefix=f"c{k}")  # fmt: skip
        sent: list[str] = []
        conn.set_trace_callback(sent.append)
        try:
            # the store path (the fused retriever's search has its own bound, LEXICAL_WINDOW)
            ctx = weave.assemble("now", budget_tokens=1_500, record=False, use_retriever=False)
        finally:
            conn.set_trace_callback(None)
        assert ctx.layers["recalled"].pieces  # the other sessions were offered
        counts.append(_rows_read(conn, sent))
    return max(counts)


def test_rows_a_call_reads_do_not_grow_with_the_other_sessions(weave_factory):
    small = _rows_per_call(weave_factory, 15)
    large = _rows_per_call(weave_factory, 150)
    assert large <= small + 10, (small, large)
