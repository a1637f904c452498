"""Idle Neo4j sessions are kept for the next statement, never after a failure, and closed.

On the real server: a kept session answers the next statement, a session whose
statement failed is closed rather than handed to the next caller, a pool never keeps
more than it may, and closing the pool closes what it kept and refuses to hand out more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import neo4j
import pytest

from beeweave_core.backends.neo4j import tx
from beeweave_core.errors import StoreClosed

from .conftest import neo4j_auth


@pytest.fixture
def driver(neo4j_uri: str) -> Iterator[Any]:
    with neo4j.GraphDatabase.driver(neo4j_uri, auth=neo4j_auth()) as d:
        yield d


def test_a_session_is_reused_and_closed_with_the_pool(driver: Any) -> None:
    pool = tx.IdleSessions(driver, None, keep=2)
    first = pool.take(read=False)
    assert list(first.run("RETURN 1 AS one"))[0]["one"] == 1
    pool.give(first, read=False)
    assert pool.take(read=False) is first  # the same session, not a new one
    reader = pool.take(read=True)
    assert reader is not first  # read and write sessions are kept apart
    pool.give(reader, read=True)
    extra = [pool.take(read=False) for _ in range(3)]
    for s in [first, *extra]:
        pool.give(s, read=False)  # four given back, two kept, two closed
    assert extra[-1].closed()
    kept = [pool.take(read=False), pool.take(read=False)]
    assert not any(s.closed() for s in kept) and first in kept
    for s in kept:
        pool.give(s, read=False)
    pool.close()
    assert all(s.closed() for s in kept)
    with pytest.raises(StoreClosed):  # a closed pool hands out nothing (its store is closed)
        pool.take(read=False)
    late = tx.session(driver, None)
    pool.give(late, read=False)  # one given back after the close is closed, not kept
    assert late.closed()


def test_a_failed_statement_does_not_poison_the_next(driver: Any) -> None:
    pool = tx.IdleSessions(driver, None)
    with pytest.raises(neo4j.exceptions.CypherSyntaxError):
        tx.run(driver, None, "RETURN nonsense(", {}, sessions=pool)
    # the broken session was closed, not kept: the next caller gets an open one
    nxt = pool.take(read=False)
    assert not nxt.closed()
    pool.give(nxt, read=False)
    assert tx.run(driver, None, "RETURN $x AS x", {"x": 7}, sessions=pool)[0]["x"] == 7
    assert tx.run(driver, None, "RETURN $x AS x", {"x": 8}, sessions=pool)[0]["x"] == 8
    pool.close()
