"""Every scoped read is driven by an index on its scope, never by a scan of all events.

The reads run for real against a filled store; every statement they send is
recorded as sent and then explained by the database itself (SQLite ``EXPLAIN
QUERY PLAN``, Neo4j ``EXPLAIN``).  A plan that walks every event (a table or full
index scan of ``events``/``edges``, ``AllNodesScan``, a label scan of ``Event``)
fails the test with the statement and its plan, so a regression that makes a
session's query cost grow with the store cannot come back unnoticed.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core.events import Event, EventType
from beeweave_core.store import EventStore
from tests.conftest import _purge_tenant, make_store

_WORDS = [
    "kettle",
    "harbour",
    "violet",
    "ledger",
    "quarry",
    "pigeon",
    "saffron",
    "tundra",
    "walnut",
    "ember",
    "lantern",
    "orchard",
    "canyon",
    "meadow",
    "fossil",
    "glacier",
    "sparrow",
    "thistle",
    "copper",
    "marble",
]


def _fill(store: EventStore, users: int = 4, sessions: int = 3, per: int = 12) -> None:
    """A few users with a few sessions each, in causal chains, with varied words."""
    events = []
    for u in range(users):
        for s in range(sessions):
            prev = None
            for i in range(per):
                eid = f"p{u}-{s}-{i}"
                words = " ".join(_WORDS[(u * 7 + s * 3 + i * j) % len(_WORDS)] for j in range(6))
                events.append(Event(
                    id=eid, session_id=f"u{u}-s{s}", content=f"{words} item {i}",
                    type=EventType.USER_MESSAGE if i % 2 else EventType.ASSISTANT_MESSAGE,
                    parents=(prev,) if prev else (), meta={"user_id": f"user{u}"},
                ))  # fmt: skip
                prev = eid
    store.append(events)


def _scoped_reads(store: EventStore) -> None:
    """The reads that name a session, a user or an event (plus the bounded tenant search)."""
    store.timeline("u1-s2")
    store.timeline("u1-s2", last=5, types=[EventType.USER_MESSAGE], since=0.0)
    store.session_stats("u1-s2")
    store.sessions(user_id="user2")
    store.user_session_ids("user3")
    store.recent_session_ids(3)
    store.recent_user_sessions("user2", 2)  # cross-session recall, per assembly
    store.search_text("harbour violet", session_id="u1-s2")
    store.search_text("quarry ledger", user_id="user2")
    store.search_text("quarry ledger", user_id="user2", session_id="u2-s0")
    store.search_text("quarry ledger", user_id="user2", types=[EventType.USER_MESSAGE])
    store.search_text("walnut tundra", k=5)  # tenant-wide: bounded probes and pool
    store.search_text("kettle ember marble", k=5, types=[EventType.USER_MESSAGE])
    store.ancestors("p1-2-8", depth=4)
    store.descendants("p1-2-3", depth=4)
    store.around(store.get(["p1-2-8", "p3-2-4"]), depth=3, neighbours=2)  # recall's graph
    store.edges(session_id="u1-s2")
    store.edges(event_id="p1-2-3", direction="both")
    store.get(["p0-0-1", "p3-2-4"])


# ------------------------------------------------------------------ SQLite
#: A plan line that visits every row of events or edges (or a whole index of them).
#: A SEARCH bound by the tenant alone walks the whole tenant (one index prefix).
_SQLITE_FULL_SCAN = re.compile(
    r"^SCAN (events|edges|e|v|a|b|p)\b(?! VIRTUAL)"
    r"|^SEARCH \w+ USING (COVERING )?(INDEX \w+|PRIMARY KEY) \(tenant=\?\)$"
    # every event of one type in the tenant (every user's memories, say)
    r"|^SEARCH \w+ USING (COVERING )?INDEX events_type \(tenant=\? AND type=\?\)$"
)
#: FTS5's ranking functions count every row holding each query term (the IDF) before
#: ranking: on the main index that is a walk over most of it for common words.
_RANKS_MAIN_INDEX = re.compile(
    r"\b(bm25|rank)\b.*\bevents_fts\b|\bevents_fts\b.*\b(bm25|rank)\b", re.S
)


def _sqlite_statements(store: Any) -> list[str]:
    """Fill, then record (expanded, with values) every statement the scoped reads send."""
    _fill(store)
    sent: list[str] = []
    conn: sqlite3.Connection = store.connection.conn
    conn.set_trace_callback(sent.append)
    try:
        _scoped_reads(store)
    finally:
        conn.set_trace_callback(None)
    return [s for s in sent if re.match(r"\s*(SELECT|WITH|INSERT INTO (events_fts|temp))", s)]


def _sqlite_plan(conn: sqlite3.Connection, sql: str) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]


def test_sqlite_scoped_reads_use_an_index(tmp_path: Path) -> None:
    store = make_store("sqlite", tmp_path)
    try:
        statements = _sqlite_statements(store)
        assert len(statements) >= 12, statements  # the reads really reached the database
        conn = store.connection.conn  # type: ignore[attr-defined]
        for sql in statements:
            plan = _sqlite_plan(conn, sql)
            bad = [line for line in plan if _SQLITE_FULL_SCAN.match(line)]
            assert not bad, f"full scan in\n{sql}\nplan: {plan}"
            fts = [line for line in plan if line.startswith("SCAN events_fts VIRTUAL")]
            # the main FTS index is walked only by a MATCH or a rowid bound, never whole
            # (MAX(rowid) is a SEARCH: one step from the end)
            assert all(re.search(r"INDEX \d+:\S*[M=<>]", line) for line in fts), (sql, plan)
            assert not _RANKS_MAIN_INDEX.search(sql), f"main-index ranking in\n{sql}"
    finally:
        store.close()


def test_sqlite_plan_check_catches_a_full_scan(tmp_path: Path) -> None:
    """The detector itself: an unindexed filter on events is reported as a scan."""
    store = make_store("sqlite", tmp_path)
    try:
        _fill(store, users=1, sessions=1, per=3)
        conn = store.connection.conn  # type: ignore[attr-defined]
        plan = _sqlite_plan(conn, "SELECT id FROM events WHERE content LIKE '%kettle%'")
        assert any(_SQLITE_FULL_SCAN.match(line) for line in plan), plan
        ranked = "SELECT rowid FROM events_fts WHERE events_fts MATCH ? ORDER BY rank LIMIT 5"
        assert _RANKS_MAIN_INDEX.search(ranked)
        assert not _RANKS_MAIN_INDEX.search("SELECT bm25(scope_fts) FROM temp.scope_fts")
    finally:
        store.close()


# ------------------------------------------------------------------- Neo4j
_NEO4J_FULL_SCAN = {"AllNodesScan", "NodeByLabelScan", "NodeIndexScan",
                    "DirectedAllRelationshipsScan", "UndirectedAllRelationshipsScan"}  # fmt: skip


def _operators(plan: Any) -> Iterator[tuple[str, str]]:
    op = plan.get("operatorType", "").split("@")[0]
    yield op, str(plan.get("args", {}).get("Details", ""))
    for child in plan.get("children", []):
        yield from _operators(child)


@pytest.fixture
def recorded_neo4j(
    neo4j_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[EventStore, list[tuple[str, dict[str, Any]]]]]:
    """A filled Neo4j store whose read statements (with their parameters) are recorded."""
    from beeweave_core.backends.neo4j import tx

    store = make_store("neo4j", tmp_path)
    _fill(store)
    sent: list[tuple[str, dict[str, Any]]] = []
    real: Callable[..., list[Any]] = tx.run

    def recording(driver: Any, database: Any, query: str, params: dict[str, Any], **kw: Any):
        sent.append((query, dict(params)))
        return real(driver, database, query, params, **kw)

    monkeypatch.setattr(tx, "run", recording)
    try:
        yield store, sent
    finally:
        monkeypatch.undo()
        _purge_tenant(store)
        store.close()


def test_neo4j_scoped_reads_use_an_index(recorded_neo4j: Any) -> None:
    store, sent = recorded_neo4j
    _scoped_reads(store)
    assert len(sent) >= 10, [q for q, _ in sent]
    for query, params in sent:
        records, summary, _ = store.driver.execute_query("EXPLAIN " + query, params)
        ops = list(_operators(summary.plan))
        bad = [(op, d) for op, d in ops if op in _NEO4J_FULL_SCAN]
        assert not bad, f"full scan {bad} in\n{query}"


def test_neo4j_plan_check_catches_a_label_scan(recorded_neo4j: Any) -> None:
    """The detector itself: a filter on an unindexed property scans every Event."""
    store, _ = recorded_neo4j
    query = "MATCH (e:Event) WHERE e.content CONTAINS $w RETURN e.id"
    _, summary, _ = store.driver.execute_query("EXPLAIN " + query, {"w": "kettle"})
    assert {op for op, _ in _operators(summary.plan)} & _NEO4J_FULL_SCAN


def test_neo4j_append_reaches_every_node_it_links_by_a_seek(recorded_neo4j: Any) -> None:
    """The append's CREATE draws edges to events of an earlier part by element id and
    to stored ones through the (tenant, id) index: never a scan, whatever the store holds."""
    from beeweave_core.backends.neo4j import events_cypher as q

    store, _ = recorded_neo4j
    params = {
        "tenant": store.tenant, "sessions": [],
        "rows": [{"props": {"tenant": store.tenant, "id": "new-1"}, "label": "UserMessage"}],
        "near": {"CAUSED_BY": [[0, 0]]}, "far": {"REFERS_TO": [[0, "4:x:1"]]},
        "seek": {"DERIVED_FROM": [[0, "stored-1"]]},
        "next_near": [], "next_far": [["4:x:1", 0]], "next_seek": [["stored-1", 0]],
    }  # fmt: skip
    _, summary, _ = store.driver.execute_query("EXPLAIN " + q.CYPHER_CREATE_EVENTS, params)
    ops = list(_operators(summary.plan))
    assert not [(op, d) for op, d in ops if op in _NEO4J_FULL_SCAN]
    assert {"NodeByElementIdSeek", "NodeUniqueIndexSeek(Locking)"} <= {op for op, _ in ops}


def test_neo4j_append_statements_keep_a_plan_that_seeks(recorded_neo4j: Any) -> None:
    """The append's statements keep their first plan (``replan=skip``): planned anew
    now (``replan=force``: on a fresh server the store holds a few dozen events, the
    counts a kept plan is made with), each still finds its nodes by a seek."""
    from beeweave_core.backends.neo4j import events_cypher as q

    store, _ = recorded_neo4j
    session = {"id": "s0", "last_seq": 3, "context": "kettl", "users": ["u0"], "scopes": []}
    statements = {
        q.CYPHER_BEGIN_APPEND: {"session_ids": ["s0", "s-new"], "context_chars": 2000},
        q.CYPHER_FIND_IDS: {"ids": ["e-1", "e-2"]},
        q.CYPHER_SET_LAST_SEQ: {"sessions": [session]},
    }
    for statement, params in statements.items():
        assert statement.startswith(q.KEEP_PLAN)
        forced = "CYPHER replan=force EXPLAIN " + statement.removeprefix(q.KEEP_PLAN)
        _, summary, _ = store.driver.execute_query(forced, {"tenant": store.tenant, **params})
        ops = list(_operators(summary.plan))
        assert not [(op, d) for op, d in ops if op in _NEO4J_FULL_SCAN], statement
        assert any("Seek" in op for op, _ in ops), (statement, ops)
    assert q.CYPHER_CREATE_EVENTS.startswith(q.KEEP_PLAN)  # its seeks: the test above
