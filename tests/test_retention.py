"""Retention on a generated 30-day history: archive, remove, re-import, identical export."""

from __future__ import annotations

import gzip
import hashlib
import json
import stat
import time
from pathlib import Path

import pytest

from beeweave_core.events import EventType
from beeweave_core.governance import retention as R
from beeweave_core.weave import Weave

from .context_helpers import say
from .test_cli import run

DAY = R.DAY
ORCHARDS = ["pear", "plum", "quince", "medlar", "cherry", "apricot", "walnut", "hazel"]


def history(w: Weave, base: float) -> dict[str, list[int]]:
    """Three sessions over 30 days (ten days each), two turns a day, a fact every day."""
    days: dict[str, list[int]] = {}
    for d in range(30):
        sid = f"orchard-{d // 10}"
        tree = ORCHARDS[d % len(ORCHARDS)]
        msgs = [
            {"role": "user", "content": f"Day {d}: row {d + 3} of {tree} trees got {d * 7 + 11} litres, code W{d:03d}."},
            {"role": "assistant", "content": f"Logged watering W{d:03d} for the {tree} row."},
        ]  # fmt: skip
        say(w, sid, msgs, prefix=f"d{d}", ts=base + d * DAY)
        days.setdefault(sid, []).append(d)
    return days


def exports(w: Weave) -> dict[str, dict]:
    return {s.session_id: w.store.export_session(s.session_id) for s in w.store.sessions()}


def without_notes(data: dict) -> dict:
    notes = {e["id"] for e in data["events"] if e["payload"].get("kind") == R.NOTE_KIND}
    return {**data, "events": [e for e in data["events"] if e["id"] not in notes],
            "edges": [e for e in data["edges"] if e["src"] not in notes]}  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"], indirect=True)
def test_archive_remove_reimport_identical(backend: str, weave_factory, home: Path):
    now = time.time()
    base = now - 30 * DAY
    w = weave_factory(backend)
    history(w, base)
    for sid in ("orchard-0", "orchard-1"):
        w.context.compact(sid, window_tokens=200, force=True)  # summaries and memories
    w.flush()
    w.indexer.sync()
    before = exports(w)
    summaries = w.store.timeline("orchard-0", types=(EventType.SUMMARY,))
    memories = w.context.memories("orchard-0")
    assert summaries, "the compactor summarised the old turns"
    assert memories, "the memory writer kept facts of the old turns"
    plan = R.apply_retention(w, home / "cold", [R.parse_rule("raw=14")], now=now, dry_run=True)
    assert plan.archive is None and plan.total == 20 + 12  # days 0-15, two turns each
    assert len(w.store.timeline("orchard-0", include_inactive=True)) == len(
        before["orchard-0"]["events"]
    )
    report = R.apply_retention(w, home / "cold", [R.parse_rule("raw=14")], now=now)
    archive = report.archive
    assert archive is not None and report.expired == {"orchard-0": 20, "orchard-1": 12}
    assert report.purged == 32
    # gone from the hot store, the full-text index and the vector index
    gone = [e["id"] for e in before["orchard-0"]["events"] if e["type"] == "user_message"]
    assert w.store.get(gone, include_inactive=True) == []
    found = w.store.search_text("W004", session_id="orchard-0")
    assert found and not {e.id for e, _ in found} & set(gone)  # the summary still has it
    hits = w.retrieve("litres of watering code W004", session_id="orchard-0", k=20)
    assert not {h.event.id for h in hits} & set(gone)
    # derived summaries and memories keep working and name the archive
    kept = w.store.get([s.id for s in summaries])
    assert len(kept) == len(summaries)
    assert all(R.archived_in(w.store, s) == [archive.name] for s in kept)
    assert [m.id for m in w.context.memories("orchard-0")] == [m.id for m in memories]
    assert all(R.archived_in(w.store, m) == [archive.name] for m in memories)
    q = "how many litres for watering code W004?"
    ctx = w.assemble("orchard-0", q, budget_tokens=2000, record=False)
    assert "W004" in "\n".join(str(m["content"]) for m in ctx.messages)
    ctx = w.assemble("orchard-1", budget_tokens=2000, record=False)  # half archived
    assert ctx.tokens_by_layer["recalled"] > 0 and ctx.tokens_by_layer["immediate"] > 0
    assert w.store.timeline("orchard-2")  # young session untouched
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    manifest = json.loads(R.manifest_path(archive).read_text())
    assert manifest["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert manifest["events"] == 32 and manifest["sessions"] == report.expired
    assert b"W004" in gzip.decompress(archive.read_bytes())
    w.flush()
    if backend == "sqlite":  # through the CLI, in another process
        url, tenant = w.url, w.tenant
        w.close()
        traced = run(home, "trace", summaries[0].id, "--url", url, "--tenant", tenant).stdout
        assert f"archived in {archive.name}" in traced.replace("\n", "")
        run(home, "import", str(archive), "--url", url, "--tenant", tenant)
        with Weave.open(url, tenant=tenant, spool_dir=home / "spool", index=False) as w2:
            after = exports(w2)
    else:  # what the CLI runs, in this process (a test's tenant on the shared server)
        R.import_archive(w.writer, R.read_archive(archive))
        after = exports(w)
    assert set(after) == set(before)
    for sid in before:
        assert without_notes(after[sid]) == before[sid], sid


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"], indirect=True)
def test_a_session_archived_whole_comes_back_whole(backend: str, weave_factory, home: Path):
    """Every event of a session expires, and so does the newest of another: the archive
    note left behind must not take a place (seq) the import gives back to them."""
    now = time.time()
    w = weave_factory(backend, index=False)
    old = now - 40 * DAY
    say(w, "kiln-log", [{"role": "user", "content": "Glaze batch G7 fired at cone 6."},
                        {"role": "assistant", "content": "Noted, G7 at cone 6."}],
        prefix="k", ts=old)  # fmt: skip
    w.emit(
        "user_message", "Shelf plan for the spring sale.", session_id="stall", ts=now, role="user"
    )
    w.emit("retrieval", "which shelf has the mugs?", session_id="stall", ts=old, role="system")
    w.flush()
    before = exports(w)
    rules = [R.parse_rule("raw=30"), R.parse_rule("retrieval=30")]
    report = R.apply_retention(w, home / "cold", rules, now=now)
    assert report.expired == {"kiln-log": 2, "stall": 1} and report.archive is not None
    R.import_archive(w.writer, R.read_archive(report.archive))
    after = exports(w)
    for sid in ("kiln-log", "stall"):  # (maintenance may have added a memory since)
        back = {e["id"]: e for e in after[sid]["events"]}
        assert [back.get(e["id"]) for e in before[sid]["events"]] == before[sid]["events"]
        note = next(e for e in after[sid]["events"] if e["payload"].get("kind") == R.NOTE_KIND)
        assert note["seq"] > max(e["seq"] for e in before[sid]["events"])  # after what it names


def test_tampered_archive_is_refused_and_nothing_written(home: Path):
    url = f"sqlite:///{home}/beeweave.db"
    now = time.time()
    with Weave.open(url, spool_dir=home / "spool", index=False) as w:
        say(w, "old", [{"role": "user", "content": "The gate code is 4471."}], ts=now - 200 * DAY)
        say(w, "old", [{"role": "user", "content": "Bring gloves."}], ts=now)
        archive = R.apply_retention(w, home / "cold", now=now).archive
    assert archive is not None
    raw = bytearray(archive.read_bytes())
    raw[-9] ^= 0xFF
    archive.write_bytes(bytes(raw))
    out = run(home, "import", str(archive), "--url", url, check=False)
    assert out.returncode == 1 and "SHA-256" in out.stderr and "Traceback" not in out.stderr
    with Weave.open(url, spool_dir=home / "spool", index=False) as w:
        assert [e.content for e in w.store.timeline("old", types=(EventType.USER_MESSAGE,))] == [
            "Bring gloves."
        ]


def test_cli_dry_run_and_bad_rule(home: Path):
    url = f"sqlite:///{home}/beeweave.db"
    with Weave.open(url, spool_dir=home / "spool", index=False) as w:
        say(w, "s", [{"role": "user", "content": "hello there"}], ts=time.time() - 100 * DAY)
    out = run(home, "retention", "apply", "--dry-run", "--url", url).stdout
    assert "would archive 1 event(s) from 1 session(s)" in out
    bad = run(home, "retention", "apply", "--rule", "chatter=3", "--url", url, check=False)
    assert bad.returncode == 1 and "unknown type 'chatter'" in bad.stderr
    with Weave.open(url, spool_dir=home / "spool", index=False) as w:
        assert len(w.store.timeline("s")) == 1  # a dry run and a bad rule change nothing


def test_cli_prunes_checkpoints_per_thread(home: Path):
    from beeweave_langchain.checkpoint import BeeWeaveCheckpointer

    from .test_checkpoint import _counter_graph

    url = f"sqlite:///{home}/beeweave.db"
    with Weave.open(url, spool_dir=home / "spool", index=False) as w:
        saver = BeeWeaveCheckpointer.from_weave(w)
        graph = _counter_graph(saver)
        for tid in ("t1", "t2"):
            graph.invoke({"n": 0, "log": []}, {"configurable": {"thread_id": tid}})
            for _ in range(4):
                graph.invoke({}, {"configurable": {"thread_id": tid}})

    def prune_to(left: int, *option: str) -> None:
        out = run(home, "retention", "apply", *option, "--url", url).stdout
        assert "pruned checkpoints of 2 thread(s)" in out
        with Weave.open(url, spool_dir=home / "spool", index=False) as w:
            saver = BeeWeaveCheckpointer.from_weave(w)
            for tid in ("t1", "t2"):
                cfg = {"configurable": {"thread_id": tid}}
                assert len(list(saver.list(cfg))) == left
                assert _counter_graph(saver).get_state(cfg).values["n"] == 5

    prune_to(2, "--keep-checkpoints", "2")
    time.sleep(0.5)
    prune_to(1, "--checkpoint-days", "0.000005")  # older than ~0.4 s: only the newest stays
    bad = run(home, "retention", "apply", "--keep-checkpoints", "0", "--url", url, check=False)
    assert bad.returncode == 1 and "must be positive" in bad.stderr


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"], indirect=True)
def test_an_archive_of_a_session_purged_since_is_refused_on_import(backend, weave_factory, home):
    """Retention archives without a tombstone (so its archive can come back); a purge
    after it is an erasure: the archive is rewritten without the session, and the
    store's tombstone keeps out a copy of the old archive kept elsewhere."""
    now = time.time()
    w = weave_factory(backend)
    history(w, now - 30 * DAY)
    w.flush()
    report = R.apply_retention(w, home / "cold", [R.parse_rule("raw=14")], now=now)
    assert report.archive is not None and report.expired["orchard-0"] == 20
    back = R.import_archive(w.writer, R.read_archive(report.archive))  # control: it comes back
    assert back.inserted == 32 and not back.purged, back
    copy = _copy_archive(report.archive, home / "elsewhere")
    w.purge(session_id="orchard-0")
    left = {s.export.session_id: len(s.export.events) for s in R.read_archive(report.archive)}
    assert left == {"orchard-1": 12}
    again = R.import_archive(w.writer, R.read_archive(copy))
    assert again.inserted == 0 and len(again.purged) == 20, again  # orchard-1's 12 are present
    assert w.store.timeline("orchard-0", include_inactive=True) == []


def _copy_archive(archive: Path, folder: Path) -> Path:
    folder.mkdir()
    for src in (archive, R.manifest_path(archive)):
        (folder / src.name).write_bytes(src.read_bytes())
    return folder / archive.name


def _archived_text(folder: Path) -> str:
    return "".join(gzip.decompress(p.read_bytes()).decode() for p in folder.glob("*.jsonl.gz"))


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"], indirect=True)
def test_a_user_purge_takes_the_user_out_of_every_archive(backend, weave_factory, home):
    """An archive in a folder retention was given is rewritten without the user; one in
    the home's archive folder holding only the user's events is deleted with its manifest."""
    now = time.time()
    w = weave_factory(backend)
    old = now - 30 * DAY
    say(w, "rosa-1", [{"role": "user", "content": "locker code zorblatt"}], user_id="rosa",
        ts=old, maintain=False)  # fmt: skip
    say(w, "tom-1", [{"role": "user", "content": "plant the quinces"}], user_id="tom",
        ts=old, maintain=False)  # fmt: skip
    first = R.apply_retention(w, home / "cold", [R.parse_rule("raw=14")], now=now).archive
    say(w, "rosa-2", [{"role": "user", "content": "second locker vermillionkestrel"}],
        user_id="rosa", ts=old, maintain=False)  # fmt: skip
    default = R.archive_dirs()[0]
    second = R.apply_retention(w, default, [R.parse_rule("raw=14")], now=now).archive
    assert first and second and "zorblatt" in _archived_text(home / "cold")  # the probe sees it
    assert w.purge(user_id="rosa") == 2  # the two archived events (the store had none left)
    assert "zorblatt" not in _archived_text(home / "cold")
    assert [s.export.session_id for s in R.read_archive(first)] == ["tom-1"]
    assert not second.exists() and not R.manifest_path(second).exists()
    assert "vermillionkestrel" not in _archived_text(default)
