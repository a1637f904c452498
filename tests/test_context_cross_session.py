"""Recall from a user's other sessions: what the request touches comes back with its
origin, what another session learns reaches the next call, another user's sessions are
never read, and a call's reads do not grow with those sessions' size."""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Any

import pytest

from beeweave_core.context import record_messages
from beeweave_core.text.language import fold

from .context_helpers import chatter, say


def _facts(n: int, topic: str) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        out.append(
            {"role": "user", "content": f"The {topic} gauge number {i} reads {40 + i} units."}
        )
        out.append({"role": "assistant", "content": "Logged."})
    return out


def _log(n: int, start: int) -> list[dict[str, Any]]:
    """About ``n`` events of a shipping log (settings stated with values, answers)."""
    things = ("pallet", "courier", "invoice", "crate", "manifest", "locker")
    out: list[dict[str, Any]] = []
    i = start
    while len(out) < n:
        out.append({"role": "user", "content": f"The {things[i % 6]} limit for dock {i % 17} "
                    f"is {10 + i % 89}."})  # fmt: skip
        out.append({"role": "assistant", "content": f"Noted for batch {1000 + i}."})
        i += 1
    return out


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"])
def test_an_older_sessions_preference_is_recalled_when_the_request_touches_it(
    backend, weave_factory
):
    weave = weave_factory(backend, index=False)
    say(weave, "spring", [
        {"role": "user", "content": "I prefer replies written in British spelling."},
        {"role": "assistant", "content": "Understood."},
        *_facts(40, "boiler"),
    ], user_id="mira")  # fmt: skip
    for k in range(3):
        say(weave, f"later-{k}", _facts(40, f"pump{k}"), user_id="mira")
    say(weave, "today", [{"role": "user", "content": "Start drafting the onboarding checklist."}],
        user_id="mira")  # fmt: skip
    ctx = weave.assemble("today", "Which spelling should the checklist replies use?",
                         budget_tokens=900)  # fmt: skip
    piece = next(p for p in ctx.layers["recalled"].pieces if "British spelling" in p.text)
    assert piece.session_id == "spring" and "[session spring]" in ctx.text()
    # another user's sessions are never read
    say(weave, "bob-1", [{"role": "user", "content": "I prefer replies in capital spelling."}],
        user_id="bob")  # fmt: skip
    again = weave.assemble("today", "Which spelling should the checklist replies use?",
                           budget_tokens=900)  # fmt: skip
    assert "British spelling" in again.text() and "capital" not in again.text()


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"])
def test_what_another_session_learns_after_a_call_reaches_the_next_call(backend, weave_factory):
    weave = weave_factory(backend, index=False)
    say(weave, "ops", [
        {"role": "user", "content": "The nightly backup job copies the ledger tables."},
        {"role": "assistant", "content": "Noted."},
    ], user_id="kai", prefix="a")  # fmt: skip
    say(weave, "desk", [{"role": "user", "content": "Help me plan the week."}], user_id="kai")
    query = "Which host receives the nightly backup copies?"
    first = weave.assemble("desk", query, budget_tokens=700)
    assert "ledger tables" in first.text() and "walrus-07" not in first.text()
    say(weave, "ops", [
        {"role": "user", "content": "The nightly backup job ships its copies to host walrus-07."},
        {"role": "assistant", "content": "Noted the host."},
    ], user_id="kai", prefix="b")  # fmt: skip
    second = weave.assemble("desk", query, budget_tokens=700)
    assert "walrus-07" in second.text()
    say(weave, "ops", [
        {"role": "user", "content": "The nightly backup job ships its copies to host otter-12 "
                                    "from now on."},
        {"role": "assistant", "content": "Switched."},
        *chatter(2),
    ], user_id="kai", prefix="c")  # fmt: skip
    third = fold(weave.assemble("desk", query, budget_tokens=700).text())
    assert "otter-12" in third
    if "walrus-07" in third:  # the old host, if shown, comes before the new one
        assert third.index("walrus-07") < third.rindex("otter-12")


def _rows_read(shared: Any, sent: list[str]) -> int:
    """Rows the SELECTs in ``sent`` return, run again (holding the store's lock, as the
    maintenance thread shares the connection)."""
    reads = [s for s in sent if re.match(r"\s*(SELECT|WITH)\b", s)]
    with shared.lock:
        return sum(len(shared.conn.execute(sql).fetchall()) for sql in reads)


def _rows_per_call(weave_factory: Any, per_session: int) -> int:
    """Rows a steady call of a short session reads, the user's 20 other sessions
    holding ``per_session`` events each."""
    weave = weave_factory(index=False)
    for s in range(20):
        record_messages(weave.store, f"past-{s}", _log(per_session, s * per_session),
                        user_id="lena", key_prefix=f"p{s}")  # fmt: skip
    record_messages(weave.store, "now", _log(12, 90_000), user_id="lena", key_prefix="n")
    weave.assemble("now", "crate limit for dock 3?", budget_tokens=1_500, record=False)
    counts = []
    shared = weave.store.connection  # type: ignore[attr-defined]
    conn: sqlite3.Connection = shared.conn
    caller = threading.get_ident()
    for k in range(3):
        record_messages(weave.store, "now", _log(2, 80_000 + k)[:2], user_id="lena",
                        key_prefix=f"c{k}")  # fmt: skip
        sent: list[str] = []
        # only the calling thread's statements: maintenance shares the connection
        with shared.lock:  # set and cleared as every use of the connection is: locked
            conn.set_trace_callback(
                lambda sql, sent=sent: sent.append(sql) if threading.get_ident() == caller else None
            )
        try:
            ctx = weave.assemble("now", "crate limit for dock 3?", budget_tokens=1_500,
                                 record=False)  # fmt: skip
        finally:
            with shared.lock:
                conn.set_trace_callback(None)
        assert any(p.session_id != "now" for p in ctx.layers["recalled"].pieces)
        counts.append(_rows_read(shared, sent))
    weave.close()  # (the next weave shares the file: its commits would refill the scope)
    return max(counts)


def test_rows_a_call_reads_do_not_grow_with_the_other_sessions(weave_factory, monkeypatch):
    from beeweave_core.backends.sqlite import events_sql

    # above the size a scope is ranked whole (exact BM25 over a small scope costs what
    # it holds, by design, up to that size)
    monkeypatch.setattr(events_sql, "SMALL_SCOPE", 100)
    small = _rows_per_call(weave_factory, 15)
    large = _rows_per_call(weave_factory, 150)
    assert large <= small * 1.5 + 50, (small, large)
