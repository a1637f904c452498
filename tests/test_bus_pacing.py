"""The store thread's pacing: background writes gather for ``store_interval``, waiters don't.

A store whose transaction has a high fixed cost (Neo4j) asks for fewer, larger writes
(``write_interval``); nothing a caller waits for (flush, close) and no event is held
back by it, and a gathered write is one append, not one per journal tick.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from beeweave_core.backends.neo4j.events import Neo4jEventStore
from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.capture import ContextBus
from beeweave_core.events import Event, EventType


class Writes:
    """Each stored batch's size and the monotonic time it was handed on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[float, int]] = []

    def __call__(self, events: list[Event]) -> None:
        with self.lock:
            self.seen.append((time.monotonic(), len(events)))


def trickle(bus: ContextBus, n: int, every: float, sid: str = "s") -> None:
    for i in range(n):
        bus.emit(EventType.USER_MESSAGE, f"lantern check {i}", session_id=sid)
        time.sleep(every)


def open_bus(tmp_path: Path, **kw: float) -> tuple[ContextBus, SQLiteEventStore, Writes]:
    store = SQLiteEventStore(tmp_path / "pace.db")
    bus = ContextBus(store, spool_dir=tmp_path / "spool", **kw)
    writes = Writes()
    bus.subscribe(writes)
    return bus, store, writes


def test_background_writes_are_at_least_an_interval_apart_and_lose_nothing(tmp_path):
    bus, store, writes = open_bus(tmp_path, store_interval=0.3)
    try:
        trickle(bus, 40, 0.025)  # a journal tick holds one or two of these
        deadline = time.monotonic() + 10
        while sum(n for _, n in writes.seen) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        times = [t for t, _ in writes.seen]
        assert [e.content for e in store.timeline("s")] == [f"lantern check {i}" for i in range(40)]
        assert len(times) >= 2
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert min(gaps) >= 0.3 - 0.02, gaps
        assert max(n for _, n in writes.seen) > 2  # ticks were merged into one append
    finally:
        bus.close()
        store.close()


def test_without_an_interval_each_tick_is_written(tmp_path):
    bus, store, writes = open_bus(tmp_path, store_interval=0.0)
    try:
        trickle(bus, 40, 0.025)
        assert bus.flush(10)
        gathered = len(writes.seen)
    finally:
        bus.close()
        store.close()
    paced_bus, paced_store, paced = open_bus(tmp_path / "b", store_interval=0.3)
    try:
        trickle(paced_bus, 40, 0.025)
        assert paced_bus.flush(10)
    finally:
        paced_bus.close()
        paced_store.close()
    assert len(paced.seen) < gathered


def test_flush_does_not_wait_for_the_interval(tmp_path):
    bus, store, writes = open_bus(tmp_path, store_interval=30.0)
    try:
        bus.emit(EventType.USER_MESSAGE, "first lamp", session_id="s")
        assert bus.flush(10)  # would take 30 s if flush waited for the interval
        bus.emit(EventType.USER_MESSAGE, "second lamp", session_id="s")
        assert bus.flush(10)
        assert [e.content for e in store.timeline("s")] == ["first lamp", "second lamp"]
    finally:
        bus.close()
    assert len(writes.seen) == 2


def test_close_writes_what_gathered(tmp_path):
    bus, store, _ = open_bus(tmp_path, store_interval=30.0)
    for i in range(5):
        bus.emit(EventType.USER_MESSAGE, f"lamp {i}", session_id="s")
    bus.close(timeout=10)
    assert [e.content for e in store.timeline("s")] == [f"lamp {i}" for i in range(5)]
    store.close()


@pytest.mark.neo4j
def test_a_neo4j_store_gets_fewer_larger_background_writes(tmp_path, neo4j_store):
    assert SQLiteEventStore(tmp_path / "x.db").write_interval == 0.0
    bus = ContextBus(neo4j_store, spool_dir=tmp_path / "spool")
    assert bus.store_interval == Neo4jEventStore.write_interval > 0
    writes = Writes()
    bus.subscribe(writes)
    try:
        trickle(bus, 30, 0.02)
        assert bus.flush(30)
    finally:
        bus.close()
    assert [e.content for e in neo4j_store.timeline("s")] == [
        f"lantern check {i}" for i in range(30)
    ]
    times = [t for t, _ in writes.seen]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # every write but the flushed last one waited its interval
    assert all(g >= bus.store_interval - 0.02 for g in gaps[:-1]), gaps
