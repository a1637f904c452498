"""The Neo4j checkpoint store's hot reads cost what they return, not the thread's length.

``list`` inside one thread and namespace (what LangGraph asks for) and ``get_tuple``
of the newest checkpoint read the unique index in id order and stop after the rows
they need; ``PROFILE`` shows it (database hits stay the same when the thread grows
tenfold).  The same statements are checked for what they return: keyset pages,
``before``, metadata filters, special writes replacing and regular ones kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from beeweave_core.backends.neo4j import checkpoints_cypher as q
from beeweave_core.backends.neo4j.checkpoints import Neo4jCheckpointStore
from beeweave_core.checkpoints import LIST_PAGE, CheckpointRow, WriteRow

from .conftest import neo4j_auth


@pytest.fixture
def ckstore(neo4j_uri: str) -> Iterator[Neo4jCheckpointStore]:
    store = Neo4jCheckpointStore.from_uri(
        neo4j_uri, auth=neo4j_auth(), tenant=f"plan-{uuid.uuid4().hex[:10]}"
    )
    try:
        yield store
    finally:
        store.purge_tenant()
        store.close()


def _fill(
    store: Neo4jCheckpointStore,
    thread: str,
    ns: str,
    n: int,
    start: int = 0,
    scope: str | None = None,
) -> None:
    """``n`` chained checkpoints (ids ``c0000``…), every third one tagged ``kind: odd``."""
    for i in range(start, start + n):
        cid = f"c{i:04d}"
        meta = {"step": i, **({"kind": "odd"} if i % 3 == 0 else {})}
        store.put(
            CheckpointRow(
                thread_id=thread, checkpoint_ns=ns, checkpoint_id=cid,
                parent_checkpoint_id=f"c{i - 1:04d}" if i else None,
                checkpoint=("json", b"{}"), metadata=meta,
                channel_versions={"count": f"v{i}"}, scope=scope,
            ),
            {("count", f"v{i}"): ("json", str(i).encode())},
        )  # fmt: skip


def _operators(plan: Any) -> list[Any]:
    return [plan, *(op for c in plan.get("children", []) for op in _operators(c))]


def _db_hits(store: Neo4jCheckpointStore, query: str, **params: Any) -> int:
    """Database hits of one run; fails on any scan (a fresh database's statistics
    make a full index scan look as cheap as a seek, so a plain ``USING INDEX`` hint
    is not enough there)."""
    with store.driver.session() as s:
        summary = s.run("PROFILE " + query, {"tenant": store.tenant, **params}).consume()
    ops = _operators(summary.profile)
    scans = [op["operatorType"] for op in ops if "Scan" in op["operatorType"]]
    if query is not q.CYPHER_LIST_THREAD:
        assert not scans, f"scan in a hot read's plan: {scans}"
    return sum(int(op.get("dbHits", 0)) for op in ops)


def _hits_per_read(store: Neo4jCheckpointStore) -> tuple[int, int, int, int]:
    ns = {"thread_id": "t", "checkpoint_ns": ""}
    listed = _db_hits(
        store, q.CYPHER_LIST_NAMESPACE, must=[], null_keys=[], readable=None, limit=5, **ns
    )
    below = _db_hits(
        store,
        q.CYPHER_LIST_NAMESPACE_BELOW,
        must=[],
        null_keys=[],
        readable=None,
        limit=5,
        below="c0020",
        **ns,
    )
    latest = _db_hits(store, q.CYPHER_GET_LATEST_CHECKPOINT, **ns)
    # every put asks the thread's scope: only scoped checkpoints are in that index
    return listed, below, latest, _db_hits(store, q.CYPHER_THREAD_SCOPE, thread_id="t")


def test_hot_reads_do_not_grow_with_the_thread(ckstore: Neo4jCheckpointStore) -> None:
    _fill(ckstore, "t", "", 30)
    small = _hits_per_read(ckstore)
    _fill(ckstore, "t", "", 270, start=30)
    large = _hits_per_read(ckstore)
    assert large == small, f"db hits grew with the thread: {small} -> {large}"
    # and the whole-thread statement (across namespaces) does read every checkpoint,
    # so the comparison above can tell the two apart
    across = _db_hits(
        ckstore, q.CYPHER_LIST_THREAD, thread_id="t", checkpoint_ns=None, checkpoint_id=None,
        before=None, must=[], null_keys=[], readable=None, after_id=None, after_thread=None, after_ns=None,
        limit=5,
    )  # fmt: skip
    assert across > 300 > max(large)


def test_a_threads_scope_is_one_seek_however_long_the_thread(ckstore) -> None:
    def hits() -> list[int]:
        return [_db_hits(ckstore, q.CYPHER_THREAD_SCOPE, thread_id=t) for t in ("t", "s")]

    _fill(ckstore, "t", "", 20)
    _fill(ckstore, "s", "", 20, scope="support")
    small = hits()
    _fill(ckstore, "t", "", 200, start=20)
    _fill(ckstore, "s", "", 200, start=20)  # inherits: the put names no scope
    for k in range(5):
        _fill(ckstore, f"other-{k}", "", 20, scope="billing")
    assert hits() == small and max(small) < 20
    assert ckstore.thread_scope("s") == "support" and ckstore.thread_scope("t") is None
    assert {r.scope for r in ckstore.list(thread_id="s")} == {"support"}
    seen = {r.thread_id for r in ckstore.list(readable=frozenset({"support"}))}
    assert seen == {"s", "t"}


def test_namespace_list_pages_before_and_filters(ckstore: Neo4jCheckpointStore) -> None:
    n = 2 * LIST_PAGE + 7  # three pages
    _fill(ckstore, "t", "", n)
    _fill(ckstore, "t", "inner", 4)
    _fill(ckstore, "other", "", 3)
    ids = [f"c{i:04d}" for i in range(n)]

    def listed(**kw: Any) -> list[str]:
        return [r.checkpoint_id for r in ckstore.list(thread_id="t", checkpoint_ns="", **kw)]

    assert listed() == ids[::-1]
    assert listed(limit=LIST_PAGE + 3) == ids[::-1][: LIST_PAGE + 3]
    assert listed(before="c0100") == ids[:100][::-1]
    assert listed(before="c0100", limit=3) == ["c0099", "c0098", "c0097"]
    odd = [i for i in ids if int(i[1:]) % 3 == 0]
    assert listed(filter={"kind": "odd"}) == odd[::-1]
    even = [i for i in ids if i not in odd]
    assert listed(filter={"kind": None}, limit=LIST_PAGE + 1) == even[::-1][: LIST_PAGE + 1]
    rows = list(ckstore.list(thread_id="t", checkpoint_ns="", limit=1))
    assert rows[0].values == {"count": ("json", str(n - 1).encode())}
    assert rows[0].parent_checkpoint_id == ids[-2]
    # newest of the namespace, not of the thread
    latest = ckstore.get("t", "inner", None)
    assert latest is not None and latest.checkpoint_id == "c0003"
    assert latest.checkpoint_ns == "inner"


def test_put_writes_keeps_regular_and_replaces_special(ckstore: Neo4jCheckpointStore) -> None:
    _fill(ckstore, "t", "", 2)

    def write(idx: int, value: bytes) -> None:
        ckstore.put_writes("t", "", "c0001", [WriteRow("task-a", "", idx, "out", ("json", value))])

    write(0, b"1")
    write(0, b"2")  # a replayed regular write: the first one stays
    write(-1, b"first error")
    write(-1, b"second error")  # a special write is replaced
    ckstore.put_writes(  # mixed in one call: both rules at once
        "t", "", "c0001",
        [WriteRow("task-b", "", 0, "out", ("json", b"b")),
         WriteRow("task-a", "", -1, "__error__", ("json", b"third error"))],
    )  # fmt: skip
    row = ckstore.get("t", "", "c0001")
    assert row is not None
    got = {(w.task_id, w.idx): (w.channel, w.value[1]) for w in row.writes}
    assert got == {
        ("task-a", 0): ("out", b"1"),
        ("task-a", -1): ("__error__", b"third error"),
        ("task-b", 0): ("out", b"b"),
    }
