"""Sustained write rate into a store and ancestry-query latency over a big graph.

``batched_ev_s`` counts until the last ``append`` returned; ``searchable_ev_s`` until
a search sees the text too (both stores index words after the commit: SQLite on
the first read, Neo4j in its full-text index's background thread).
"""

from __future__ import annotations

import gc
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from beeweave_core.events import EdgeType, Event, EventType
from beeweave_core.store import EventGraph, EventStore
from beeweave_core.weave import Weave, open_store

_TYPES = [
    EventType.USER_MESSAGE,
    EventType.MODEL_CALL,
    EventType.ASSISTANT_MESSAGE,
    EventType.TOOL_INVOCATION,
    EventType.TOOL_RESULT,
]


def synthetic_events(
    n: int, *, size: int = 1024, sessions: int = 100, seed: int = 7
) -> list[Event]:
    """``n`` events of ~``size`` chars in causal chains (CAUSED_BY + some REFERS_TO)."""
    rng = random.Random(seed)
    words = [
        "order",
        "timeout",
        "batch",
        "retry",
        "30s",
        "5000",
        "rows",
        "EU-West",
        "JOB-7731",
        "cost",
        "$181",
        "warehouse",
    ]
    last: dict[str, str] = {}
    history: list[str] = []
    out = []
    for i in range(n):
        sid = f"bench-{i % sessions}"
        text = " ".join(rng.choice(words) for _ in range(size // 7))[:size]
        eid = f"ev-{seed}-{i}"
        parents = (last[sid],) if sid in last else ()
        links = {}
        if history and i % 5 == 0:
            links = {EdgeType.REFERS_TO: (rng.choice(history),)}
        out.append(
            Event(
                id=eid,
                session_id=sid,
                type=_TYPES[i % len(_TYPES)],
                content=text,
                parents=parents,
                links=links,
                meta={"user_id": f"u{i % 7}"},
            )
        )
        last[sid] = eid
        history.append(eid)
    return out


@contextmanager
def bench_store(backend: str, tmp: str, *, auth: Any = None) -> Iterator[tuple[EventStore, str]]:
    """A fresh, empty store of the backend (its own tenant on Neo4j)."""
    import os

    tenant = f"bench-{int(time.time() * 1000)}"
    if backend == "sqlite":
        url = f"sqlite:///{tmp}/ingest-{tenant}.db"
    elif backend == "neo4j":
        url = os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687")
    else:
        raise ValueError(f"unknown backend {backend!r} (sqlite, neo4j)")
    store = open_store(url, tenant=tenant, auth=auth)
    try:
        yield store, url
    finally:
        if backend == "neo4j":
            purge_bench_data(store)
        store.close()


def purge_bench_data(store: EventStore) -> None:
    """Leave a shared server as it was: drop the bench tenant's data."""
    purge_tenant = getattr(store, "purge_tenant", None)
    if callable(purge_tenant):
        purge_tenant()
        return
    for s in store.sessions(include_items=True):
        store.purge(session_id=s.session_id, tombstone=False)


def _through_bus(backend: str, url: str, tmp: str, events: list[Event], auth: Any) -> float:
    """Events/s end to end: ``emit`` on the caller thread, batched by the bus writer."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp}/bus.db"
    weave = Weave.open(
        url,
        tenant=f"bench-bus-{int(time.time() * 1000)}",
        auth=auth,
        spool_dir=tmp,
        max_high=len(events) + 10,
        index=False,
    )  # capture only: embedding is measured elsewhere
    try:
        ids: dict[str, str] = {}
        t0 = time.perf_counter()
        for ev in events:
            ids[ev.id] = weave.emit(
                ev.type,
                ev.content,
                session_id=ev.session_id,
                parents=[ids[p] for p in ev.parents if p in ids],
                meta=ev.meta,
            )
        weave.flush(600)
        return len(events) / (time.perf_counter() - t0)
    finally:
        if backend == "neo4j":
            purge_bench_data(weave.store)
        weave.close()


def _rates(
    store: EventGraph, events: list[Event], ones: list[Event], probe: list[str], batch: int
) -> dict[str, float]:
    """One empty store's write rates and ancestry latency."""
    from beeweave_bench.report import percentile

    n, t0 = len(events), time.perf_counter()
    for i in range(0, n, batch):
        store.append(events[i : i + batch])
    wrote = time.perf_counter() - t0
    # a store may index text after the commit (SQLite's FTS catch-up, Neo4j's
    # eventually consistent full-text index): the first search waits for it
    store.search_text(events[-1].content.split()[0], k=1)
    searchable = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for ev in ones:
        store.append([ev])
    one_by_one = len(ones) / (time.perf_counter() - t0)
    lat = []
    for eid in probe:
        t0 = time.perf_counter()
        store.ancestors(eid, depth=5)
        lat.append((time.perf_counter() - t0) * 1000)
    return {
        "batched_ev_s": n / wrote,
        "searchable_ev_s": searchable,
        "one_by_one_ev_s": one_by_one,
        "ancestry_p50_ms": percentile(lat, 50),
        "ancestry_p95_ms": percentile(lat, 95),
    }


def run(
    backends: list[str],
    n: int = 100_000,
    single: int = 2_000,
    queries: int = 300,
    batch: int = 1_000,
    auth: Any = None,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    events = synthetic_events(n)
    ones = synthetic_events(single, seed=11)
    rng = random.Random(3)
    probe = [events[rng.randrange(n)].id for _ in range(queries)]
    # the input events are the bench's, not the store's: out of the collector's full
    # passes, which otherwise walk all of them every few batches (~0.1 s each at 50k)
    gc.freeze()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for backend in backends:
                with bench_store(backend, tmp, auth=auth) as (store, url):
                    rates = _rates(store, events, ones, probe, batch)
                    rows.append({"backend": backend, "events": n, **rates})
                # end to end through the bus (emit on the caller thread, batched by the writer)
                bus = _through_bus(backend, url, tmp, events, auth)
                rows.append({"backend": f"{backend} via bus", "events": n, "batched_ev_s": bus})
    finally:
        gc.unfreeze()
    return rows
