"""What only the Neo4j store has: its schema, labels and relationships, full-text
search (Chinese and English), locking under concurrent writers, routing URIs, and
the driver's lifecycle.  Runs against the real server named by NEO4J_URI."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j.exceptions import DriverError

from beeweave_core.backends.neo4j import events_cypher as q
from beeweave_core.backends.neo4j.events import Neo4jEventStore
from beeweave_core.events import TYPE_LABELS, Edge, EdgeType, EventType
from beeweave_core.text.lucene import escape as lucene_escape

from .conftest import _purge_tenant, neo4j_auth
from .test_store_conformance import T0, chain, ev


def cypher(store: Neo4jEventStore, query: str, **params: Any) -> list[Any]:
    """Look into the graph directly (the test's own parameterised queries)."""
    return store.driver.execute_query(query, params, database_=store.database).records


def tenant_nodes(store: Neo4jEventStore) -> int:
    """The tenant's nodes but the tombstones purges leave on purpose."""
    rows = cypher(store, "MATCH (n) WHERE n.tenant = $t AND NOT n:Tombstone "
                  "RETURN count(n) AS n", t=store.tenant)  # fmt: skip
    return rows[0]["n"]


@pytest.fixture
def make(neo4j_uri: str) -> Iterator[Any]:
    """``make(tenant=None, uri=None, **kw)`` → a store of its own; all purged after."""
    made: list[Neo4jEventStore] = []

    def factory(tenant: str | None = None, uri: str | None = None, **kw: Any) -> Neo4jEventStore:
        s = Neo4jEventStore(
            uri or neo4j_uri,
            tenant=tenant or f"n4-{uuid.uuid4().hex[:10]}",
            auth=neo4j_auth(),
            **kw,
        )
        made.append(s)
        return s

    yield factory
    for s in reversed(made):
        try:
            _purge_tenant(s)
        finally:
            s.close()


def test_schema_objects_exist_with_the_chosen_analyzer(neo4j_store):
    constraints = {
        r["name"]: (r["labelsOrTypes"], r["properties"], r["type"])
        for r in cypher(neo4j_store, "SHOW CONSTRAINTS YIELD name, labelsOrTypes, properties, type")
    }
    assert constraints["beeweave_event_id"] == (["Event"], ["tenant", "id"], "UNIQUENESS")
    assert constraints["beeweave_event_seq"] == (
        ["Event"], ["tenant", "session_id", "seq"], "UNIQUENESS",
    )  # fmt: skip
    assert constraints["beeweave_session_id"][:2] == (["Session"], ["tenant", "id"])
    assert constraints["beeweave_artifact_sha"][:2] == (["Artifact"], ["tenant", "sha256"])
    indexes = {
        r["name"]: r
        for r in cypher(
            neo4j_store,
            "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, state, options",
        )
    }
    assert "beeweave_event_ts" not in indexes  # no read uses it: writes no longer pay for it
    assert indexes["beeweave_event_user_session"]["properties"] == [
        "tenant",
        "user_id",
        "session_id",
    ]
    assert not set(q.OBSOLETE_INDEXES) & set(indexes)  # (tenant, user_id): its prefix serves
    ft = indexes[q.FULLTEXT_INDEX]
    assert ft["type"] == "FULLTEXT" and ft["state"] == "ONLINE"
    assert ft["properties"] == ["terms", "tenant", "session_id"]
    # the terms come analysed already (the SQLite store's tokens): split on spaces only
    assert ft["options"]["indexConfig"]["fulltext.analyzer"] == "whitespace"
    assert not set(q.OBSOLETE_INDEXES) & set(indexes)
    # Lucene work leaves the commit; searches wait for it (test below)
    assert ft["options"]["indexConfig"]["fulltext.eventually_consistent"] is True
    assert all(i["state"] == "ONLINE" for n, i in indexes.items() if n.startswith("beeweave_"))


def test_every_event_type_gets_its_label_and_edges_their_type(neo4j_store):
    events = [ev(f"e-{t.value}", etype=t, content=t.value) for t in EventType]
    neo4j_store.append(events)
    neo4j_store.append(chain("c"))
    neo4j_store.append([ev("sum", "c", EventType.SUMMARY, links={EdgeType.SUMMARIZES: ("c-u",)}),
                        ev("mem", "c", EventType.MEMORY, links={EdgeType.DERIVED_FROM: ("c-tr",)})])  # fmt: skip
    neo4j_store.invalidate(["mem"], "void", by="sum")
    rows = cypher(
        neo4j_store,
        "MATCH (e:Event {tenant: $t}) WHERE e.id STARTS WITH 'e-' RETURN e.id AS id, labels(e) AS l",
        t=neo4j_store.tenant,
    )
    labels = {r["id"]: sorted(r["l"]) for r in rows}
    assert labels == {f"e-{t.value}": sorted(["Event", TYPE_LABELS[t]]) for t in EventType}
    assert TYPE_LABELS[EventType.TOOL_RESULT] == "ToolResult"
    rel_types = cypher(
        neo4j_store,
        "MATCH (a:Event {tenant: $t})-[r]->(b:Event) RETURN DISTINCT type(r) AS t",
        t=neo4j_store.tenant,
    )
    assert {r["t"] for r in rel_types} == {t.value for t in EdgeType}
    # NEXT is materialised: one chain per session, seq → seq + 1
    bad = cypher(
        neo4j_store,
        "MATCH (a:Event {tenant: $t})-[:NEXT]->(b) WHERE b.seq <> a.seq + 1 "
        "OR b.session_id <> a.session_id RETURN count(*) AS n",
        t=neo4j_store.tenant,
    )
    assert bad[0]["n"] == 0


def test_full_text_finds_chinese_phrases_and_english_words(neo4j_store):
    docs = {
        "zh1": "数据管道的超时时间是三十秒",
        "zh2": "管理道路的预算",
        "zh3": "每晚把订单表复制到分析数据仓库，批量大小为两千行",
        "en1": "The nightly ETL job copies the orders table into the warehouse",
        "en2": "job JOB-7731 runs at 02:00 UTC with batches of 2000 rows",
        "mix": "批量大小 batch size 2000",
    }
    # one session each: no doc is another's previous turn (see the context test below)
    neo4j_store.append(
        [ev(k, f"s-{k}", content=v, ts=T0 + i) for i, (k, v) in enumerate(docs.items())]
    )
    ids = lambda hits: [e.id for e, _ in hits]  # noqa: E731
    hits = neo4j_store.search_text("管道")
    # the word first; 管理道路 shares only the characters 管 and 道, so it comes after
    assert ids(hits) == ["zh1", "zh2"] and hits[0][1] > hits[1][1]
    assert ids(neo4j_store.search_text("数据管道"))[0] == "zh1"
    assert set(ids(neo4j_store.search_text("批量大小"))) == {"zh3", "mix"}
    assert ids(neo4j_store.search_text("warehouse")) == ["en1"]
    assert ids(neo4j_store.search_text("JOB-7731"))[0] == "en2"
    assert all(s > 0 for _, s in neo4j_store.search_text("job"))
    # only stop words: those are the query (as on SQLite), never an error
    assert set(ids(neo4j_store.search_text("the of and"))) == {"en1", "en2"}
    assert neo4j_store.search_text("") == [] and neo4j_store.search_text("x", k=0) == []


def test_full_text_stems_english_and_counts_the_previous_turn(neo4j_store):
    """A reply is found by the words of what it answers (at a lower score than the
    question itself), and English words match their other forms, as on SQLite."""
    neo4j_store.append([
        ev("q", "trip", content="Which trail did you walk with your sister?", ts=T0),
        ev("a", "trip", content="The ridge one above the lake, in May.", ts=T0 + 1),
        ev("x", "trip", content="Unrelated: the printer ran out of toner.", ts=T0 + 2),
        ev("h", "other", content="She hiked the coastal paths every summer.", ts=T0 + 3),
    ])  # fmt: skip
    hits = neo4j_store.search_text("trail walked with her sister")
    assert [e.id for e, _ in hits] == ["q", "a"]  # x follows a, not the question
    assert hits[0][1] > hits[1][1] > 0
    assert [e.id for e, _ in neo4j_store.search_text("hiking paths")] == ["h"]
    assert [e.id for e, _ in neo4j_store.search_text("lake", k=5)] == ["a", "x"]


#: A small made-up corpus for the rank comparison with SQLite: stems, numbers with
#: separators, codes, a reply answering its question, an empty marker in between.
PARITY_TURNS = {
    "camp": [
        "Are you still planning the canoe trip to the glacier lakes?",
        "Yes! We paddled there twice last autumn and loved it.",
        "",
        "The permit for lake camping costs 1,250 crowns per group.",
    ],
    "ops": [
        "Ticket OPS-4417: the backup job stalls at 97% every night.",
        "Restarting the backup agent fixed OPS-4417 for now.",
        "Paddling club newsletter: autumn schedule attached.",
    ],
    "misc": ["Glacier photos from the trip are in the shared album.", "Lovely photos!"],
}
PARITY_QUERIES = ("canoe trip glacier", "how much does lake camping cost", "1250",
                  "OPS-4417 backup", "paddling in autumn", "who loved the photos",
                  "planned trips")  # fmt: skip


def test_full_text_ranks_like_the_sqlite_store(make, tmp_path):
    """The same events and questions find the same events on both stores, the same
    best one when SQLite's is clear: the index holds SQLite's tokens (stems, numbers,
    codes) with the previous turn, and the query is SQLite's terms.  (Scores differ
    in detail: Lucene's IDF is the whole database's, and its BM25 sees the
    previous turn's half weight as a doubled own text.)"""
    from beeweave_core.weave import open_store

    neo, lite = make(), open_store(f"sqlite:///{tmp_path / 'p.db'}")
    events = [
        ev(f"{sid}-{i}", sid, content=text, ts=T0 + i)
        for sid, texts in PARITY_TURNS.items() for i, text in enumerate(texts)
    ]  # fmt: skip
    neo.append(events)
    lite.append(events)
    try:
        for query in PARITY_QUERIES:
            mine = lite.search_text(query, k=5)
            assert mine, query  # every question finds something on SQLite
            found = neo.search_text(query, k=5)
            assert {e.id for e, _ in found} == {e.id for e, _ in mine}, query  # same matches
            if mine[0][1] >= 1.25 * (mine[1][1] if len(mine) > 1 else 0.0):  # a clear best
                assert found[0][0].id == mine[0][0].id, query
    finally:
        lite.close()


def test_purging_a_turn_takes_its_words_out_of_the_next_ones_text(neo4j_store):
    neo4j_store.append([
        ev("p1", "chat", content="My locker code is marmoset 5531", ts=T0),
        ev("p2", "chat", content="Noted, I will remember that.", ts=T0 + 1),
    ])  # fmt: skip
    assert [e.id for e, _ in neo4j_store.search_text("marmoset")] == ["p1", "p2"]
    neo4j_store.purge(ids=["p1"])
    assert neo4j_store.search_text("marmoset") == []  # p2 no longer holds p1's words
    rows = cypher(neo4j_store, "MATCH (e:Event {tenant: $t}) RETURN e.terms AS terms",
                  t=neo4j_store.tenant)  # fmt: skip
    assert rows and all("marmoset" not in r["terms"] for r in rows)


def test_a_reply_in_a_later_append_holds_the_turn_before_it(neo4j_store):
    """The session node carries its last content's tokens from one append to the
    next (an empty turn in between passes them on; a purge of the last turn moves
    them back to the turn before it)."""
    neo4j_store.append([ev("c1", "talk", content="Which kayak rental did you pick?", ts=T0)])
    neo4j_store.append([ev("c2", "talk", EventType.MODEL_CALL, content="", ts=T0 + 1)])
    neo4j_store.append([ev("c3", "talk", content="The blue shed by the pier.", ts=T0 + 2)])
    found = lambda q: [e.id for e, _ in neo4j_store.search_text(q)]  # noqa: E731
    assert found("kayak rentals")[0] == "c1"
    assert set(found("kayak rentals")) == {"c1", "c2", "c3"}  # c2's text: its context only
    neo4j_store.purge(ids=["c3"])
    neo4j_store.append([ev("c4", "talk", content="Paddles were included.", ts=T0 + 3)])
    assert set(found("kayak")) == {"c1", "c2", "c4"}
    neo4j_store.append([ev("c5", "talk", content="Sunset is at nine.", ts=T0 + 4)])
    assert found("paddle") == ["c4", "c5"]
    assert set(found("kayak")) == {"c1", "c2", "c4"}
    assert found("pier") == []


def test_a_big_append_indexes_the_same_text_as_small_ones(make, monkeypatch):
    """A big append tokenises a part at a time; its events and sessions get what
    appends of one turn each give."""
    from beeweave_core.backends.neo4j import parts

    monkeypatch.setattr(parts, "PART_EVENTS", 16)

    words = ["otter", "canal", "lantern", "barge", "lock", "keeper", "moss", "tide"]
    events = [
        ev(f"b{i}", f"s{i % 3}", content="" if i % 11 == 5 else
           " ".join(words[(i * k) % len(words)] for k in range(1, 4 + i % 4)), ts=T0 + i)
        for i in range(104)
    ]  # fmt: skip
    big, small = make(), make()
    big.append(events[:30])
    # an edge to an event not stored yet: the big append fills its placeholder in
    ahead = Edge(src="b0", dst="b40", type=EdgeType.REFERS_TO)
    big.link([ahead])
    big.append(events[30:])  # in parts
    for e in events:
        small.append([e])
        if e.id == "b0":
            small.link([ahead])

    def stored(store: Neo4jEventStore) -> tuple[dict[str, str], dict[str, str]]:
        t = store.tenant
        ev_rows = cypher(store, "MATCH (e:Event {tenant: $t}) RETURN e.id AS k, e.terms AS v", t=t)
        s_rows = cypher(store, "MATCH (s:Session {tenant: $t}) RETURN s.id AS k, "
                        "s.context_terms AS v", t=t)  # fmt: skip
        return {r["k"]: r["v"] for r in ev_rows}, {r["k"]: r["v"] for r in s_rows}

    assert stored(big) == stored(small)
    assert big.edges(event_id="b0") == small.edges(event_id="b0")
    assert all(stored(big)[0].values()) and len(stored(big)[0]) == len(events)


def graph_of(store: Neo4jEventStore) -> dict[str, Any]:
    """Everything an append wrote for a tenant, read from the graph itself."""
    t = store.tenant
    rel = ("MATCH (a:Event {tenant: $t})-[r]->(b) "
           "RETURN a.id AS a, type(r) AS r, coalesce(b.id, b.sha256) AS b")  # fmt: skip
    node = ("MATCH (e:Event {tenant: $t}) RETURN e.id AS id, e.seq AS seq, e.session_id AS sid, "
            "e.terms AS terms, labels(e) AS labels")  # fmt: skip
    sess = "MATCH (s:Session {tenant: $t}) RETURN s.id AS id, s.last_seq AS n, s.context_terms AS c"
    return {
        "edges": sorted((r["a"], r["r"], r["b"]) for r in cypher(store, rel, t=t)),
        "nodes": sorted(
            (r["id"], r["seq"], r["sid"], r["terms"], sorted(r["labels"]))
            for r in cypher(store, node, t=t)
        ),  # fmt: skip
        "sessions": sorted((r["id"], r["n"], r["c"]) for r in cypher(store, sess, t=t)),
    }


def test_an_append_in_many_parts_writes_what_single_events_write(make, monkeypatch):
    """Parts of a few events each: a session's order and NEXT chain run across parts,
    edges reach events of earlier parts (by seek) and of later ones (drawn at the end),
    placeholders and duplicates behave as in one statement, artifacts are linked."""
    from beeweave_core.backends.neo4j import parts

    monkeypatch.setattr(parts, "PART_EVENTS", 7)
    n = 77
    long_text = "a warehouse inventory line " * 3000  # past the inline limit: an artifact
    events = []
    for i in range(n):
        links = {}
        if i % 9 == 2 and i + 20 < n:
            links[EdgeType.REFERS_TO] = (f"p{i + 20}",)  # an event of a later part
        if i % 10 == 8:
            links[EdgeType.DERIVED_FROM] = (f"p{i - 8}", f"p{i - 1}")  # earlier part, same part
        events.append(ev(
            f"p{i}", f"s{i % 3}", content=long_text if i == 30 else f"lighthouse log {i} gull",
            ts=T0 + i, parents=(f"p{i - 3}",) if i >= 3 else (), links=links,
        ))  # fmt: skip
    big, small = make(), make()
    ahead = Edge(src="x-first", dst="p40", type=EdgeType.SUMMARIZES)  # p40: a placeholder
    for store in (big, small):
        store.append([ev("x-first", "s0", content="before the batch", ts=T0 - 1)])
        store.link([ahead])
    first = big.append(events[:5])
    result = big.append(events)  # the first five again: duplicates
    for e in events:
        small.append([e])

    assert (first.inserted, result.inserted, result.duplicates) == (5, n - 5, 5)
    assert result.ids == [e.id for e in events[5:]]
    assert graph_of(big) == graph_of(small)  # seqs, NEXT chain, edges, labels, terms
    graph = graph_of(big)
    assert ("p2", "REFERS_TO", "p22") in graph["edges"] and ("p6", "NEXT", "p9") in graph["edges"]
    assert [e.seq for e in big.timeline("s1")] == list(range(len(big.timeline("s1"))))
    body = big.get(["p30"])[0].payload["$artifact"]
    assert big.get_artifact(body["sha256"]) == long_text


def test_an_imported_session_is_found_with_its_previous_turns(make):
    src, dst = make(), make()
    src.append([ev("i1", "trip", content="Which fjord did you sail through?", ts=T0),
                ev("i2", "trip", content="Geirangerfjord, in heavy rain.", ts=T0 + 1)])  # fmt: skip
    dst.import_session(src.export_session("trip"))
    assert [e.id for e, _ in dst.search_text("sail")] == ["i1", "i2"]
    dst.append([ev("i3", "trip", content="Then a ferry back to Hellesylt.", ts=T0 + 2)])
    assert [e.id for e, _ in dst.search_text("geirangerfjord")] == ["i2", "i3"]


def test_full_text_filters_scope_and_hostile_queries(make):
    a, b = make(), make()
    a.append([ev("a1", "s1", content="deploy the pipeline", ts=T0, meta={"user_id": "ann"}),
              ev("a2", "s2", EventType.TOOL_RESULT, content="pipeline deployed", ts=T0 + 10),
              ev("a3", "s2", content="pipeline removed", ts=T0 + 20)])  # fmt: skip
    b.append([ev("b1", "s1", content="pipeline of tenant b")])
    found = lambda hits: sorted(e.id for e, _ in hits)  # noqa: E731
    assert found(a.search_text("pipeline")) == ["a1", "a2", "a3"]
    assert found(b.search_text("pipeline")) == ["b1"]
    assert found(a.search_text("pipeline", session_id="s2")) == ["a2", "a3"]
    assert found(a.search_text("pipeline", types=[EventType.TOOL_RESULT])) == ["a2"]
    assert found(a.search_text("pipeline", since=T0 + 5, until=T0 + 15)) == ["a2"]
    assert found(a.search_text("pipeline", user_id="ann")) == ["a1"]
    assert found(a.search_text("pipeline", user_id="nobody")) == []
    assert len(a.search_text("pipeline", k=2)) == 2
    a.soft_delete(["a3"], "gone")
    assert found(a.search_text("pipeline")) == ["a1", "a2"]
    # Lucene syntax in the query is text, never structure: no error, no other field
    for hostile in ['pipeline" OR tenant:*', "tenant:" + b.tenant, "*:*", "pipeline AND (",
                    "content:pipeline~2 /re.*/ [a TO z] {x} ^3 \\", "NOT pipeline"]:  # fmt: skip
        hits = a.search_text(hostile)
        assert all(e.tenant == a.tenant for e, _ in hits)
    assert a.search_text("*:*") == [] and a.search_text("tenant:" + b.tenant) == []
    assert lucene_escape('a+b "c" (d) tenant:x AND y') == ('a\\+b \\"c\\" \\(d\\) tenant\\:x and y')


def test_cypher_looking_text_is_data(make):
    s, other = make(), make()
    other.append(chain("keep"))
    nasty = ["`Event`) DETACH DELETE n //", "$tenant", "x}) MATCH (m) SET m.tenant = 'p' //",
             "a:Label:Other", "n.id = 1 OR true", "CALL db.labels()"]  # fmt: skip
    sid = "') RETURN 1 UNION MATCH (n) DETACH DELETE n //"
    events = [ev(i, sid, EventType.TOOL_RESULT, content=f"{i} MATCH (n) RETURN n",
                 parents=(nasty[k - 1],) if k else (),
                 meta={"user_id": "u') DELETE n //"}) for k, i in enumerate(nasty)]  # fmt: skip
    assert s.append(events).inserted == len(nasty)
    got = s.timeline(sid)
    assert [e.id for e in got] == nasty and [e.session_id for e in got] == [sid] * len(nasty)
    assert [e.content for e in got] == [f"{i} MATCH (n) RETURN n" for i in nasty]
    anc = s.ancestors(nasty[-1], depth=10)
    assert [e.id for e, _ in anc] == nasty[-2::-1]
    assert s.link([Edge(src=nasty[0], dst=nasty[-1], type=EdgeType.REFERS_TO,
                        meta={"why": "'}) DETACH DELETE n"})]) == 1  # fmt: skip
    (edge,) = s.edges(event_id=nasty[0], types=[EdgeType.REFERS_TO])
    assert edge.meta == {"why": "'}) DETACH DELETE n"}
    assert [x.session_id for x in s.sessions(user_id="u') DELETE n //")] == [sid]
    assert len(other.timeline("keep")) == 6  # the other tenant is untouched
    assert len(s.purge(session_id=sid)) == len(nasty) and tenant_nodes(s) == 0


def test_concurrent_writers_in_several_processes_style_stores(make):
    """Four stores (four drivers, like four processes) append to one session at once;
    two of them also redeliver the same ids into two other sessions concurrently."""
    tenant = f"cc-{uuid.uuid4().hex[:8]}"
    stores = [make(tenant=tenant) for _ in range(4)]
    errors: list[BaseException] = []
    results: list[Any] = []

    def work(w: int) -> None:
        try:
            for j in range(10):
                batch = [ev(f"w{w}-{j}-{k}", "busy", content=f"{w}/{j}/{k}") for k in range(5)]
                stores[w % 4].append(batch)
            # the same 20 ids sent to two sessions by two writers at once
            if w < 2:
                same = [ev(f"dup-{k}", f"other-{w}", content="same") for k in range(20)]
                results.append(stores[w].append(same))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = stores[0]
    tl = s.timeline("busy")
    assert [e.seq for e in tl] == list(range(8 * 10 * 5))
    chain_rows = cypher(
        s,
        "MATCH (e:Event {tenant: $t, session_id: 'busy'}) "
        "OPTIONAL MATCH (p)-[:NEXT]->(e) WITH e, count(p) AS inc "
        "OPTIONAL MATCH (e)-[:NEXT]->(n) RETURN e.seq AS seq, inc, count(n) AS out",
        t=tenant,
    )
    last = len(tl) - 1
    for r in chain_rows:  # a single straight chain: no fork, no gap
        assert r["inc"] == (0 if r["seq"] == 0 else 1) and r["out"] == (
            0 if r["seq"] == last else 1
        )
    (sess,) = cypher(
        s, "MATCH (x:Session {tenant: $t, id: 'busy'}) RETURN x.last_seq AS n", t=tenant
    )
    assert sess["n"] == last
    assert sum(r.inserted for r in results) == 20 and sum(r.duplicates for r in results) == 20
    owners = {e.session_id for e in s.get([f"dup-{k}" for k in range(20)])}
    assert len(owners) == 1  # each id lives once, all in the session that won
    for sid in ("other-0", "other-1"):
        seqs = [e.seq for e in s.timeline(sid)]
        assert seqs == list(range(len(seqs)))


def test_placeholders_are_filled_then_cleaned(neo4j_store):
    s = neo4j_store
    s.append([ev("child", parents=("later",))])
    assert s.get(["later"]) == [] and s.ancestors("child") == []
    assert [e.dst for e in s.edges(event_id="child")] == ["later"]
    res = s.append([ev("later", "s0", EventType.TOOL_INVOCATION, content="arrived")])
    assert (res.inserted, res.duplicates) == (1, 0)
    (later,) = s.get(["later"])
    assert later.content == "arrived" and later.seq == 0
    assert [e.id for e, _ in s.ancestors("child")] == ["later"]
    (rec,) = cypher(
        s, "MATCH (e:Event {tenant: $t, id: 'later'}) RETURN labels(e) AS l", t=s.tenant
    )
    assert sorted(rec["l"]) == ["Event", "ToolInvocation"]
    # a batch mixing new events and placeholders keeps one NEXT chain
    s.append([ev("p1", "s2", parents=("p2",)), ev("p0", "s3", parents=("p3", "p4"))])
    s.append([ev("p3", "s3"), ev("p2", "s2"), ev("q", "s3"), ev("p4", "s3"), ev("p5", "s3")])
    assert [e.id for e in s.timeline("s3")] == ["p0", "p3", "q", "p4", "p5"]
    nxt = {(e.src, e.dst) for e in s.edges(session_id="s3", types=[EdgeType.NEXT])}
    assert nxt == {("p0", "p3"), ("p3", "q"), ("q", "p4"), ("p4", "p5")}
    assert [(e.src, e.dst) for e in s.edges(session_id="s2", types=[EdgeType.NEXT])] == [
        ("p1", "p2")
    ]
    assert [e.id for e, _ in s.ancestors("p0")] == ["p3", "p4"]
    s.purge(session_id="s2")
    s.purge(session_id="s3")
    # an edge to an event that never comes: its placeholder goes with the last edge
    s.link([Edge(src="child", dst="ghost", type=EdgeType.REFERS_TO)])
    assert tenant_nodes(s) == 5  # events child, later, ghost + sessions s1, s0
    s.purge(ids=["child"])
    ghosts = cypher(s, "MATCH (e:Event {tenant: $t, id: 'ghost'}) RETURN e", t=s.tenant)
    assert ghosts == []
    s.purge_tenant()
    assert tenant_nodes(s) == 0


def test_walks_and_imports_refuse_bad_input(neo4j_store):
    s = neo4j_store
    s.append(chain())
    for bad in (-1, 1.5, "3", True, 10**6):
        with pytest.raises(ValueError):
            s.ancestors("s1-tr", depth=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        q.bounded(q.CYPHER_GET_ANCESTORS, "1}]->(x) DETACH DELETE x //")  # type: ignore[arg-type]
    assert len(s.ancestors("s1-tr", depth=1_000)) == 4
    exported = s.export_session("s1")
    s.purge(ids=["s1-tr", "s1-ans"], tombstone=False)  # else the import is refused first
    s.append([ev("squatter", "s1")])  # takes seq 4, which s1-tr had
    assert s.get(["squatter"])[0].seq == 4
    with pytest.raises(ValueError, match="conflict"):
        s.import_session(exported)
    assert [e.id for e in s.timeline("s1")] == ["s1-u", "s1-c", "s1-a", "s1-ti", "squatter"]


def test_tokens_are_counted_on_first_stats_read(neo4j_store):
    from beeweave_core.tokens import count_batch

    texts = ["hello world", "数据管道的超时时间是三十秒", "x" * 500]
    neo4j_store.append([ev(f"t{i}", content=t) for i, t in enumerate(texts)])
    raw = cypher(
        neo4j_store, "MATCH (e:Event {tenant: $t}) RETURN e.tokens AS n", t=neo4j_store.tenant
    )
    assert {r["n"] for r in raw} == {-1}
    assert neo4j_store.session_stats("s1").tokens == sum(count_batch(texts))
    raw = cypher(
        neo4j_store, "MATCH (e:Event {tenant: $t}) RETURN e.tokens AS n", t=neo4j_store.tenant
    )
    assert all(r["n"] > 0 for r in raw)


def test_routing_uri_shared_driver_and_close(neo4j_uri, make):
    routing = "neo4j://" + neo4j_uri.split("://", 1)[1]
    s = make(uri=routing)
    s.append(chain())
    assert [e.seq for e in s.timeline("s1")] == list(range(6))
    view = s.for_tenant(f"view-{uuid.uuid4().hex[:6]}")
    assert view.driver is s.driver and view.timeline("s1") == []
    view.close()  # a view does not own the driver
    assert len(s.timeline("s1")) == 6
    borrowed = Neo4jEventStore(driver=s.driver, tenant=s.tenant)
    borrowed.close()
    assert len(s.timeline("s1")) == 6
    with Neo4jEventStore.from_conn_string(neo4j_uri, tenant=s.tenant, auth=neo4j_auth()) as own:
        assert len(own.timeline("s1")) == 6
    with pytest.raises(DriverError, match="closed"):  # from_conn_string closed its driver
        own.driver.verify_connectivity()


def test_weave_open_routing_uri_through_the_bus(neo4j_uri, tmp_path):
    from beeweave_core.weave import Weave

    routing = "neo4j://" + neo4j_uri.split("://", 1)[1]
    weave = Weave.open(routing, tenant=f"wb-{uuid.uuid4().hex[:8]}", auth=neo4j_auth(),
                       spool_dir=tmp_path / "spool")  # fmt: skip
    try:
        assert isinstance(weave.store, Neo4jEventStore)
        u = weave.emit("user_message", "schedule the job at 02:00", session_id="w1",
                       meta={"user_id": "ann"})  # fmt: skip
        c = weave.emit("tool_invocation", {"cron": "0 2 * * *"}, session_id="w1", parents=[u])
        r = weave.emit("tool_result", {"job_id": "JOB-7731"}, session_id="w1", parents=[c])
        for i in range(200):
            weave.emit("internal_thought", f"step {i}", session_id="w1", priority="high")
        assert weave.flush(30)
        tl = weave.store.timeline("w1")
        assert [e.seq for e in tl] == list(range(203)) and tl[0].id == u
        assert [e.id for e, _ in weave.store.ancestors(r)] == [c, u]
        assert [x.session_id for x in weave.store.sessions(user_id="ann")] == ["w1"]
        assert len(weave.store.edges(session_id="w1", types=[EdgeType.NEXT])) == 202
    finally:
        weave.flush(10)
        weave.store.purge_tenant()
        weave.close()
    with pytest.raises(DriverError, match="closed"):  # the weave closed the driver it owned
        weave.store.driver.verify_connectivity()


def test_a_search_right_after_a_write_finds_every_event_of_it(neo4j_store):
    """The full-text index is updated after the commit; a search still sees every
    write made before it (it waits for the index), round after round."""
    for round_ in range(15):
        word = f"quokka{'abcdefghijklmnopqrstuvwxyz'[round_] * 2}marble"  # one token
        batch = [
            ev(f"rw-{round_}-{i}", f"rw-s{i % 3}", content=f"note {i}: the {word} shelf")
            for i in range(40)
        ]
        neo4j_store.append(batch)
        hits = neo4j_store.search_text(word, k=100)
        assert sorted(e.id for e, _ in hits) == sorted(e.id for e in batch), round_
