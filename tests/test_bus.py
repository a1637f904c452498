"""ContextBus: order, idempotency, coalescing, backpressure, spool + replay, shutdown."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.capture import ContextBus
from beeweave_core.events import EventType
from beeweave_core.weave import Weave


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "bus.db"


def open_bus(db: Path, tmp_path: Path, **kw) -> ContextBus:
    store = SQLiteEventStore(db, busy_timeout=kw.pop("busy_timeout", 30.0))
    return ContextBus(store, spool_dir=tmp_path / "spool", **kw)


def contents(store, sid: str = "s") -> list[str]:
    return [e.content for e in store.timeline(sid)]


def test_emit_returns_id_and_keeps_order(db, tmp_path):
    bus = open_bus(db, tmp_path)
    ids = [bus.emit("user_message", f"m{i}", session_id="s") for i in range(300)]
    assert bus.flush()
    tl = bus.store.timeline("s")
    assert [e.id for e in tl] == ids and [e.seq for e in tl] == list(range(300))
    assert bus.stats()["written"] == 300
    bus.close()


def test_redelivered_hook_is_stored_once(db, tmp_path):
    bus = open_bus(db, tmp_path)
    a = bus.emit("tool_result", "42", session_id="s", key="run-1/tool_end")
    b = bus.emit("tool_result", "42", session_id="s", key="run-1/tool_end")
    c = bus.emit("tool_result", "42", session_id="s", key="run-2/tool_end")
    bus.flush()
    assert a == b != c
    assert contents(bus.store) == ["42", "42"]
    assert bus.stats()["duplicates"] == 1
    bus.close()


def test_low_priority_fragments_are_coalesced(db, tmp_path):
    bus = open_bus(db, tmp_path, coalesce_window=0.5)
    u = bus.emit("user_message", "question", session_id="s")
    for i in range(200):
        bus.emit("internal_thought", f"t{i} ", session_id="s", coalesce_key="run-1")
    bus.emit("assistant_message", "answer", session_id="s", parents=[u])
    bus.flush()
    tl = bus.store.timeline("s")
    assert [e.type for e in tl] == [
        EventType.USER_MESSAGE, EventType.INTERNAL_THOUGHT, EventType.ASSISTANT_MESSAGE,
    ]  # fmt: skip
    thought = tl[1]
    assert thought.content == "".join(f"t{i} " for i in range(200))
    assert thought.payload["coalesced"]["fragments"] == 200
    assert bus.stats()["coalesced"] == 199
    bus.close()


def test_fragments_waiting_to_coalesce_are_bounded_by_max_low(db, tmp_path):
    """Unique coalesce keys inside one window: without the bound every fragment waits
    in memory for it; with it the oldest groups are written early, and nothing is lost."""
    bus = open_bus(db, tmp_path, coalesce_window=5.0, max_low=40)
    waiting = 0
    for i in range(600):
        bus.emit("internal_thought", f"f{i}", session_id="s", coalesce_key=f"k{i}")
        if i % 10 == 9:
            time.sleep(0.02)  # paced below the queue bound: only the coalescing map grows
            waiting = max(waiting, bus.stats()["queue_low"])
    assert waiting <= 2 * 40 and bus.stats()["dropped_low"] == 0  # queue + groups
    assert bus.flush(30)
    assert sorted(contents(bus.store)) == sorted(f"f{i}" for i in range(600))
    bus.close()


def test_one_key_flood_is_cut_into_groups_of_at_most_max_low(db, tmp_path):
    bus = open_bus(db, tmp_path, coalesce_window=5.0, max_low=50)
    for i in range(300):
        bus.emit("internal_thought", "x", session_id="s", coalesce_key="run")
        if i % 10 == 9:
            time.sleep(0.02)
    assert bus.flush(30) and bus.stats()["dropped_low"] == 0
    parts = bus.store.timeline("s")
    assert sum(len(e.content) for e in parts) == 300
    assert max(len(e.content) for e in parts) <= 50 and len(parts) >= 6
    bus.close()


def test_spool_pending_is_true_while_overflowed_events_wait(db, tmp_path):
    bus = open_bus(db, tmp_path, max_high=5)
    for i in range(2_000):
        bus.emit("user_message", f"burst {i}", session_id="s")
    st = bus.stats()
    assert st["overflowed"] > 0 and st["store_up"] and st["spool_pending"]
    assert bus.flush(60) and not bus.stats()["spool_pending"]
    assert len(bus.store.timeline("s")) == 2_000
    bus.close()


def test_fragments_further_apart_than_the_window_stay_separate(db, tmp_path):
    bus = open_bus(db, tmp_path, coalesce_window=0.05)
    bus.emit("internal_thought", "a", session_id="s", coalesce_key="k")
    time.sleep(0.2)
    bus.emit("internal_thought", "b", session_id="s", coalesce_key="k")
    bus.flush()
    assert contents(bus.store) == ["a", "b"]
    bus.close()


def test_backpressure_never_drops_high_priority(db, tmp_path):
    # a locked database stalls the writer while the caller keeps emitting
    bus = open_bus(db, tmp_path, max_high=50, max_low=20, busy_timeout=5.0)
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.perf_counter()
        for i in range(500):
            bus.emit("user_message", f"u{i}", session_id="s")
            bus.emit("internal_thought", f"t{i}", session_id="s", coalesce_key=f"k{i}")
        elapsed = time.perf_counter() - t0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert elapsed < 5.0  # emit never waited for the stalled store
    assert bus.flush(60)
    st = bus.stats()
    users = [c for c in contents(bus.store) if c.startswith("u")]
    assert users == [f"u{i}" for i in range(500)]  # every high-priority event, in order
    thoughts = [c for c in contents(bus.store) if c.startswith("t")]
    assert st["dropped_low"] > 0 and len(thoughts) + st["dropped_low"] == 500
    assert st["overflowed"] > 0 or st["spooled"] > 0
    bus.close()


def test_store_failure_spools_then_replays_in_order_once(db, tmp_path):
    bus = open_bus(db, tmp_path, busy_timeout=0.05, retry_interval=0.05)
    for i in range(50):
        bus.emit("user_message", f"before-{i}", session_id="s", key=f"b{i}")
    assert bus.flush()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # the store is now unreachable for writes
    try:
        for i in range(100):
            bus.emit("user_message", f"during-{i}", session_id="s", key=f"d{i}")
        assert bus.flush(5) is False  # kept safe on disk, not in the store
        st = bus.stats()
        assert st["store_up"] is False and st["spooled"] >= 100 and st["spool_pending"]
        assert bus.spool_path.exists()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    for i in range(20):
        bus.emit("user_message", f"after-{i}", session_id="s", key=f"a{i}")
    deadline = time.time() + 30
    while not bus.flush(1) and time.time() < deadline:
        pass
    got = contents(bus.store)
    expected = [f"before-{i}" for i in range(50)] + [f"during-{i}" for i in range(100)]
    expected += [f"after-{i}" for i in range(20)]
    assert got == expected  # nothing lost, nothing duplicated, order kept
    st = bus.stats()
    assert st["store_up"] is True and not st["spool_pending"] and st["replayed"] >= 100
    bus.close()


def test_spool_left_at_close_is_replayed_by_the_next_bus(db, tmp_path):
    bus = open_bus(db, tmp_path, busy_timeout=0.05)
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    for i in range(10):
        bus.emit("user_message", f"m{i}", session_id="s", key=f"m{i}")
    assert bus.flush(2) is False
    spool = bus.spool_path
    bus.close(timeout=1)  # the store is still locked: the events stay in the spool
    assert spool.exists() and len(spool.read_text().splitlines()) == 10
    blocker.execute("ROLLBACK")
    blocker.close()
    bus2 = open_bus(db, tmp_path)
    assert bus2.flush()
    assert contents(bus2.store) == [f"m{i}" for i in range(10)]
    assert not spool.exists() and bus2.stats()["replayed"] == 10
    bus2.close()


CRASH = """
import os, sqlite3, sys
from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.capture import ContextBus

db, spool = sys.argv[1], sys.argv[2]
bus = ContextBus(SQLiteEventStore(db, busy_timeout=0.05), spool_dir=spool)
blocker = sqlite3.connect(db, isolation_level=None)
blocker.execute("BEGIN EXCLUSIVE")  # the store refuses writes: the bus spools
for i in range(10):
    bus.emit("user_message", f"m{i}", session_id="s", key=f"m{i}")
bus.flush(2)
print(bus.spool_path, flush=True)
os._exit(1)  # a crash: no close(), no atexit flush; the OS drops the lock
"""


def test_spool_left_by_a_crash_is_replayed_on_start(db, tmp_path):
    crashed = subprocess.run([sys.executable, "-c", CRASH, str(db), str(tmp_path / "spool")],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    spool = Path(crashed.stdout.strip())
    assert crashed.returncode == 1 and spool.is_file(), crashed.stderr
    with SQLiteEventStore(db) as store:
        assert contents(store) == []  # nothing reached the store before the crash
    left = spool.read_bytes()
    bus2 = open_bus(db, tmp_path)
    assert bus2.flush()
    assert contents(bus2.store) == [f"m{i}" for i in range(10)]
    bus2.close()
    spool.write_bytes(left)  # the same spool replayed again adds nothing (ids are fixed)
    bus3 = open_bus(db, tmp_path)
    assert bus3.flush() and not bus3.stats()["spool_pending"]
    assert contents(bus3.store) == [f"m{i}" for i in range(10)]
    bus3.close()


def test_a_spool_written_in_another_form_is_made_canonical_on_replay(db, tmp_path):
    """A dead process's spool may come from another version, whose records the journal
    did not make canonical (text from a broken decode, a lone surrogate): replayed, it
    is stored in canonical form, not refused."""
    crashed = subprocess.run([sys.executable, "-c", CRASH, str(db), str(tmp_path / "spool")],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    spool = Path(crashed.stdout.strip())
    assert crashed.returncode == 1 and spool.is_file(), crashed.stderr
    first, rest = spool.read_bytes().split(b"\n", 1)
    line = json.loads(first)
    line["event"]["payload"] = {"label": "gr\udcfcn"}
    spool.write_bytes(json.dumps(line).encode() + b"\n" + rest)  # (escaped: ASCII JSON)
    bus = open_bus(db, tmp_path)
    assert bus.flush() and bus.stats()["refused"] == 0
    assert contents(bus.store) == [f"m{i}" for i in range(10)]
    assert bus.store.timeline("s")[0].payload == {"label": "gr\\udcfcn"}
    bus.close()


def test_close_flushes(db, tmp_path):
    bus = open_bus(db, tmp_path)
    for i in range(1000):
        bus.emit("assistant_message", f"m{i}", session_id="s")
    bus.close()
    with SQLiteEventStore(db) as store:
        assert len(store.timeline("s")) == 1000


def test_atexit_flush_in_a_real_process(tmp_path):
    code = f"""
from beeweave_core.weave import Weave
w = Weave.open("sqlite:///{tmp_path / "exit.db"}", spool_dir="{tmp_path / "sp"}")
for i in range(500):
    w.emit("user_message", f"m{{i}}", session_id="s")
# no flush, no close: the interpreter exits and atexit must save the events
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    with SQLiteEventStore(tmp_path / "exit.db") as store:
        assert [e.content for e in store.timeline("s")] == [f"m{i}" for i in range(500)]


def test_eight_threads_into_one_session(db, tmp_path):
    bus = open_bus(db, tmp_path)
    ids: dict[int, list[str]] = {}

    def work(t: int) -> None:
        ids[t] = [bus.emit("tool_result", f"{t}:{j}", session_id="s") for j in range(500)]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert bus.flush(60)
    tl = bus.store.timeline("s")
    assert [e.seq for e in tl] == list(range(4000))
    assert len({e.id for e in tl}) == 4000
    pos = {e.id: e.seq for e in tl}
    for t in range(8):  # each thread's events keep that thread's order
        seqs = [pos[i] for i in ids[t]]
        assert seqs == sorted(seqs)
    bus.close()


def test_refused_events_are_dead_lettered_never_raised(db, tmp_path, caplog):
    bus = open_bus(db, tmp_path)
    good1 = bus.emit("user_message", "fine", session_id="s")
    bad_type = bus.emit("no_such_type", "x", session_id="s")  # type: ignore[arg-type]
    bad_sid = bus.emit("user_message", "x", session_id="")
    bad_none = bus.emit("user_message", "x", session_id=None)  # type: ignore[arg-type]
    good2 = bus.emit("user_message", "also fine", session_id="s")
    assert all(isinstance(i, str) for i in (bad_type, bad_sid, bad_none))
    bus.flush()
    assert [e.id for e in bus.store.timeline("s")] == [good1, good2]
    st = bus.stats()
    assert st["refused"] == 3
    lines = [json.loads(x) for x in bus.dead_letter_path.read_text().splitlines()]
    assert len(lines) == 3 and all(x["error"] for x in lines)
    assert any("no_such_type" in json.dumps(x["item"]) for x in lines)
    assert "refused" in caplog.text
    bus.close()


def test_a_flood_of_malformed_emits_is_bounded_and_logged_per_cycle(db, tmp_path, caplog):
    bus = open_bus(db, tmp_path, max_low=40)
    flood = 20_000
    for k in range(flood):  # a broken integration sending a type nobody defined
        bus.emit("sensor_reading", f"r{k}", session_id="plant-3")  # type: ignore[arg-type]
    kept = bus.emit("user_message", "still heard", session_id="plant-3")
    assert not bus.flush(60)  # refusals since the last flush: False says so
    assert bus.flush(60)
    assert [e.id for e in bus.store.timeline("plant-3")] == [kept]
    st = bus.stats()
    assert st["refused"] + st["refused_unkept"] == flood
    assert st["refused_unkept"] > 0  # the bound was reached, and said so
    lines = bus.dead_letter_path.read_text().splitlines()
    assert len(lines) == st["refused"]
    logged = [r for r in caplog.records if "refused" in r.getMessage()]
    assert 0 < len(logged) < flood // 40
    bus.close()


def test_a_weave_emit_of_any_argument_shape_never_raises(tmp_path):
    with Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path, index=False) as w:
        odd = [{"meta": [1, 2]}, {"meta": "user=ana"}, {"payload": [1, 2]}, {"source": "x"},
               {"links": [1]}, {"parents": 5}]  # fmt: skip
        ids = [w.emit("user_message", "hi", session_id="s", **kw) for kw in odd]  # type: ignore[arg-type]
        kept = w.emit("user_message", "fine", session_id="s")
        assert all(isinstance(i, str) and i for i in ids)
        w.flush()
        assert [e.id for e in w.store.timeline("s")] == [kept]
        assert w.stats()["refused"] == len(odd)


class Weird:
    def __repr__(self) -> str:
        raise RuntimeError("repr explodes")


def test_odd_inputs_through_emit_are_stored_safely(db, tmp_path):
    bus = open_bus(db, tmp_path)
    ten_mb = "z" * (10 * 1024 * 1024)
    bus.emit("tool_result", ten_mb, session_id="s")
    bus.emit("tool_result", {"rows": [1, 2], "raw": b"\x01"}, session_id="s")
    bus.emit("tool_result", None, session_id="s", payload={"obj": Weird(), "nan": float("nan")})
    bus.emit("tool_result", "nul\x00 and \ud83d lone", session_id="s")
    bus.emit("tool_result", "", session_id="s")
    assert bus.flush()
    big, dct, weird, text, empty = bus.store.timeline("s")
    assert bus.store.get_artifact(big.payload["$artifact"]["sha256"]) == ten_mb
    assert json.loads(dct.content) == {"rows": [1, 2], "raw": {"$bytes": "AQ=="}}
    assert weird.payload["obj"]["$repr"].startswith("<unreprable")
    assert weird.payload["nan"] == {"$float": "nan"}
    assert text.content == "nul\x00 and \\ud83d lone"
    assert empty.content == ""
    assert bus.stats()["refused"] == 0
    bus.close()


def test_weave_tenants_are_isolated(tmp_path):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with (
        Weave.open(url, tenant="acme", spool_dir=tmp_path) as a,
        Weave.open(url, tenant="globex", spool_dir=tmp_path) as b,
    ):
        a.emit("user_message", "acme secret", session_id="s")
        b.emit("user_message", "globex note", session_id="s")
        a.flush()
        b.flush()
        assert contents(a.store) == ["acme secret"]
        assert contents(b.store) == ["globex note"]


def test_bad_urls_are_clear_errors(tmp_path):
    for url, msg in [("mysql://x", "unsupported"), ("sqlite://relative", "bad SQLite"),
                     ("sqlite:///", "no file path")]:  # fmt: skip
        with pytest.raises(ValueError, match=msg):
            Weave.open(url, spool_dir=tmp_path)


def test_listeners_see_stored_batches_and_cannot_break_capture(db, tmp_path):
    bus = open_bus(db, tmp_path)
    seen: list[str] = []
    bus.listeners.append(lambda evs: seen.extend(e.id for e in evs))
    bus.listeners.append(lambda evs: 1 / 0)
    ids = [bus.emit("user_message", f"m{i}", session_id="s") for i in range(20)]
    bus.flush()
    assert seen == ids
    assert len(bus.store.timeline("s")) == 20
    bus.close()


def test_a_live_spool_is_never_claimed_as_an_orphan(tmp_path):
    """Spools created while another bus scans for orphans: none of the live ones is taken."""
    from beeweave_core.capture.spool import Spool

    folder, made, claimed, stop = tmp_path / "sp", [], [], threading.Event()

    def scan() -> None:
        scanner = Spool(folder, "k")
        while not stop.is_set():
            for path, handle in scanner.orphans():
                claimed.append(path)
                if handle is not None:
                    handle.close()
        scanner.close()

    t = threading.Thread(target=scan)
    t.start()
    try:
        for _ in range(400):
            made.append(Spool(folder, "k"))
    finally:
        stop.set()
        t.join()
    assert claimed == [], claimed[:3]
    for spool in made:
        spool.append(b'{"n": 0}\n')
        spool.close()  # the file is still there: close() reads it
    assert len(list(folder.glob("k.*.spool.jsonl"))) == len(made)


def test_a_pre_built_event_is_stored_in_canonical_form(weave_factory):
    """``record_messages`` hands the bus built events; their records are made canonical
    like every other (the store takes the bus's records as they are): text from a broken
    decode is kept escaped, not refused."""
    from beeweave_core.transcript import record_messages

    w = weave_factory(index=False)
    call = {"id": "k1", "name": "weigh", "args": {"crate": "gr\udcfcn", "grams": 412}}
    ids = record_messages(w, "s", [{"role": "user", "content": "weigh the green crate"},
                                   {"role": "assistant", "content": "", "tool_calls": [call]}])  # fmt: skip
    assert w.flush() and w.stats()["refused"] == 0
    stored = w.store.get(ids)
    assert len(stored) == 3
    assert stored[-1].payload["args"] == {"crate": "gr\\udcfcn", "grams": 412}


def test_a_reading_flush_does_not_wait_for_lazy_records(db, tmp_path):
    """A read waits for what was captured, not for the audit records of reads before it;
    a plain flush still waits for everything."""
    bus = open_bus(db, tmp_path, busy_timeout=30.0)
    bus.emit("user_message", "the question", session_id="s")
    assert bus.flush()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # the store thread's next write waits on this
    try:
        bus.emit("retrieval", "an audit record", session_id="s", lazy=True)
        t0 = time.monotonic()
        assert bus.flush(3, reading=True) is True
        assert time.monotonic() - t0 < 1.0
        assert bus.flush(0.5) is False  # a plain flush waits for the lazy record too
        bus.emit("user_message", "a captured turn", session_id="s")
        assert bus.flush(0.5, reading=True) is False  # …and a read waits for a real one
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert bus.flush(30)
    assert contents(bus.store) == ["the question", "an audit record", "a captured turn"]
    bus.close()
