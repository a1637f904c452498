"""The scopes of a Neo4j session, kept on its Session node (read on every assembly).

The real shared Neo4j, a tenant of the test's own.  The node's answer must hold after
appends of several scopes, fall back to the events when a writer that does not keep it
(an older BeeWeave) moved the session on, come back after the upgrade's computation,
and follow a purge.
"""

from __future__ import annotations

from typing import Any

from beeweave_core.backends.neo4j import session_scopes
from beeweave_core.backends.neo4j import tx as neo4j_tx
from beeweave_core.events import EventType

from .test_store_conformance import ev


def _said(n: int, sid: str, scope: str | None) -> Any:
    meta = {"scope": scope} if scope else {}
    return ev(f"{sid}-{n}", sid, EventType.USER_MESSAGE, f"note {n} about the ferry rota",
              meta=meta)  # fmt: skip


def _kept(store, sid: str) -> set[str | None] | None:
    records, _, _ = store.driver.execute_query(
        session_scopes.CYPHER_READ, {"tenant": store.tenant, "session_id": sid},
        database_=store.database,
    )  # fmt: skip
    return session_scopes.kept([dict(r) for r in records])


def _forget_on_node(store, sid: str) -> None:
    """What an older BeeWeave's session looks like: no scopes on the node."""
    store.driver.execute_query(
        "MATCH (s:Session {tenant: $tenant, id: $sid}) "
        "REMOVE s.scopes, s.unscoped, s.scopes_seq",
        {"tenant": store.tenant, "sid": sid}, database_=store.database,
    )  # fmt: skip


def test_the_session_node_keeps_the_scopes_of_its_events(neo4j_store):
    store = neo4j_store
    store.append([_said(0, "ferry", "crew"), _said(1, "ferry", None)])
    store.append([_said(2, "ferry", "port"), _said(3, "ferry", "crew")])
    assert store.scopes_in("ferry") == {"crew", "port", None}
    assert _kept(store, "ferry") == {"crew", "port", None}  # read from the node
    store.append([_said(0, "quay", "port")])
    assert store.scopes_in("quay") == _kept(store, "quay") == {"port"}
    assert store.scopes_in("nowhere") == set()


def test_an_older_session_reads_its_events_until_the_upgrade_computes_it(neo4j_store):
    store = neo4j_store
    store.append([_said(0, "ferry", "crew"), _said(1, "ferry", None)])
    _forget_on_node(store, "ferry")
    assert _kept(store, "ferry") is None
    assert store.scopes_in("ferry") == {"crew", None}  # from the events
    store.append([_said(2, "ferry", "harbour")])
    assert _kept(store, "ferry") is None  # not extended from a partial answer
    assert store.scopes_in("ferry") == {"crew", None, "harbour"}
    with neo4j_tx.session(store.driver, store.database) as session:
        assert session_scopes.compute_pending(session, store.tenant) == 1
    assert _kept(store, "ferry") == {"crew", None, "harbour"}


def test_a_purge_takes_a_scope_gone_from_the_session_off_its_node(neo4j_store):
    store = neo4j_store
    store.append([_said(0, "ferry", "crew"), _said(1, "ferry", "port"), _said(2, "ferry", None)])
    store.purge(ids=["ferry-1"])
    assert _kept(store, "ferry") == {"crew", None}
    assert store.scopes_in("ferry") == {"crew", None}
