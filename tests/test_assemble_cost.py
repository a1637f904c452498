"""What one ``assemble`` call reads from the database, at two session sizes.

Not a timed test: every statement an assembly sends to SQLite is recorded, the reads
are run again under a VM-step counter, and the counts of a session five times longer
must stay close.  A read of the whole session per call (a ``SELECT DISTINCT`` over its
rows, a timeline read from the start, a scan by session) grows with it and fails this.

Real SQLite files, real tiktoken counts, the offline extractive summarizer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

import pytest

from beeweave_core.backends.sqlite.db import SharedConnection
from beeweave_core.weave import Weave

from .context_helpers import say

PLANTS = ["fern", "cactus", "orchid", "ivy", "bamboo", "tulip", "lily", "moss", "sage"]
TRAITS = ["pot width", "water volume", "light hours", "soil depth", "feed dose"]
ROOMS = ["attic", "porch", "cellar", "studio", "hallway", "kitchen", "loft"]
STEP = 50  # VM instructions per progress-handler call


def _turns(start: int, n: int) -> list[dict[str, Any]]:
    """``n`` turns of a plant-care log: settings with values (some restated with another
    value later), answers, and a tool call with its result every fifth turn."""
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        plant, trait = PLANTS[i % len(PLANTS)], TRAITS[(i // len(PLANTS)) % len(TRAITS)]
        room = ROOMS[i % len(ROOMS)]
        out.append({"role": "user", "content": f"For the {plant} in the {room}, the {trait} "
                    f"should be {3 + i % 41}."})  # fmt: skip
        if i % 5 == 4:
            out += _sensor_reading(i)
        out.append({"role": "assistant", "content": f"Logged under care sheet {500 + i}."})
    return out


def _sensor_reading(i: int) -> list[dict[str, Any]]:
    """An assistant tool call and its result, so a unit holds more than one message."""
    call = {"id": f"k{i}", "type": "function",
            "function": {"name": "sensor", "arguments": json.dumps({"shelf": i})}}  # fmt: skip
    result = json.dumps({"shelf": i, "moisture": 20 + i % 7})
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": result}]  # fmt: skip


def _read_steps(weave: Weave, session_id: str, turns: int) -> tuple[int, int]:
    """(VM steps of the reads, number of reads) of one call after one new turn, once the
    session was caught up."""
    weave.assemble(session_id, budget_tokens=1_500, record=False)
    weave.context.update(session_id)  # maintenance caught up (it runs in the background)
    assert not weave.context.catching_up(session_id)
    for k in range(3):  # steady state: views, caches and compaction settled
        say(weave, session_id, _turns(turns + k, 1), user_id=None, prefix=f"w{k}")
        weave.assemble(session_id, budget_tokens=1_500)
        weave.flush()
    say(weave, session_id, _turns(turns + 3, 1), user_id=None, prefix="m")
    shared: SharedConnection = weave.store.connection  # type: ignore[attr-defined]
    conn, caller = shared.conn, threading.get_ident()
    sent: list[str] = []
    # the calling thread's statements only: the maintenance thread (text index catch-up) shares it
    # (and a callback is set or cleared under the store's lock, as every use of it is)
    with shared.lock:
        conn.set_trace_callback(lambda sql: sent.append(sql) if threading.get_ident() == caller
                                else None)  # fmt: skip
    try:
        weave.assemble(session_id, budget_tokens=1_500)
    finally:
        with shared.lock:
            conn.set_trace_callback(None)
    weave.flush()  # the audit record, written by the capture thread
    reads = [s for s in sent if re.match(r"\s*(SELECT|WITH)\b", s)]
    return _steps(shared, lambda: [conn.execute(sql).fetchall() for sql in reads]), len(reads)


def _steps(shared: SharedConnection, run: Callable[[], object]) -> int:
    """VM instructions SQLite executes while ``run`` runs (to within :data:`STEP`),
    holding the store's lock so no background thread's statements count."""
    conn = shared.conn
    ticks = 0

    def tick() -> int:
        nonlocal ticks
        ticks += 1
        return 0

    with shared.lock:
        conn.set_progress_handler(tick, STEP)
        try:
            run()
        finally:
            conn.set_progress_handler(None, 0)
    return ticks * STEP


@pytest.mark.timeout(600)
def test_an_assemble_call_reads_no_more_from_a_longer_session(weave_factory, monkeypatch):
    from beeweave_core.backends.sqlite import events_sql

    # both sessions above the size a scope is ranked whole (exact BM25 over a small
    # session costs what the session holds, by design, up to that size)
    monkeypatch.setattr(events_sql, "SMALL_SCOPE", 100)
    small, large = 120, 600  # turns (about 2.4 events each)
    ws = weave_factory(index=False)
    wl = weave_factory(index=False)
    say(ws, "plants", _turns(0, small), user_id=None, prefix="s")
    say(wl, "plants", _turns(0, large), user_id=None, prefix="l")
    steps_s, reads_s = _read_steps(ws, "plants", small)
    steps_l, reads_l = _read_steps(wl, "plants", large)
    events_s = ws.store.session_stats("plants").events
    events_l = wl.store.session_stats("plants").events
    assert events_l >= 4 * events_s
    assert reads_s > 5 and reads_l > 5  # the calls really reached the database
    # a read of the whole session would make the larger call cost about 5x
    assert steps_l <= 1.6 * steps_s + 1_000, (steps_s, steps_l, events_s, events_l)


def test_the_step_count_sees_a_whole_session_read(weave_factory):
    """The detector itself: a timeline read of each session costs steps in proportion."""
    ws = weave_factory(index=False)
    say(ws, "plants", _turns(0, 40), user_id=None, prefix="s")
    say(ws, "more", _turns(0, 200), user_id=None, prefix="l")
    shared: SharedConnection = ws.store.connection  # type: ignore[attr-defined]
    counts = [(_steps(shared, lambda sid=sid: ws.store.scopes_in(sid)),
               _steps(shared, lambda sid=sid: ws.store.timeline(sid)))
              for sid in ("plants", "more")]  # fmt: skip
    (cheap_s, read_s), (cheap_l, read_l) = counts
    assert read_l >= 3 * read_s  # the detector grows with a whole-session read
    assert cheap_l <= cheap_s + 2 * STEP  # the scopes of a session: a few seeks, whatever its size
