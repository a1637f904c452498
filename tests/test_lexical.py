"""Lexical / entity search: words, numbers, codes and Chinese, on every store.

``search_text`` is part of the store seam (SQLite: FTS5 over jieba-segmented text;
Neo4j: a Lucene full-text index), so the behaviour tests run against both.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.events import Event, EventType
from beeweave_core.text import lucene
from beeweave_core.text.lexical import fts_query, fts_text, query_terms
from beeweave_core.text.segment import tokens

from .conftest import make_store

T0 = 1_700_000_000.0

DOCS = [
    ("en1", "s1", "Copy the orders table into the analytics warehouse every night."),
    ("en2", "s1", "Done: job JOB-7731 runs nightly at 02:00 UTC with a 30s timeout."),
    ("en3", "s1", "Estimate: 9,200 batches, 44 minutes, $181/month."),
    ("zh1", "s2", "我们的数据管道每天凌晨两点运行。"),
    ("zh2", "s2", "我们决定把批次大小改成两千行。"),
    ("zh3", "s2", "管理道路的部门今天开会。"),
    ("mix", "s3", "The batch size (批次大小) is now 2,000 rows."),
]


def ev(eid: str, sid: str, text: str, **kw: object) -> Event:
    return Event(id=eid, session_id=sid, type=kw.pop("type", EventType.USER_MESSAGE),
                 content=text, ts=kw.pop("ts", T0), **kw)  # type: ignore[arg-type]  # fmt: skip


def ids(hits: list[tuple[Event, float]]) -> list[str]:
    return [e.id for e, _ in hits]


@pytest.fixture
def loaded(store):
    store.append([ev(i, s, t) for i, s, t in DOCS])
    return store


# ----------------------------------------------------------- text analysis
def test_chinese_is_segmented_into_words():
    assert "批次" in fts_text("我们决定把批次大小改成两千行").split()
    assert tokens("数据管道") == ["数据", "管道"]
    # search mode also indexes the words inside a long word
    assert "人民" in fts_text("中华人民共和国").split()


def test_numbers_and_codes_become_matchable_terms():
    # the written unit as a phrase, and its number alone ("7731" finds "job 7731")
    assert query_terms("JOB-7731") == [["job", "7731"], ["7731"]]
    assert ["30"] in query_terms("30s") and ["s"] in query_terms("30s")
    assert ["2000"] in query_terms("2,000 rows")  # the bare form of a grouped number
    assert "2000" in fts_text("batches of 2,000 rows").split()
    assert ["181"] in query_terms("$181/month")


HOSTILE = [
    '"',
    '""',
    "'",
    "*",
    "NEAR(a b)",
    "a OR",
    "AND",
    "-",
    "^x",
    "col:value",
    "body:x",
    "(((",
    ")",
    'x" OR "1"="1',
    "\\",
    "\x00",
    "🙂",
    "   ",
    "",
    "a AND NOT b",
    "context:secret",
    "{body}: x",
    "+tenant:other",
    "x~2",
    "/regex/",
    "[a TO z]",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_queries_are_quoted_never_syntax(text):
    q = fts_query(text)
    if q is not None:
        # every term is a quoted string joined by OR: nothing else reaches FTS5
        for part in q.split(" OR "):
            assert part.startswith('"') and part.endswith('"')
    lq = lucene.escape(text)
    assert ":" not in lq.replace("\\:", "")


# ------------------------------------------------------ search over stores
def test_chinese_words_are_found(loaded):
    assert ids(loaded.search_text("管道"))[:1] == ["zh1"]
    assert set(ids(loaded.search_text("批次大小"))) >= {"zh2", "mix"}
    assert "zh3" not in ids(loaded.search_text("数据管道"))[:1]


def test_a_one_character_chinese_word_finds_the_compound_that_holds_it(store):
    """A question says 车 where the turn said 班车 and 发车: they share no jieba word,
    only characters, which the index holds too (and the query asks for)."""
    store.append([ev(i, s, t) for i, s, t in DOCS] + [ev("zh4", "s2", "周六的班车改到八点发车。")])
    assert ids(store.search_text("车几点走？"))[:1] == ["zh4"]
    # a whole word still outranks a stray shared character
    assert ids(store.search_text("数据管道"))[0] == "zh1"


def test_plain_unicode61_cannot_find_chinese(tmp_path: Path):
    """Why BeeWeave segments: SQLite's default tokenizer keeps a Chinese sentence whole."""
    db = sqlite3.connect(tmp_path / "plain.db")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(body, tokenize='unicode61')")
    db.execute("INSERT INTO f (body) VALUES (?)", ("我们决定把批次大小改成两千行。",))
    assert db.execute("SELECT count(*) FROM f WHERE f MATCH ?", ('"批次"',)).fetchone()[0] == 0
    db.execute("INSERT INTO f (body) VALUES (?)", (fts_text("我们决定把批次大小改成两千行。"),))
    assert db.execute("SELECT count(*) FROM f WHERE f MATCH ?", ('"批次"',)).fetchone()[0] == 1


def test_codes_and_numbers_are_found(loaded):
    assert ids(loaded.search_text("JOB-7731"))[0] == "en2"
    assert ids(loaded.search_text("what did it cost, $181?"))[0] == "en3"
    assert ids(loaded.search_text("9200 batches"))[0] == "en3"
    assert ids(loaded.search_text("warehouse"))[0] == "en1"


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_queries_do_not_raise(loaded, text):
    hits = loaded.search_text(text)
    assert isinstance(hits, list)
    assert all(e.tenant == loaded.tenant for e, _ in hits)


def test_filters(store):
    store.append(
        [
            ev("a", "s1", "deploy pipeline alpha", ts=T0, meta={"user_id": "u1"}),
            ev("b", "s2", "deploy pipeline beta", ts=T0 + 100, meta={"user_id": "u2"}),
            Event(id="c", session_id="s2", type=EventType.TOOL_RESULT,
                  content="deploy pipeline gamma", ts=T0 + 200),
        ]
    )  # fmt: skip
    assert set(ids(store.search_text("deploy pipeline"))) == {"a", "b", "c"}
    assert set(ids(store.search_text("deploy pipeline", session_id="s2"))) == {"b", "c"}
    assert set(ids(store.search_text("deploy pipeline", user_id="u1"))) == {"a"}
    assert set(ids(store.search_text("deploy", types=[EventType.TOOL_RESULT]))) == {"c"}
    assert set(ids(store.search_text("deploy", since=T0 + 50))) == {"b", "c"}
    assert set(ids(store.search_text("deploy", until=T0 + 150))) == {"a", "b"}
    assert store.search_text("deploy", types=[]) == []
    assert len(store.search_text("deploy", k=2)) == 2


def test_inactive_events_are_never_found(loaded):
    loaded.soft_delete(["en2"], "user asked")
    loaded.invalidate(["en1"], "plan changed")
    assert "en2" not in ids(loaded.search_text("JOB-7731"))
    assert "en1" not in ids(loaded.search_text("warehouse"))
    loaded.purge(ids=["en3"])
    assert "en3" not in ids(loaded.search_text("$181"))


def test_tenants_are_isolated(store, tmp_path):
    store.append([ev("mine", "s1", "secret launch code ZX-42")])
    other = store.for_tenant(store.tenant + "-other")
    try:
        other.append([ev("theirs", "s1", "their launch code ZX-42")])
        assert ids(store.search_text("ZX-42")) == ["mine"]
        assert ids(other.search_text("ZX-42")) == ["theirs"]
    finally:
        if hasattr(other, "purge_tenant"):
            other.purge_tenant()
        other.close()


# ----------------------------------------------------------- SQLite specifics
def test_reply_is_found_by_the_question_it_answers(sqlite_store):
    """The FTS ``context`` column holds the previous event's text, at half weight."""
    sqlite_store.append(
        [
            ev("q", "s1", "What did you think of the coconut ice cream?"),
            ev("a", "s1", "Super good! Rich and creamy."),
            ev("x", "s1", "Let's talk about the weather."),
        ]
    )
    found = ids(sqlite_store.search_text("coconut ice cream"))
    assert found[:2] == ["q", "a"]  # the question itself first, its answer next
    assert "x" not in found


def test_index_follows_writes_and_purges(sqlite_store):
    sqlite_store.append([ev("one", "s1", "alpha bravo")])
    assert ids(sqlite_store.search_text("alpha")) == ["one"]
    sqlite_store.append([ev("two", "s1", "alpha charlie")])
    assert set(ids(sqlite_store.search_text("alpha"))) == {"one", "two"}
    sqlite_store.purge(session_id="s1", tombstone=False)  # so s1 may be written again
    assert sqlite_store.search_text("alpha") == []
    sqlite_store.append([ev("three", "s1", "alpha delta")])  # reuses the purged rowids
    assert ids(sqlite_store.search_text("alpha")) == ["three"]
    assert sqlite_store.sync_text_index() == 0


def test_a_search_leaves_rows_it_cannot_return_to_the_next_sync(sqlite_store):
    """A read after a read finds only the first one's audit record new: indexing it would
    be a write transaction on the read path, for a row that search cannot return."""
    sqlite_store.append([ev("turn", "s1", "the kiln reaches cone six overnight")])
    turns = [EventType.USER_MESSAGE]
    assert ids(sqlite_store.search_text("kiln", types=turns)) == ["turn"]
    audit = ev("audit", "s1", "when does the kiln reach cone six?", type=EventType.RETRIEVAL)
    sqlite_store.append([audit])
    assert ids(sqlite_store.search_text("kiln", types=turns)) == ["turn"]
    assert sqlite_store.sync_text_index() == 1  # the audit row waited for this sync
    sqlite_store.append([ev("later", "s1", "kiln unloaded", seq=5)])
    sqlite_store.append([ev("audit2", "s1", "is the kiln unloaded?", type=EventType.RETRIEVAL)])
    assert ids(sqlite_store.search_text("kiln", types=turns)) == ["later", "turn"]
    assert sqlite_store.sync_text_index() == 0  # a turn was new: that search indexed both
    assert set(ids(sqlite_store.search_text("kiln"))) == {"turn", "audit", "later", "audit2"}


def test_old_database_is_migrated_and_indexed(tmp_path: Path):
    """A v2 file (no full-text table) gets one on open, covering the old rows."""
    path = tmp_path / "old.db"
    store = SQLiteEventStore(path, tenant="t")
    store.append([ev("old", "s1", "legacy row about JOB-1234 和 批次")])
    store.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE events_fts")
    db.execute("DROP TRIGGER events_fts_delete")
    db.execute("UPDATE beeweave_meta SET value = '2' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    store = SQLiteEventStore(path, tenant="t")
    try:
        assert store.schema_version >= 3
        assert ids(store.search_text("JOB-1234")) == ["old"]
        assert ids(store.search_text("批次")) == ["old"]
    finally:
        store.close()


def test_a_v7_index_without_chinese_characters_is_rebuilt_on_open(tmp_path: Path):
    """A file whose index holds jieba's words only (as version 7 wrote it) gets the
    characters too: its index is rebuilt from the events, the events untouched."""
    path = tmp_path / "v7.db"
    store = SQLiteEventStore(path, tenant="t")
    store.append([ev("bus", "s1", "周六的班车改到八点发车。")])
    assert store.sync_text_index() == 1
    store.close()
    db = sqlite3.connect(path)
    rewritten = db.execute("UPDATE events_fts SET body = ?", ("周六 的 班车 改 到 八点 发车 。",))
    assert rewritten.rowcount == 1
    db.execute("UPDATE beeweave_meta SET value = '7' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    store = SQLiteEventStore(path, tenant="t")
    try:
        assert ids(store.search_text("车几点走？")) == ["bus"]
        assert [e.content for e in store.timeline("s1")] == ["周六的班车改到八点发车。"]
    finally:
        store.close()


def test_other_process_writes_are_searchable(tmp_path: Path):
    a = make_store("sqlite", tmp_path, tenant="t")
    b = SQLiteEventStore(tmp_path / "events.db", tenant="t")  # a second connection
    try:
        a.append([ev("w", "s1", "written by the first connection")])
        assert ids(b.search_text("first connection")) == ["w"]
    finally:
        a.close()
        b.close()


def test_scoped_search_sees_every_change_between_searches(tmp_path: Path):
    """A session's search reuses its ranked table only while nothing was written: new
    turns, invalidations, purges and another connection's writes all show at once."""
    a = make_store("sqlite", tmp_path, tenant="t")
    b = SQLiteEventStore(tmp_path / "events.db", tenant="t")  # a second connection
    try:
        a.append([ev("k1", "trip", "the kayak rental opens at nine"),
                  ev("k2", "trip", "pack the dry bags before the kayak trip")])  # fmt: skip
        for _ in range(2):  # the second search runs on the kept table
            assert set(ids(a.search_text("kayak", session_id="trip"))) == {"k1", "k2"}
        a.append([ev("k3", "trip", "kayak paddles are in the van")])
        assert set(ids(a.search_text("kayak", session_id="trip"))) == {"k1", "k2", "k3"}
        a.invalidate(["k1"], "plan changed")
        assert set(ids(a.search_text("kayak", session_id="trip"))) == {"k2", "k3"}
        b.append([ev("k4", "trip", "a spare kayak seat, bought today")])
        assert "k4" in ids(a.search_text("kayak", session_id="trip"))
        b.purge(ids=["k2"])
        assert set(ids(a.search_text("kayak", session_id="trip"))) == {"k3", "k4"}
        a.append([ev("o1", "other", "a kayak in another session")])
        assert ids(a.search_text("kayak", session_id="other")) == ["o1"]  # another scope
        assert set(ids(a.search_text("kayak", session_id="trip"))) == {"k3", "k4"}
        # a purged top row's rowid is reused: the same scope rowids, other text
        a.append([ev("r1", "redo", "first draft about canoes")])
        assert ids(a.search_text("canoes", session_id="redo")) == ["r1"]
        a.purge(session_id="redo", tombstone=False)
        a.append([ev("r2", "redo", "second draft about rafts")])
        assert ids(a.search_text("rafts", session_id="redo")) == ["r2"]
        assert a.search_text("canoes", session_id="redo") == []
    finally:
        a.close()
        b.close()
