"""Tenant-wide lexical search: FTS5's BM25, computed from bounded reads.

Real SQLite files throughout.  Where every query term has fewer rows than a probe
reads, the bounded search must give exactly what FTS5's exhaustive ``bm25()`` gives
(same events, same scores); where a term is common, it must still find an old event
holding a rare term, score no more than ``WIDE_POOL`` rows, and keep to its scope.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from beeweave_core.backends.sqlite import events_sql as q
from beeweave_core.backends.sqlite import wide_search as ws
from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.events import Event, EventType

_VOCAB = [
    *("lantern", "copper", "meadow", "harbour", "glacier", "thistle", "walnut", "sparrow"),
    *("quarry", "ember", "orchard", "canyon", "fossil", "violet", "ledger", "pigeon"),
    *("saffron", "tundra", "kettle", "marble", "relational", "happily", "ponies", "running"),
]


def _store(tmp_path: Path, tenant: str = "t1") -> SQLiteEventStore:
    return SQLiteEventStore(tmp_path / "wide.db", tenant=tenant)


def _sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.choices(
            _VOCAB, weights=[1 / (j + 1) for j in range(len(_VOCAB))], k=rng.randint(3, 14)
        )
        if i % 17 == 0:
            words.append(f"ZX-{4400 + i % 5}")
        if i % 23 == 0:
            words.append("Café naïve")
        out.append(" ".join(words))
    return out


def _fill(
    store: SQLiteEventStore, texts: list[str], *, prefix: str = "e", ts0: float = 1.0
) -> None:
    events = [
        Event(id=f"{prefix}{i}", session_id=f"{prefix}-s{i // 20}", content=t, ts=ts0 + i,
              type=EventType.USER_MESSAGE if i % 2 else EventType.ASSISTANT_MESSAGE)
        for i, t in enumerate(texts)
    ]  # fmt: skip
    store.append(events)


def _exhaustive(store: SQLiteEventStore, query: str, k: int) -> list[tuple[str, float]]:
    from beeweave_core.text.lexical import fts_query

    conn = store.connection.conn
    rows = conn.execute(q.EXHAUSTIVE, (fts_query(query), k)).fetchall()
    ids = dict(conn.execute(f"SELECT rowid, id FROM events WHERE rowid IN ({','.join('?' * len(rows))})",
                            [r for r, _ in rows]).fetchall())  # fmt: skip
    return [(ids[r], s) for r, s in rows]


@pytest.mark.parametrize(
    "query", ["walnut ledger", "relational ponies", "ZX-4403 kettle", "cafe", "happy run"]
)
def test_small_index_gives_fts5_bm25_exactly(tmp_path: Path, query: str) -> None:
    store = _store(tmp_path)
    try:
        _fill(store, _sentences(300, seed=3))
        got = [(ev.id, s) for ev, s in store.search_text(query, k=8)]
        want = _exhaustive(store, query, 8)
        assert got, query
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
        # same events wherever the score is not tied (compared to 9 decimals)
        got_r = [(i, round(s, 9)) for i, s in got]
        want_r = [(i, round(s, 9)) for i, s in want]
        distinct = {s for _, s in want_r if [x for _, x in want_r].count(s) == 1}
        assert {i for i, s in got_r if s in distinct} == {i for i, s in want_r if s in distinct}
    finally:
        store.close()


def test_rare_term_found_beyond_the_newest_rows_of_a_common_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old event holding a rare word comes first; no more than WIDE_POOL rows scored."""
    store = _store(tmp_path)
    scored: list[int] = []
    real = ws.score

    def counting(conn, rows, *a, **kw):  # type: ignore[no-untyped-def]
        scored.append(len(rows))
        return real(conn, rows, *a, **kw)

    monkeypatch.setattr(ws, "score", counting)
    try:
        texts = [f"meadow report number {i} meadow" for i in range(3 * q.WIDE_PROBE)]
        texts[5] = "meadow note about the obsidian turbine"  # old, and the only one
        _fill(store, texts)
        hits = store.search_text("meadow obsidian", k=5)
        assert hits[0][0].id == "e5"
        assert len(hits) == 5
        assert scored and max(scored) <= q.WIDE_POOL
    finally:
        store.close()


def test_old_short_rows_holding_both_words_outrank_many_newer_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows BM25 ranks first are old: terse notes holding both query words, written
    before many times more (than one probe reads) long rows holding both, and rows
    holding one.  The wide search must find those old rows (FTS5's exhaustive top 10)
    while reading and scoring a bounded number of rows."""
    store = _store(tmp_path)
    read: list[int] = []
    real = ws.probe

    def counting(conn, match, low, limit):  # type: ignore[no-untyped-def]
        found = real(conn, match, low, limit)
        read.append(len(found.rowids))
        return found

    monkeypatch.setattr(ws, "probe", counting)
    rng = random.Random(11)
    filler = ["pewter", "lagoon", "bramble", "cinder", "mosaic", "drizzle", "juniper", "tallow"]
    try:
        old = [f"quokka basalt {' '.join(rng.choices(filler, k=i % 4))}" for i in range(24)]
        newer = []
        for i in range(4 * q.WIDE_PROBE):
            words = rng.choices(filler, k=18)
            words[i % 18], words[(i * 7 + 3) % 18] = "quokka", "basalt"
            newer.append(" ".join(words))
            newer.append(f"quokka {' '.join(rng.choices(filler, k=6))}")
            newer.append(f"basalt {' '.join(rng.choices(filler, k=6))}")
        _fill(store, old + newer)
        got = store.search_text("quokka basalt", k=10)
        want = _exhaustive(store, "quokka basalt", 10)
        assert {ev.id for ev, _ in got} <= {f"e{i}" for i in range(len(old))}
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6)
        assert sum(read) <= q.WIDE_READ + 2 * q.WIDE_PROBE
    finally:
        store.close()


def test_pool_estimate_prefers_rare_words_and_short_rows() -> None:
    """The pool's order: rows known to hold rarer phrases first, and among rows holding
    the same, the shorter; rows met again in a conjunction gain its phrases."""
    totals = ws.IndexTotals(rows=10_000, avg_len=40.0, low=1, high=10_000)
    rare, common = totals.idf(20), totals.idf(2_000)
    found = ws.Candidates([rare, common], totals.avg_len)
    found.add(ws.Probe("c", [9_000, 8_000, 7_000], [10, 80, 12], complete=False), 0b10)
    found.add(ws.Probe("r", [500, 400], [90, 30], complete=True), 0b01)
    found.add(ws.Probe("r AND c", [7_000], [12], complete=True), 0b11)
    assert found.best(5) == [7_000, 400, 500, 9_000, 8_000]
    assert found.kth(2) > found.ceiling(0b10) > 0  # no common-only row can catch up


def test_conjunction_of_common_words_is_looked_for_among_their_newest_rows() -> None:
    totals = ws.IndexTotals(rows=1_000, avg_len=40.0, low=1, high=1_000)
    listed = ws.Probe("a", [900, 10], [5, 5], complete=True)
    dense = ws.Probe("b", list(range(1_000, 900, -1)), [5] * 100, complete=False)  # ~all rows
    assert ws._floor([listed, dense], totals, 0, walk=100) == 0  # joined along a's 2 rows
    floor = ws._floor([dense, dense], totals, 0, walk=100)
    assert 900 < floor < 1_000  # b's rows twice: 100 of them in the newest ~50 rowids


def test_wide_search_keeps_to_tenant_type_and_time(tmp_path: Path) -> None:
    store = _store(tmp_path, "t1")
    other = store.for_tenant("t2")
    try:
        _fill(other, ["glacier sparrow"] * 50, prefix="o")
        texts = [f"glacier entry {i}" for i in range(2 * q.WIDE_PROBE)]
        _fill(store, texts, ts0=1_000.0)
        hits = store.search_text("glacier sparrow", k=10)
        assert hits and all(ev.id.startswith("e") for ev, _ in hits)
        users = store.search_text("glacier", k=10, types=[EventType.USER_MESSAGE])
        assert users and all(ev.type == EventType.USER_MESSAGE for ev, _ in users)
        # an old time window: beyond every probe's first read, found by reading further
        old = store.search_text("glacier", k=5, since=1_000.0, until=1_010.0)
        assert {ev.id for ev, _ in old} <= {f"e{i}" for i in range(11)} and len(old) == 5
    finally:
        other.close()
        store.close()


def test_varints_and_stems_follow_sqlite() -> None:
    assert ws._varints(bytes([0x86, 0x8D, 0x20, 0x13])) == [100000, 19]
    import sqlite3

    conn = sqlite3.connect(":memory:")
    assert ws.stems(conn, ["running", "ponies", "relational", "café", "北京"]) == [
        ("run",),
        ("poni",),
        ("relat",),
        ("cafe",),
        ("北京",),
    ]


_NOTE = EventType.USER_MESSAGE


def test_recent_session_ids_follow_the_newest_active_events(tmp_path: Path) -> None:
    """Paged through the time index (pages of 1,000): the sessions of the newest events."""
    store = _store(tmp_path)
    try:
        events = [
            Event(id=f"r{i}", session_id=f"s{i % 7}", content=f"row {i}", ts=float(i), type=_NOTE)
            for i in range(2_500)
        ]
        events.append(Event(id="late", session_id="quiet", content="late", ts=5_000.0, type=_NOTE))
        events += [
            Event(id=f"b{i}", session_id="bulk", content="b", ts=4_000.0, type=_NOTE)
            for i in range(1_500)
        ]
        store.append(events)
        assert store.recent_session_ids(2) == ["quiet", "bulk"]
        # ties on ts across a page boundary: every session still comes, once
        assert store.recent_session_ids(9) == [
            "quiet",
            "bulk",
            *[f"s{d}" for d in (0, 6, 5, 4, 3, 2, 1)],
        ]
        store.soft_delete(["late"], "test")
        assert store.recent_session_ids(1) == ["bulk"]
    finally:
        store.close()
