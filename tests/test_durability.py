"""The durability contract, proven with real processes, real signals and real stores.

Capture processes are killed (SIGKILL, SIGTERM) at random points while emitting
paced or in a burst; the store is opened again (which replays what was left on
disk) and every event is counted.  The Neo4j scenario stops and starts a Neo4j of
its own (``scripts/neo4j-test-server`` on a free port), never the shared one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from beeweave_bench import durability as dur
from beeweave_cli.app import app
from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.capture import ContextBus
from beeweave_core.index.chroma import make_client
from beeweave_core.weave import Weave

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "neo4j-test-server"
MAX_HIGH = 1_000  # the bus's default bound on events that are only in memory
rng = random.Random(int(os.environ.get("BEEWEAVE_TEST_SEED", "11")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def own_neo4j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A Neo4j of this module's own, started at once so it boots while other tests run."""
    port, state = _free_port(), tmp_path_factory.mktemp("neo4j-state")
    env = {**os.environ, "NEO4J_PORT": str(port), "BEEWEAVE_NEO4J_STATE": str(state)}
    boot = subprocess.Popen([str(SCRIPT), "start"], env=env, stdout=subprocess.DEVNULL)
    yield port, state
    boot.wait(600)
    subprocess.run([str(SCRIPT), "stop"], env=env, check=False, stdout=subprocess.DEVNULL)


@pytest.fixture(autouse=True)
def _boot_neo4j_early(own_neo4j: tuple[int, Path]) -> None:
    """Every test of this module requests the server, so it starts with the first one."""


def test_sigkill_while_paced_loses_nothing_older_than_the_window(tmp_path):
    for trial in range(2):
        row = dur.kill_run(tmp_path / str(trial), mode="paced", sig=signal.SIGKILL, n=100_000,
                           pace=0.002, delay=rng.uniform(0.4, 1.2))  # fmt: skip
        assert row["exit"] == -signal.SIGKILL and row["emitted"] > 50
        assert row["lost beyond window"] == 0, row
        assert row["files private"], row


def test_sigkill_in_or_after_a_burst_loses_at_most_the_memory_bound(tmp_path):
    for trial in range(2):
        row = dur.kill_run(tmp_path / str(trial), mode="burst", sig=signal.SIGKILL, n=20_000,
                           pace=0, delay=rng.uniform(0.1, 1.0))  # fmt: skip
        assert row["exit"] == -signal.SIGKILL and row["emitted"] >= 500
        assert row["lost"] <= MAX_HIGH, row
        assert row["files private"], row


@pytest.mark.parametrize("mode", ["paced", "burst"])
def test_sigterm_loses_nothing_and_still_ends_the_process(tmp_path, mode):
    row = dur.kill_run(tmp_path, mode=mode, sig=signal.SIGTERM, n=100_000 if mode == "paced" else 20_000,
                       pace=0.002, delay=rng.uniform(0.2, 1.0))  # fmt: skip
    assert row["emitted"] > 50 and row["lost"] == 0, row
    assert row["exit"] == -signal.SIGTERM  # the default action still happens, after saving


@pytest.mark.parametrize("when", ["host-handler-before", "host-handler-after"])
def test_sigterm_keeps_the_hosts_own_handler(tmp_path, when):
    row = dur.kill_run(tmp_path, mode="paced", sig=signal.SIGTERM, n=100_000, pace=0.002,
                       delay=0.5, extra=[when])  # fmt: skip
    assert row["host handler ran"] and row["exit"] == 0  # the host decided how to exit
    assert row["emitted"] > 50 and row["lost"] == 0, row


def test_a_held_sqlite_lock_is_spooled_within_seconds_then_replayed(tmp_path):
    row = dur.sqlite_lock_run(tmp_path)
    assert row["all on disk"] and row["on disk s"] < 1.0
    # flush() reports "not stored" once the store has not answered for stall_after (5 s)
    assert row["flush while locked"] is False and row["store seen down"]
    assert row["flush gave up s"] < 8, row
    assert row["flush after"] and row["lost"] == 0 and row["in order"], row


def test_poison_inputs_never_take_good_events_with_them(tmp_path):
    row = dur.poison_run(tmp_path)
    assert row["lost"] == 0 and row["good stored"] > 500, row
    assert row["dead-lettered"] == row["bad"] == row["refused"] == len(dur.POISON)
    assert row["with reason"] == row["bad"] and row["flush"] is False  # flush admits it
    dead = tmp_path / "spool"
    reasons = [
        json.loads(x)["error"]
        for p in dead.glob("*.dead-letter.jsonl")
        for x in p.read_text().splitlines()
    ]
    for needle in ("session_id must be a string", "coalesce_key", "repr explodes",
                   "model_dump explodes", "ts must be", "LIKES", "parent id", "control"):  # fmt: skip
        assert any(needle in r for r in reasons), (needle, reasons)


def test_the_writer_keeps_going_after_poison(tmp_path):
    with Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path / "sp", index=False) as w:
        w.emit("tool_result", "x", session_id="s", payload={"s": {dur._BadRepr(), 1}})
        w.emit("internal_thought", "y", session_id="s", ts="yesterday")  # type: ignore[arg-type]
        assert w.flush(10) is False
        ids = [w.emit("user_message", f"after {i}", session_id="s") for i in range(100)]
        assert w.flush(10) is True  # nothing refused since the last flush
        assert [e.id for e in w.store.timeline("s")] == ids


def test_purged_spooled_events_do_not_come_back_after_a_kill(tmp_path):
    row = dur.purge_run(tmp_path)
    assert row["purge"] == "purge raised OperationalError"  # the store was locked …
    assert (
        row["secret after restart"] == 0 and row["files with secret"] == 0
    )  # … yet nothing returns
    assert row["kept"] == 200


def test_purge_by_user_and_dead_letters(tmp_path):
    url = f"sqlite:///{tmp_path / 'u.db'}"
    with Weave.open(url, spool_dir=tmp_path / "sp", index=False) as w:
        for i in range(5):
            w.emit("user_message", f"ana {i}", session_id="ana-1", meta={"user_id": "ana"})
            w.emit("user_message", f"bo {i}", session_id="bo-1", meta={"user_id": "bo"})
        w.emit("user_message", "ana's card 4111", session_id="ana-1", ts=float("nan"),
               meta={"user_id": "ana"})  # fmt: skip
        w.flush()
        assert "4111" in w.bus.dead_letter_path.read_text()
        assert w.purge(user_id="ana") == 5
        assert w.store.timeline("ana-1", include_inactive=True) == []
        assert len(w.store.timeline("bo-1")) == 5
        assert "4111" not in w.bus.dead_letter_path.read_text()
        with pytest.raises(ValueError, match="purge needs"):
            w.purge()


def test_old_dead_letters_expire(tmp_path):
    store = SQLiteEventStore(tmp_path / "d.db")
    bus = ContextBus(store, spool_dir=tmp_path / "sp", dead_letter_days=30)
    bus.emit("user_message", "x", session_id="")
    bus.flush()
    path = bus.dead_letter_path
    bus.close()
    old = {"at": time.time() - 40 * 86_400, "error": "old", "item": ["secret from long ago"]}
    with path.open("a") as f:
        f.write(json.dumps(old) + "\n")
    bus = ContextBus(store, spool_dir=tmp_path / "sp", dead_letter_days=30)
    text = path.read_text()
    assert "secret from long ago" not in text and len(text.splitlines()) == 1
    bus.close()
    store.close()


@pytest.mark.parametrize("tenant", ["../../../escaped", "a/b", "x" * 300, "", ".hidden", "t\n1"])
def test_hostile_tenants_are_refused_before_any_file_exists(tmp_path, tenant):
    spool = tmp_path / "deep" / "spool"
    with pytest.raises(ValueError, match="tenant") as err:
        Weave.open(f"sqlite:///{tmp_path / 'h.db'}", tenant=tenant, spool_dir=spool, index=False)
    assert len(str(err.value)) < 160  # a short echo, never the whole input
    assert not spool.exists() and not (tmp_path / "escaped").exists()
    store = SQLiteEventStore(tmp_path / "h2.db", tenant=tenant) if tenant else None
    if store is not None:
        with pytest.raises(ValueError, match="tenant"):
            ContextBus(store, spool_dir=spool)
        store.close()
    assert not spool.exists()


def test_file_names_never_hold_raw_ids(tmp_path):
    with Weave.open(f"sqlite:///{tmp_path / 'n.db'}", tenant="acme-corp", spool_dir=tmp_path / "sp",
                    index=False) as w:  # fmt: skip
        w.emit("user_message", "x", session_id="")
        w.flush()
        names = [p.name for p in (tmp_path / "sp").iterdir()]
    assert names and not any("acme" in n for n in names)


def test_files_beeweave_creates_are_private(tmp_path, monkeypatch):
    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "bwhome"))
    monkeypatch.setenv("BEEWEAVE_INDEX", "off")
    old = os.umask(0o022)
    try:
        home = tmp_path / "home" / "new"
        db = home / "data" / "b.db"
        with Weave.open(f"sqlite:///{db}", spool_dir=home / "spool", index=False) as w:
            w.emit("user_message", "x", session_id="s")
            w.emit("user_message", "y", session_id="")  # a dead letter
            w.flush()
            export = CliRunner().invoke(app, ["export", "s", "-o", str(tmp_path / "s.json"),
                                              "--url", f"sqlite:///{db}"])  # fmt: skip
            assert export.exit_code == 0, export.output
            make_client(home / "chroma")
            files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), tmp_path / "s.json"]
            assert all(p.exists() for p in files)
            modes = {p.name: p.stat().st_mode & 0o777 for p in files}
            assert set(modes.values()) == {0o600}, modes
            assert dur.all_private(home / "spool") and dur.all_private(home / "chroma")
            for d in (home, db.parent):
                assert d.stat().st_mode & 0o777 == 0o700
    finally:
        os.umask(old)


def test_neo4j_stopped_during_capture_with_a_kill_inside_the_outage(tmp_path, own_neo4j):
    port, state = own_neo4j
    row = dur.neo4j_outage_run(SCRIPT, tmp_path, port=port, state=state)
    assert row["emitted"] > 100 and row["outage s"] >= 2, row
    assert row["lost beyond window"] == 0, row
    assert row["seq gapless"] and row["NEXT unforked"], row


def test_a_purge_reaches_the_spool_of_a_sibling_that_died_after_open(tmp_path):
    row = dur.purge_sibling_run(tmp_path)
    assert row["pending in the dead sibling"] == 30, row  # the events were only in its spool
    assert row["purged"] >= 30 and row["resurrected"] == 0, row


def test_a_purge_holds_against_a_sibling_frozen_through_it_and_killed_after(tmp_path):
    """The sibling's spool is a live process's file during the purge: only the store's
    tombstone can refuse its replay at the next open."""
    row = dur.purge_sibling_run(tmp_path, dies_after_purge=True)
    assert row["pending in the dead sibling"] == 30, row
    assert row["copies refused at replay"] == 30, row  # the spool was replayed, and refused
    assert row["resurrected"] == 0, row
