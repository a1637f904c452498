"""A database made by an older BeeWeave gets the current schema from ``setup()``.

Runs on a Neo4j of its own (``scripts/neo4j-test-server`` on a free port): the test
rebuilds a schema index, which would disturb other test runs sharing a server.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import neo4j
import pytest

from beeweave_core.backends.neo4j import events_cypher as q
from beeweave_core.backends.neo4j.events import Neo4jEventStore

from .test_store_conformance import ev

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "neo4j-test-server"
#: The full-text indexes as older BeeWeave versions created them (Lucene analysing
#: ``content``; the first one synchronous), before events had ``terms``.
OLD_TEXT_INDEXES = (
    "CREATE FULLTEXT INDEX beeweave_event_text IF NOT EXISTS FOR (e:Event) "
    "ON EACH [e.content, e.tenant, e.session_id] OPTIONS {indexConfig: "
    "{`fulltext.analyzer`: 'cjk', `fulltext.eventually_consistent`: false}}",
    "CREATE FULLTEXT INDEX beeweave_event_text_en IF NOT EXISTS FOR (e:Event) "
    "ON EACH [e.content, e.session_id, e.tenant] OPTIONS {indexConfig: "
    "{`fulltext.analyzer`: 'english', `fulltext.eventually_consistent`: true}}",
    # and range indexes no read uses any more
    "CREATE INDEX beeweave_event_ts IF NOT EXISTS FOR (e:Event) ON (e.tenant, e.ts)",
    "CREATE INDEX beeweave_event_user IF NOT EXISTS FOR (e:Event) ON (e.tenant, e.user_id)",
)


@pytest.fixture(scope="module")
def private_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path_factory.mktemp("neo4j-state")
    env = {**os.environ, "NEO4J_PORT": str(port), "BEEWEAVE_NEO4J_STATE": str(state)}
    subprocess.run([str(SCRIPT), "start"], env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        yield f"bolt://127.0.0.1:{port}"
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, check=False, stdout=subprocess.DEVNULL)


def _text_indexes(driver: neo4j.Driver) -> dict[str, dict[str, object]]:
    records, _, _ = driver.execute_query(
        "SHOW FULLTEXT INDEXES YIELD name, id, properties, options "
        "RETURN name, id, properties, options.indexConfig AS config"
    )
    return {r["name"]: {"id": r["id"], "properties": r["properties"], **r["config"]}
            for r in records}  # fmt: skip


def test_an_older_database_gets_terms_and_the_new_text_index_once(private_uri: str) -> None:
    driver = neo4j.GraphDatabase.driver(private_uri, auth=None)
    try:
        for statement in OLD_TEXT_INDEXES:
            driver.execute_query(statement)
        old = Neo4jEventStore(driver=driver, tenant="upgrade", setup=False)
        old.append([ev("q", "walk", content="Which trail did you walk with your sister?"),
                    ev("a", "walk", content="The ridge one above the lake, in May."),
                    *[ev(f"old-{i}", f"log-{i % 4}", content=f"heron ledger entry {i}")
                      for i in range(30)]])  # fmt: skip
        driver.execute_query(
            "MATCH (e:Event {tenant: 'upgrade'}) REMOVE e.terms"
        )  # as stored before
        assert set(_text_indexes(driver)) == {"beeweave_event_text", "beeweave_event_text_en"}

        store = Neo4jEventStore(driver=driver, tenant="upgrade")  # setup() upgrades
        indexes = _text_indexes(driver)
        assert set(indexes) == {q.FULLTEXT_INDEX}  # the old ones dropped
        records, _, _ = driver.execute_query("SHOW INDEXES YIELD name RETURN collect(name) AS n")
        assert not set(q.OBSOLETE_INDEXES) & set(records[0]["n"])
        assert indexes[q.FULLTEXT_INDEX]["properties"] == list(q.FULLTEXT_PROPERTIES)
        assert indexes[q.FULLTEXT_INDEX]["fulltext.eventually_consistent"] is True
        records, _, _ = driver.execute_query(
            "MATCH (e:Event {tenant: 'upgrade'}) WHERE e.terms IS NULL RETURN count(e) AS n"
        )
        assert records[0]["n"] == 0  # every old event got its terms
        assert len(store.search_text("heron ledgers", k=50)) == 30  # stemmed, repopulated
        # the reply is found by its question's words (its previous turn), below the question
        assert [e.id for e, _ in store.search_text("sister trails")] == ["q", "a"]

        store.append([ev("new-1", "log-0", content="heron ledger entry new")])
        assert "new-1" in {e.id for e, _ in store.search_text("heron ledger", k=50)}
        # sessions stored before they kept their last content's tokens: the next append
        # reads that content once, and the session keeps its tokens from then on
        driver.execute_query("MATCH (s:Session {tenant: 'upgrade'}) REMOVE s.context_terms")
        store.append([ev("a2", "walk", content="It took us four hours.")])
        store.append([ev("a3", "walk", content="We camped by the tarn.")])
        assert [e.id for e, _ in store.search_text("four hours")] == ["a2", "a3"]
        assert [e.id for e, _ in store.search_text("ridge lake")] == ["a", "a2"]
        records, _, _ = driver.execute_query(
            "MATCH (s:Session {tenant: 'upgrade', id: 'walk'}) RETURN s.context_terms AS c"
        )
        assert records[0]["c"].split() == ["we", "camp", "by", "the", "tarn"]
        Neo4jEventStore(driver=driver, tenant="upgrade")  # current index: left alone
        assert _text_indexes(driver)[q.FULLTEXT_INDEX]["id"] == indexes[q.FULLTEXT_INDEX]["id"]
    finally:
        driver.close()


def test_an_older_database_gets_its_users_sessions_once(private_uri: str) -> None:
    driver = neo4j.GraphDatabase.driver(private_uri, auth=None)
    try:
        store = Neo4jEventStore(driver=driver, tenant="pairs")
        store.append([ev(f"r{i}", f"chat-{i % 3}", ts=100.0 + i, meta={"user_id": f"who{i % 2}"})
                      for i in range(12)])  # fmt: skip
        # as an older BeeWeave left it: no pairs, no mark of the upgrade
        driver.execute_query("MATCH (p:UserSession) DELETE p")
        driver.execute_query("MATCH (u:BeeweaveUpgrade {name: 'user_sessions'}) DELETE u")
        assert store.recent_user_sessions("who0", 10) == []
        upgraded = Neo4jEventStore(driver=driver, tenant="pairs")  # setup() backfills
        # newest last event first: chat-2 ends at r11, chat-1 at r10, chat-0 at r9
        assert [s for s, _ in upgraded.recent_user_sessions("who0", 10)] == [
            "chat-2", "chat-1", "chat-0"]  # fmt: skip
        assert len(upgraded.recent_user_sessions("who1", 10)) == 3
        driver.execute_query("MATCH (p:UserSession {session_id: 'chat-2'}) DELETE p")
        Neo4jEventStore(driver=driver, tenant="pairs")  # once: the mark is there now
        assert len(upgraded.recent_user_sessions("who1", 10)) == 2
    finally:
        driver.close()
