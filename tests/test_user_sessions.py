"""A user's recent conversations (``recent_user_sessions``, read by every assembly that
names a user): right under scopes and purges on every backend, and on Neo4j at a cost
that follows the user's sessions, not the tenant's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beeweave_core.events import Event, EventType
from beeweave_core.store import EventStore

from .conftest import _purge_tenant, make_store


def turn(eid: str, sid: str, user: str, ts: float, scope: str | None = None) -> Event:
    meta = {"user_id": user} if scope is None else {"user_id": user, "scope": scope}
    return Event(id=eid, session_id=sid, type=EventType.USER_MESSAGE, ts=ts, meta=meta,
                 content=f"note {eid} about the greenhouse rota")  # fmt: skip


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Any:
    s = make_store(backend, tmp_path)
    yield s
    _purge_tenant(s)
    s.close()


def listed(store: EventStore, user: str) -> list[str]:
    return [sid for sid, _ in store.recent_user_sessions(user, 10)]


def test_newest_first_and_only_the_users_own(store: EventStore) -> None:
    store.append([turn("a1", "morning", "ines", 100.0), turn("b1", "noon", "ines", 200.0),
                  turn("c1", "evening", "tomas", 300.0), turn("a2", "morning", "ines", 400.0)])  # fmt: skip
    assert store.recent_user_sessions("ines", 10) == [("morning", 1), ("noon", 0)]
    assert listed(store, "tomas") == ["evening"]
    assert listed(store, "nobody") == []
    assert listed(store, "ines")[:1] == ["morning"]


def test_a_scoped_view_lists_only_sessions_where_it_may_read_the_users_events(
    store: EventStore,
) -> None:
    store.append([turn("p1", "payroll", "ines", 100.0, scope="finance"),
                  turn("g1", "garden", "ines", 200.0, scope="home"),
                  turn("m1", "mixed", "ines", 300.0, scope="finance"),
                  turn("m2", "mixed", "ines", 310.0, scope="home"),
                  turn("o1", "open", "ines", 50.0)])  # fmt: skip
    assert set(listed(store, "ines")) == {"payroll", "garden", "mixed", "open"}
    home = store.for_scopes({"home"})
    assert listed(home, "ines") == ["mixed", "garden", "open"]  # unscoped events are shared
    assert set(listed(store.for_scopes({"finance"}), "ines")) == {"payroll", "mixed", "open"}


def test_purges_take_sessions_out_of_the_listing(store: EventStore) -> None:
    store.append([turn("x1", "first", "ines", 100.0), turn("y1", "second", "ines", 200.0),
                  turn("y2", "second", "tomas", 210.0), turn("z1", "third", "ines", 300.0)])  # fmt: skip
    store.purge(session_id="third")
    assert listed(store, "ines") == ["second", "first"]
    store.purge(ids=["y1"])  # the user's only event there: tomas still talks in it
    assert listed(store, "ines") == ["first"]
    assert listed(store, "tomas") == ["second"]


@pytest.mark.neo4j
def test_neo4j_keeps_no_pair_of_a_purged_user_or_session(tmp_path: Path, neo4j_uri: str) -> None:
    store = make_store("neo4j", tmp_path)
    try:
        store.append([turn("x1", "first", "ines", 100.0), turn("y1", "second", "ines", 200.0),
                      turn("y2", "second", "tomas", 210.0)])  # fmt: skip
        assert _pairs(store) == {("ines", "first"), ("ines", "second"), ("tomas", "second")}
        store.purge(ids=["y1"])
        store.purge(session_id="first")
        assert _pairs(store) == {("tomas", "second")}
        _purge_tenant(store)
        assert _pairs(store) == set()
    finally:
        _purge_tenant(store)
        store.close()


def _pairs(store: Any) -> set[tuple[str, str]]:
    records, _, _ = store.driver.execute_query(
        "MATCH (p:UserSession {tenant: $t}) RETURN p.user_id AS u, p.session_id AS s",
        {"t": store.tenant},
    )
    return {(r["u"], r["s"]) for r in records}


@pytest.mark.neo4j
def test_neo4j_user_reads_cost_follows_the_users_sessions_not_the_tenants(
    tmp_path: Path, neo4j_uri: str
) -> None:
    from beeweave_core.backends.neo4j import events_cypher as q

    store = make_store("neo4j", tmp_path)

    def hits() -> int:
        params = {"tenant": store.tenant, "user_id": "ines", "scopes": None}
        total = 0
        for query in (q.CYPHER_RECENT_USER_SESSIONS, q.CYPHER_GET_USER_SESSIONS):
            _, summary, _ = store.driver.execute_query("PROFILE " + query, params)
            total += _db_hits(summary.profile)
        return total

    def others(start: int, n: int) -> None:
        store.append([turn(f"o{i}", f"other-{i}", f"user{i}", 10.0 + i)
                      for i in range(start, start + n)])  # fmt: skip

    try:
        store.append([turn(f"i{k}", f"mine-{k}", "ines", 1000.0 + k) for k in range(3)])
        others(0, 40)
        few = hits()
        others(40, 160)
        many = hits()
        assert listed(store, "ines") == ["mine-2", "mine-1", "mine-0"]
    finally:
        _purge_tenant(store)
        store.close()
    assert many <= few + 5, (few, many)  # was one seek per session of the tenant


def _db_hits(plan: Any) -> int:
    return int(plan.get("dbHits", 0)) + sum(_db_hits(c) for c in plan.get("children", []))


def test_sqlite_user_reads_cost_follows_the_users_sessions_not_their_length(
    tmp_path: Path,
) -> None:
    """Listing a user's sessions, their stats' scope and a user-scoped search's scope: a
    seek per session, whether the sessions hold 20 events or 400."""
    from .test_assemble_cost import _steps

    def steps(per: int) -> int:
        store = make_store("sqlite", tmp_path / f"len{per}")
        store.append([turn(f"e{s}-{i}", f"talk-{s}", "ines", 10.0 * s + i / 1000)
                      for s in range(6) for i in range(per)])  # fmt: skip
        assert len(store.user_session_ids("ines")) == 6
        cost = _steps(store.connection, lambda: (store.user_session_ids("ines"),
                                     store.recent_user_sessions("ines", 3)))  # fmt: skip
        store.close()
        return cost

    short, long = steps(20), steps(400)
    assert long <= 1.3 * short + 500, (short, long)  # was 20x: every event of the user read
