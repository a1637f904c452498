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
#: The full-text index as BeeWeave created it before it became eventually consistent.
OLD_TEXT_INDEX = (
    f"CREATE FULLTEXT INDEX {q.FULLTEXT_INDEX} IF NOT EXISTS FOR (e:Event) "
    "ON EACH [e.content, e.tenant, e.session_id] OPTIONS {indexConfig: "
    "{`fulltext.analyzer`: 'cjk', `fulltext.eventually_consistent`: false}}"
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


def _text_index(driver: neo4j.Driver) -> dict[str, object]:
    records, _, _ = driver.execute_query(
        "SHOW FULLTEXT INDEXES YIELD name, id, options WHERE name = $name "
        "RETURN id, options.indexConfig AS config",
        name=q.FULLTEXT_INDEX,
    )
    (row,) = records
    return {"id": row["id"], **row["config"]}


def test_an_old_synchronous_text_index_is_rebuilt_once_and_keeps_finding_old_events(
    private_uri: str,
) -> None:
    driver = neo4j.GraphDatabase.driver(private_uri, auth=None)
    try:
        driver.execute_query(OLD_TEXT_INDEX)
        old = Neo4jEventStore(driver=driver, tenant="upgrade", setup=False)
        old.append([ev(f"old-{i}", content=f"heron ledger entry {i}") for i in range(30)])
        assert _text_index(driver)["fulltext.eventually_consistent"] is False

        store = Neo4jEventStore(driver=driver, tenant="upgrade")  # setup() upgrades
        rebuilt = _text_index(driver)
        assert rebuilt["fulltext.eventually_consistent"] is True
        assert rebuilt["fulltext.analyzer"] == "cjk"
        assert len(store.search_text("heron ledger", k=50)) == 30  # repopulated

        store.append([ev("new-1", content="heron ledger entry new")])
        assert "new-1" in {e.id for e, _ in store.search_text("heron ledger", k=50)}
        Neo4jEventStore(driver=driver, tenant="upgrade")  # current index: left alone
        assert _text_index(driver)["id"] == rebuilt["id"]
    finally:
        driver.close()
