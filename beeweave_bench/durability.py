"""Events lost per failure, measured with real processes, real signals and real stores.

Each scenario runs a capture process (``python -m beeweave_bench.durability child``)
that emits numbered events and reports on stdout, as it goes, how far it got and
when (``CLOCK_MONOTONIC``, shared by all processes).  The scenario then kills or
stops it, opens the store again (which replays what the dead process left in its
spool) and counts what arrived.  An event counts as *lost beyond the contract*
when it was emitted more than ``window`` seconds before the process died and is
not in the store; SIGTERM and a normal exit must lose nothing at all.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import beeweave_core
from beeweave_bench.waits import flush_until
from beeweave_core.events import EdgeType
from beeweave_core.weave import Weave

#: The documented bound: an event is on disk this long after emit() returned.
CONTRACT_WINDOW = 0.1
SID = "dur"
#: A paced child is signalled only once it has emitted this many events, however slow
#: the machine: the kill must land mid-stream, not during start-up.
PACED_BEFORE_KILL = 60


@dataclass
class Child:
    """A capture process and what it said, line by line, with arrival times."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def wait_for(self, word: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(line.startswith(word) for line in self.lines):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"capture process never said {word!r}: {self.lines[-5:]}")
            time.sleep(0.02)

    def progress(self) -> list[tuple[int, float]]:
        """(i, t): events 0..i had been emitted at monotonic time t."""
        return [(int(p[1]), float(p[2])) for p in (x.split() for x in self.lines) if p[0] == "e"]


def spawn(url: str, spool: Path, *, mode: str, n: int, pace: float, extra: list[str] = ()) -> Child:  # type: ignore[assignment]
    """Start a capture process (this package importable in it) and read its stdout."""
    env = dict(os.environ)
    root = str(Path(beeweave_core.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [
        sys.executable,
        "-m",
        "beeweave_bench.durability",
        "child",
        url,
        str(spool),
        mode,
        str(n),
        str(pace),
        *extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    child = Child(proc)

    def read() -> None:
        assert proc.stdout is not None
        with proc.stdout:  # closed at the child's end, not left to garbage collection
            for line in proc.stdout:
                child.lines.append(line.strip())

    child.reader = threading.Thread(target=read, daemon=True)
    child.reader.start()
    return child


def child_main(argv: list[str]) -> None:
    """The capture process: emit ``n`` numbered events, paced or in one burst."""
    url, spool, mode, n, pace, *extra = argv
    os.umask(0o022)  # the usual umask: what BeeWeave creates must still be private
    if "host-handler-before" in extra:
        _host_handler()
    weave = Weave.open(url, spool_dir=spool, index=False, **_bus_options(extra))
    if "host-handler-after" in extra:
        _host_handler()
    out = sys.stdout
    out.write(f"ready {time.monotonic():.6f}\n")
    out.flush()
    go = Path(spool).parent / "go"
    while "wait-go" in extra and not go.exists():
        time.sleep(0.01)
    every = 1 if mode == "paced" else 500
    for i in range(int(n)):
        weave.emit("user_message", f"e{i}", session_id=SID, key=f"k{i}")
        if i % every == every - 1 or i == int(n) - 1:
            out.write(f"e {i} {time.monotonic():.6f}\n")
            out.flush()
        if mode == "paced":
            time.sleep(float(pace))
    if "purge-secret" in extra:
        _purge_secret(weave)
    out.write("done\n")
    out.flush()
    if "exit" in extra:
        return  # a normal exit: atexit saves the rest
    time.sleep(3600)


def _bus_options(extra: list[str]) -> dict[str, Any]:
    opts = [x.split("=", 1) for x in extra if x.startswith("busy=")]
    return {"store_options": {"busy_timeout": float(opts[0][1])}} if opts else {}


def _host_handler() -> None:
    """A host's own SIGTERM handler: says so, then exits cleanly."""

    def handler(signum: int, frame: Any) -> None:
        sys.stdout.write("host handler ran\n")
        sys.stdout.flush()
        sys.exit(0)

    signal.signal(signal.SIGTERM, handler)


def _purge_secret(weave: Weave) -> None:
    for i in range(50):
        weave.emit("user_message", f"SECRET-{i} card 4111", session_id="secret", key=f"s{i}")
    weave.bus.persisted()
    try:
        weave.purge(session_id="secret")
        sys.stdout.write("purged\n")
    except Exception as exc:  # the store is locked: pending copies are gone all the same
        sys.stdout.write(f"purge raised {type(exc).__name__}\n")
    sys.stdout.flush()


def stored_events(url: str, spool: Path, **kw: Any) -> list[Any]:
    """Open the store again (replaying what was left in the spool) and read the session."""
    with Weave.open(url, spool_dir=spool, index=False, **kw) as weave:
        flush_until(weave, 300)
        return weave.store.timeline(SID)


def count_loss(child: Child, t_end: float, stored: list[Any], window: float) -> dict[str, Any]:
    """What the store lacks of what the child reported emitting before ``t_end``."""
    have = {int(e.content[1:]) for e in stored}
    prog = child.progress()
    emitted = max((i for i, _ in prog), default=-1) + 1
    sure = max((i for i, t in prog if t <= t_end - window), default=-1) + 1
    lost = [i for i in range(emitted) if i not in have]
    times = dict(prog)
    ages = [t_end - next(t for j, t in sorted(times.items()) if j >= i) for i in lost]
    return {
        "emitted": emitted,
        "stored": len(have),
        "lost": len(lost),
        "lost beyond window": sum(1 for i in lost if i < sure),
        "oldest lost ms": round(1000 * max(ages), 1) if ages else 0.0,
    }


def kill_run(
    tmp: Path,
    *,
    mode: str,
    sig: int,
    n: int,
    pace: float,
    delay: float,
    extra: list[str] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """One capture process, ``sig`` after ``delay`` seconds, then count."""
    url = f"sqlite:///{tmp / 'dur.db'}"
    child = spawn(url, tmp / "spool", mode=mode, n=n, pace=pace, extra=list(extra))
    child.wait_for("ready")
    time.sleep(delay)
    if mode == "paced":
        child.wait_for(f"e {PACED_BEFORE_KILL}")
    t_kill = time.monotonic()
    child.proc.send_signal(sig)
    code = child.proc.wait(60)
    assert child.reader is not None
    child.reader.join(10)
    window = CONTRACT_WINDOW if sig == signal.SIGKILL else float("inf")
    private = all_private(tmp / "spool")  # what the dead process left, before the replay
    row = count_loss(child, t_kill, stored_events(url, tmp / "spool"), window)
    row["exit"] = code
    row["files private"] = private
    row["host handler ran"] = "host handler ran" in child.lines
    return row


def all_private(folder: Path) -> bool:
    """``folder`` exists, every file under it is 0600 and every folder 0700."""
    found = [folder, *folder.rglob("*")]
    modes = {p: p.stat().st_mode & 0o777 for p in found if p.exists()}
    return folder in modes and all(m == (0o700 if p.is_dir() else 0o600) for p, m in modes.items())


def sqlite_lock_run(tmp: Path, n: int = 1_000) -> dict[str, Any]:
    """A held write lock on the SQLite file: spooled at once, replayed after, in order."""
    db = tmp / "lock.db"
    url = f"sqlite:///{db}"
    with Weave.open(url, spool_dir=tmp / "spool", index=False) as weave:
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        t0 = time.monotonic()
        for i in range(n):
            weave.emit("user_message", f"e{i}", session_id=SID)
        on_disk = weave.bus.persisted(10)
        t_disk = time.monotonic() - t0
        flushed = weave.flush(30)  # False: the store does not answer
        t_flush = time.monotonic() - t0
        down = weave.stats()["store_up"] is False
        blocker.execute("ROLLBACK")
        blocker.close()
        t1 = time.monotonic()
        back = flush_until(weave, 120)
        t_replay = time.monotonic() - t1
        got = [e.content for e in weave.store.timeline(SID)]
    return {
        "emitted": n,
        "stored": len(got),
        "lost": n - len(set(got)),
        "in order": got == [f"e{i}" for i in range(n)],
        "all on disk": on_disk,
        "on disk s": round(t_disk, 3),
        "flush gave up s": round(t_flush, 2),
        "flush while locked": flushed,
        "store seen down": down,
        "replayed s": round(t_replay, 2),
        "flush after": back,
    }


def purge_sibling_run(tmp: Path, n: int = 30, *, dies_after_purge: bool = False) -> dict[str, Any]:
    """A sibling process holds a session in its spool after this weave opened; this
    weave purges the session; the next open must not replay it back.

    The sibling dies before the purge, or (``dies_after_purge``) is frozen (SIGSTOP)
    through the purge and killed after it: its spool is a live process's file then,
    which the purge cannot touch, and only the store's tombstone keeps it out."""
    db, spool = tmp / "purge.db", tmp / "spool"
    url = f"sqlite:///{db}"
    with Weave.open(url, spool_dir=spool, index=False) as weave:
        child = spawn(url, spool, mode="burst", n=n, pace=0.0, extra=["wait-go"])
        child.wait_for("ready")
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # the sibling's events stay in its spool
        (tmp / "go").touch()
        child.wait_for("done")
        deadline = time.monotonic() + 30
        while _spooled(spool, weave.bus.spool_path) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        pending = _spooled(spool, weave.bus.spool_path)
        if dies_after_purge:
            os.kill(child.proc.pid, signal.SIGSTOP)
            _wait_stopped(child.proc.pid)  # before the lock is freed: it must not take it
        else:
            child.proc.kill()
            child.proc.wait(60)
        blocker.execute("ROLLBACK")
        blocker.close()
        purged = weave.purge(session_id=SID)
    if dies_after_purge:
        child.proc.kill()
        child.proc.wait(60)
    with Weave.open(url, spool_dir=spool, index=False) as after:  # replays the dead spool
        flush_until(after, 300)
        back = after.store.timeline(SID)
        refused = after.stats().get("purged_copies", 0)
    return {
        "pending in the dead sibling": pending,
        "purged": purged,
        "resurrected": len(back),
        "copies refused at replay": refused,
    }


def _wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Until the kernel shows ``pid`` stopped: SIGSTOP is delivered, not obeyed, by
    ``kill``, and a sibling still running could take the write lock and freeze holding
    it (a purge then waits out the busy timeout)."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
                return
        except (OSError, IndexError):  # no /proc (not Linux): give the signal a moment
            time.sleep(0.5)
            return
        time.sleep(0.01)


def _spooled(folder: Path, own: Path) -> int:
    """Lines in the spools of other processes."""
    return sum(len(p.read_bytes().splitlines()) for p in folder.glob("*.spool.jsonl") if p != own)


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr explodes")


class _BadModel:
    def model_dump(self, **kw: Any) -> Any:
        raise RuntimeError("model_dump explodes")


#: Poison inputs beside good events: (what it is, emit keyword arguments).
POISON: list[tuple[str, dict[str, Any]]] = [
    ("unhashable session_id", {"type": "internal_thought", "session_id": ["a", "list"]}),
    (
        "unhashable coalesce_key",
        {"type": "internal_thought", "session_id": SID, "coalesce_key": {"a": 1}},
    ),
    (
        "set holding a raising __repr__",
        {"type": "tool_result", "session_id": SID, "payload": {"s": {_BadRepr(), _BadRepr()}}},
    ),
    (
        "model_dump raises",
        {"type": "tool_result", "session_id": SID, "payload": {"m": _BadModel()}},
    ),
    ('ts="yesterday"', {"type": "internal_thought", "session_id": "other", "ts": "yesterday"}),
    (
        "unknown edge type",
        {"type": "assistant_message", "session_id": SID, "links": {"LIKES": ["x"]}},
    ),
    ("empty parent id", {"type": "assistant_message", "session_id": SID, "parents": [""]}),
    ("session_id with a line break", {"type": "user_message", "session_id": "a\nb"}),
]


def poison_run(tmp: Path, good: int = 600) -> dict[str, Any]:
    """Every poison input among ``good`` good events, high and low priority."""
    with Weave.open(f"sqlite:///{tmp / 'poison.db'}", spool_dir=tmp / "spool", index=False) as w:
        per = good // (len(POISON) + 1)
        i = 0
        for _, kw in [("", {})] + POISON:
            for _ in range(per):
                w.emit(
                    "user_message" if i % 2 else "internal_thought",
                    f"g{i}",
                    session_id=SID,
                    coalesce_key=f"c{i}",
                )
                i += 1
            if kw:
                kw = dict(kw)
                w.emit(kw.pop("type"), "poison", **kw)
        flushed = w.flush(60)
        got = {e.content for e in w.store.timeline(SID)}
        dead = [json.loads(x) for x in w.bus.dead_letter_path.read_text().splitlines()]
        stats = w.stats()
    return {
        "emitted": i + len(POISON),
        "good stored": len(got & {f"g{j}" for j in range(i)}),
        "lost": i - len(got & {f"g{j}" for j in range(i)}),
        "bad": len(POISON),
        "dead-lettered": len(dead),
        "with reason": sum(1 for d in dead if d.get("error")),
        "refused": stats["refused"],
        "flush": flushed,
    }


def neo4j_outage_run(
    script: Path, tmp: Path, *, port: int, state: Path | None = None, pace: float = 0.004
) -> dict[str, Any]:
    """Stop this run's own Neo4j during capture, SIGKILL the capture inside the outage,
    start Neo4j again, replay, count; check seq is gapless and NEXT is one chain."""
    state = state or tmp / "neo4j"
    env = {**os.environ, "NEO4J_PORT": str(port), "BEEWEAVE_NEO4J_STATE": str(state)}

    def server(*args: str) -> None:
        subprocess.run([str(script), *args], env=env, check=True, stdout=subprocess.DEVNULL)

    server("start")
    url = f"bolt://127.0.0.1:{port}"
    try:
        child = spawn(url, tmp / "spool", mode="paced", n=100_000, pace=pace)
        child.wait_for("ready")
        time.sleep(1.5)
        t_stop = time.monotonic()
        server("stop")
        time.sleep(2.0)  # the store has been down for a while: the kill lands in the outage
        t_kill = time.monotonic()
        child.proc.kill()
        child.proc.wait(30)
        server("start", "--keep")
        timeline = stored_events(url, tmp / "spool")
        with Weave.open(url, index=False, spool_dir=tmp / "spool2") as weave:
            nxt = weave.store.edges(session_id=SID, types=[EdgeType.NEXT])
    finally:
        server("stop")
    row = count_loss(child, t_kill, timeline, CONTRACT_WINDOW)
    chain = {(a.id, b.id) for a, b in zip(timeline, timeline[1:], strict=False)}
    row["outage s"] = round(t_kill - t_stop, 1)
    row["seq gapless"] = [e.seq for e in timeline] == list(range(len(timeline)))
    row["NEXT unforked"] = {(e.src, e.dst) for e in nxt} == chain and len(nxt) == len(chain)
    return row


def purge_run(tmp: Path) -> dict[str, Any]:
    """Purge while the store is locked, SIGKILL, restart: the purged events never return."""
    db = tmp / "purge.db"
    url = f"sqlite:///{db}"
    extra = ["purge-secret", "busy=0.2", "wait-go"]
    child = spawn(url, tmp / "spool", mode="burst", n=200, pace=0, extra=extra)
    child.wait_for("ready")
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # the store stops answering: events stay spooled
    (tmp / "go").touch()
    child.wait_for("done", timeout=120)
    child.proc.kill()
    child.proc.wait(30)
    blocker.execute("ROLLBACK")
    blocker.close()
    with Weave.open(url, spool_dir=tmp / "spool", index=False) as weave:
        weave.flush(60)
        secret = weave.store.timeline("secret", include_inactive=True)
        kept = weave.store.timeline(SID)
    leaks = [p.name for p in tmp.rglob("*") if p.is_file() and b"SECRET-" in p.read_bytes()]
    return {
        "purge": next((x for x in child.lines if x.startswith("purge")), "?"),
        "kept": len(kept),
        "secret after restart": len(secret),
        "files with secret": len(leaks),
    }


#: What the table shows of each scenario's details (all of them go to the JSON).
_CHECKS = (
    "oldest lost ms",
    "exit",
    "files private",
    "in order",
    "on disk s",
    "replayed s",
    "dead-lettered",
    "purge",
    "outage s",
    "seq gapless",
    "NEXT unforked",
)


def table_row(row: dict[str, Any]) -> dict[str, Any]:
    """One line per scenario with the same columns; the full row goes to the JSON."""
    name = row["scenario"]
    if name.startswith("SIGTERM") or name.startswith("SQLite"):
        beyond = row["lost"]  # the contract for these is: nothing lost
    elif name.startswith("poison"):
        beyond = row["lost"]
    elif name.startswith("purge, a sibling"):
        beyond = row["resurrected"]
    elif name.startswith("purge"):
        beyond = row["secret after restart"] + row["files with secret"]  # purged yet back
    else:
        beyond = row["lost beyond window"]
    checks = [f"{k} {row[k]}" for k in _CHECKS if k in row]
    return {
        "scenario": name,
        "emitted": row.get("emitted", ""),
        "stored": row.get("stored", row.get("good stored", row.get("kept", ""))),
        "lost": row.get("lost", ""),
        "lost beyond contract": beyond,
        "checks": ", ".join(checks),
    }


def run(
    *, neo4j_script: Path | None, neo4j_port: int, seed: int = 7, burst: int = 20_000
) -> list[dict[str, Any]]:
    """Every scenario once; one row each (full detail; see :func:`table_row`)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []

    def scenario(name: str, fn: Callable[[Path], dict[str, Any]]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append({"scenario": name, **fn(Path(tmp))})

    for sig in (signal.SIGKILL, signal.SIGTERM):
        scenario(
            f"{sig.name}, paced",
            lambda t, sig=sig: kill_run(
                t, mode="paced", sig=sig, n=100_000, pace=0.002, delay=rng.uniform(0.5, 1.5)
            ),
        )
        scenario(
            f"{sig.name}, after a burst",
            lambda t, sig=sig: kill_run(
                t, mode="burst", sig=sig, n=burst, pace=0, delay=rng.uniform(0.2, 1.2)
            ),
        )
    scenario("SQLite write lock held", sqlite_lock_run)
    scenario("poison inputs", poison_run)
    scenario("purge, then SIGKILL", purge_run)
    scenario("purge, a sibling died after open", purge_sibling_run)
    scenario(
        "purge, a sibling frozen through it, killed after",
        lambda t: purge_sibling_run(t, dies_after_purge=True),
    )
    if neo4j_script is not None:
        scenario(
            "Neo4j stopped, SIGKILL inside",
            lambda t: neo4j_outage_run(neo4j_script, t, port=neo4j_port),
        )
    return rows


if __name__ == "__main__":  # pragma: no cover - the capture process of the scenarios
    if sys.argv[1:2] == ["child"]:
        child_main(sys.argv[2:])
