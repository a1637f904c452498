"""A first call on a long session the engine never read: it answers from the session's
newest turns while a background thread builds the full view, and a later call gives the
full answer.

Real SQLite files (and the real Neo4j), real tiktoken counts, the offline extractive
summarizer; no fakes.  Nothing is timed: the first call's reads are counted (every
statement it sends to SQLite is run again and its rows counted), and the worker's work
is checked by what it wrote.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from typing import Any

import pytest

from beeweave_core.config import ContextConfig, WeaveConfig
from beeweave_core.context import engine as engine_module
from beeweave_core.events import EventType

from .context_helpers import say

STUDIOS = ["north wing", "annex", "loft", "basement", "courtyard", "garage", "porch"]
WARES = ["mugs", "bowls", "vases", "plates", "tiles", "jugs", "planters", "cups"]
TS = 1_700_000_000.0
LONG = 100  # (monkeypatched) turns of backlog beyond which a session is long


def _log(start: int, n: int) -> list[dict[str, Any]]:
    """``n`` turns of a pottery studio's log: counts stated with values, and answers."""
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        studio, ware = STUDIOS[i % len(STUDIOS)], WARES[(i // len(STUDIOS)) % len(WARES)]
        out.append({"role": "user", "content": f"Shelf {i} in the {studio} holds "
                    f"{12 + i % 31} {ware}."})  # fmt: skip
        out.append({"role": "assistant", "content": f"Recorded on inventory card {900 + i}."})
    return out


#: The newest turns: a setting changed with another value (said plainly, no cue; in
#: English and in Chinese), and look-alike settings that stay.
ENDING = [
    {"role": "user", "content": "The glaze kiln firing temperature is 1180 degrees."},
    {"role": "assistant", "content": "Recorded on inventory card 77."},
    {"role": "user", "content": "The bisque kiln firing temperature is 950 degrees."},
    {"role": "assistant", "content": "Recorded on inventory card 78."},
    *_log(5_000, 3),
    {"role": "user", "content": "釉烧窑的保温时间是20分钟。"},
    {"role": "user", "content": "素烧窑的保温时间是15分钟。"},
    *_log(6_000, 2),
    {"role": "user", "content": "Set the glaze kiln firing temperature to 1240 degrees."},
    {"role": "assistant", "content": "Recorded on inventory card 79."},
    {"role": "user", "content": "釉烧窑的保温时间改成35分钟吧。"},
    {"role": "user", "content": "What should I load next?"},
]


def _session(weave, turns: int = 300) -> str:
    sid = "studio"
    say(weave, sid, [{"role": "system", "content": "You keep the pottery studio's books."},
                     *_log(0, turns), *ENDING], user_id=None, prefix="p", ts=TS)  # fmt: skip
    return sid


def _wait(weave, sid: str) -> None:
    deadline = time.monotonic() + 300
    while weave.context.catching_up(sid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not weave.context.catching_up(sid)


def _rows_read(conn: sqlite3.Connection, sent: list[str]) -> int:
    """Rows the SELECTs in ``sent`` return, run again."""
    reads = [s for s in sent if re.match(r"\s*(SELECT|WITH)\b", s)]
    return sum(len(conn.execute(sql).fetchall()) for sql in reads)


def _assemble_counting_rows(weave, sid: str, budget: int) -> tuple[Any, int]:
    """``weave.assemble`` and the rows its SELECTs read (replayed after the call)."""
    conn: sqlite3.Connection = weave.store.connection.conn  # type: ignore[attr-defined]
    sent: list[str] = []
    conn.set_trace_callback(sent.append)
    try:
        ctx = weave.assemble(sid, budget_tokens=budget, model="gpt-4", record=False)
    finally:
        conn.set_trace_callback(None)
    return ctx, _rows_read(conn, sent)


def _first_turn(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in messages if m["role"] != "system")


@pytest.fixture
def long_after(monkeypatch):
    monkeypatch.setattr(engine_module, "BACKGROUND_EVENTS", LONG)


def _check_current(text: str, *, siblings: bool = True) -> None:
    """The newest values, no overturned one, and (in a tail's answer, which holds those
    turns whole) the look-alike settings; a later answer leaves out what its layers'
    shares of the budget leave out."""
    assert "1240 degrees" in text and "35分钟" in text
    assert "1180" not in text and "20分钟" not in text  # overturned: never shown
    if siblings:
        assert "950 degrees" in text and "15分钟" in text


def test_a_first_call_reads_the_tail_and_holds_no_overturned_value(weave_factory, long_after):
    weave = weave_factory(index=False)
    sid = _session(weave, turns=1_000)
    events = weave.store.session_stats(sid).events
    ctx, read = _assemble_counting_rows(weave, sid, 400)
    assert ctx.catching_up and weave.context.catching_up(sid)
    assert 0 < read < events / 4, (read, events)  # the tail, not the session
    _check_current(ctx.text())
    assert ctx.messages[0]["role"] == "system"
    assert _first_turn(ctx.messages)["role"] == "user"
    assert ctx.total_tokens <= 400
    _wait(weave, sid)
    later = weave.assemble(sid, budget_tokens=1_200, model="gpt-4", record=False)
    assert not later.catching_up
    _check_current(later.text(), siblings=False)


def test_the_worker_builds_the_view_and_catches_memory_up(weave_factory, long_after):
    weave = weave_factory(index=False)
    sid = _session(weave)
    first = weave.assemble(sid, budget_tokens=400, model="gpt-4", record=False)
    assert first.catching_up and not first.working_state.memory_ids
    _wait(weave, sid)
    engine = weave.context
    last_turn = weave.store.timeline(sid, last=1, types=(EventType.USER_MESSAGE,))[0].seq
    assert engine.views.has(sid)
    assert engine.memory.cursor(sid) >= last_turn
    assert weave.store.timeline(sid, types=(EventType.SUMMARY,))  # compacted
    later = weave.assemble(sid, budget_tokens=400, model="gpt-4", record=False)
    tail_kinds = {p.kind for p in first.provenance}
    assert {p.kind for p in later.provenance} - tail_kinds  # more than the tail holds


def test_a_later_call_equals_the_answer_of_a_caller_who_waited(weave_factory, long_after):
    quick = weave_factory(index=False)
    waited = weave_factory(
        index=False, config=WeaveConfig(context=ContextConfig(catch_up_in_background=False))
    )
    sid = _session(quick)
    _session(waited)
    assert quick.assemble(sid, budget_tokens=400, model="gpt-4", record=False).catching_up
    _wait(quick, sid)
    later = quick.assemble(sid, budget_tokens=400, model="gpt-4", record=False)
    full = waited.assemble(sid, budget_tokens=400, model="gpt-4", record=False)
    assert not full.catching_up and not waited.context.catching_up(sid)
    assert later.messages == full.messages


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"])
def test_the_tail_answer_on_each_backend(weave_factory, long_after, backend):
    weave = weave_factory(backend, index=False)
    sid = _session(weave, turns=160)
    ctx = weave.assemble(sid, budget_tokens=400, model="gpt-4", record=False)
    assert ctx.catching_up
    _check_current(ctx.text())
    assert _first_turn(ctx.messages)["role"] == "user"
    _wait(weave, sid)
    later = weave.assemble(sid, budget_tokens=1_200, model="gpt-4", record=False)
    _check_current(later.text(), siblings=False)


def test_closing_the_weave_stops_a_catch_up_quietly(weave_factory, long_after, caplog):
    weave = weave_factory(index=False)
    sid = _session(weave, turns=600)
    assert weave.assemble(sid, budget_tokens=400, model="gpt-4", record=False).catching_up
    weave.close()  # the store closes under the running catch-up
    deadline = time.monotonic() + 120
    while weave.context.catching_up(sid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not weave.context.catching_up(sid)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
