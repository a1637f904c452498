"""How read cost grows with the amount stored: one store grown step by step.

A memory serving many users keeps growing; a query about one session must cost
what that session holds, not what the whole store holds.  This grows a single
store (new users with new sessions at each step, as a real deployment grows),
and after each step measures scoped and tenant-wide recall, assembly, size on
disk and memory, so the growth of each figure from the first step to the last
shows whether any read path scans everything.

The text is generated: a Zipf-weighted vocabulary (a few very common words, a
long tail of rare ones) plus identifiers, so full-text matches vary from huge
to tiny as in real conversation logs.  Queries are drawn from the same source.
"""

from __future__ import annotations

import math
import os
import random
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beeweave_core.events import Event, EventType
from beeweave_core.weave import Weave

#: Steps (total events stored) up to the largest that fits ``max_events``.
STEPS = (10_000, 30_000, 100_000, 300_000, 1_000_000)
TARGETS = (
    "targets: session/user retrieve p50 growth <= 1.5x from 10k to 1M events; "
    "tenant retrieve p50 <= 50 ms at 1M (SQLite); assemble p50 growth <= 1.5x. "
    "assemble_p50_ms: a session's second call (as each turn makes it); "
    "assemble_first_p50_ms: its first (its user's token counts not read yet). "
    "*_ref_p50_ms: the first step's store, kept at that size and measured call for call "
    "beside this one; *_p50_adjusted (growth row): growth of this store / that reference, "
    "which a change in machine load during the run does not move. "
    "bytes_per_event: the SQLite file with its WAL (a Neo4j store is the server's). "
    "tenant_bm25_share (SQLite): median over 20 queries of the share of the exhaustive "
    "BM25 top 10's score that the bounded tenant-wide search's top 10 holds (1.0 = as good); "
    "tenant_top10_overlap: median share of the exhaustive top 10's rows it holds"
)
_ROOTS = [
    "account",
    "order",
    "invoice",
    "payment",
    "refund",
    "shipment",
    "delivery",
    "warehouse",
    "customer",
    "ticket",
    "deploy",
    "server",
    "cluster",
    "database",
    "index",
    "query",
    "cache",
    "latency",
    "timeout",
    "retry",
    "error",
    "budget",
    "forecast",
    "quarter",
    "revenue",
    "margin",
    "report",
    "meeting",
    "schedule",
    "travel",
    "flight",
    "hotel",
    "booking",
    "doctor",
    "appointment",
    "recipe",
    "garden",
    "bicycle",
    "guitar",
    "lesson",
    "exam",
    "contract",
    "lawyer",
    "tenant",
    "landlord",
    "insurance",
    "claim",
    "vaccine",
    "allergy",
    "medicine",
    "project",
    "deadline",
    "review",
    "design",
    "prototype",
    "feedback",
    "release",
    "version",
    "bug",
    "patch",
    "password",
    "login",
    "email",
    "phone",
    "address",
    "birthday",
    "anniversary",
    "gift",
    "holiday",
    "weather",
    "python",
    "rust",
    "kotlin",
    "docker",
    "kubernetes",
    "terraform",
    "sensor",
    "battery",
    "firmware",
    "camera",
]
_AFFIXES = ("", "s", "ing", "ed", "er", "al", "ion", "ly")
_FILLER = [
    "the",
    "a",
    "to",
    "of",
    "and",
    "in",
    "is",
    "it",
    "for",
    "on",
    "with",
    "that",
    "this",
    "we",
    "you",
    "was",
    "be",
    "as",
    "at",
]
_TYPES = (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_RESULT)


class TextSource:
    """Sentences over a Zipf-weighted vocabulary (common head, rare long tail)."""

    def __init__(self, seed: int = 5) -> None:
        self.rng = random.Random(seed)
        vocab = [r + a for r in _ROOTS for a in _AFFIXES]
        self.rng.shuffle(vocab)
        self.vocab = vocab
        self.weights = [1.0 / (i + 1) for i in range(len(vocab))]

    def words(self, n: int) -> list[str]:
        return self.rng.choices(self.vocab, weights=self.weights, k=n)

    def sentence(self) -> str:
        n = self.rng.randint(6, 40)
        out = self.words(n)
        for _ in range(n // 3):
            out.insert(self.rng.randrange(len(out)), self.rng.choice(_FILLER))
        if self.rng.random() < 0.3:
            out.append(f"{self.rng.choice('ABCDEFGH')}-{self.rng.randint(1000, 99999)}")
        return " ".join(out)

    def query(self) -> str:
        return " ".join(self.words(self.rng.randint(2, 4)))


@dataclass
class Layout:
    """Who talks: each new user brings ``sessions`` sessions of ``per_session`` events."""

    sessions: int = 8
    per_session: int = 50

    @property
    def per_user(self) -> int:
        return self.sessions * self.per_session


def user_events(text: TextSource, user: int, layout: Layout, t0: float) -> list[Event]:
    """All events of one user, session by session, in causal chains."""
    out: list[Event] = []
    for s in range(layout.sessions):
        sid = f"u{user}-s{s}"
        prev: str | None = None
        for i in range(layout.per_session):
            eid = f"e{user}-{s}-{i}"
            out.append(
                Event(
                    id=eid,
                    session_id=sid,
                    type=_TYPES[i % 3],
                    content=text.sentence(),
                    parents=(prev,) if prev else (),
                    ts=t0 + user * 1000 + s * 100 + i,
                    meta={"user_id": f"user{user}", "agent_id": f"agent{user % 5}"},
                )
            )
            prev = eid
    return out


def rss_mb() -> float:
    """Resident memory now (Linux), else peak (other systems)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


@dataclass
class Grower:
    """Grows one weave's store user by user and measures it between steps."""

    weave: Weave
    layout: Layout
    vector_share: float
    db_path: Path | None
    queries: int = 30
    users: int = 0

    def __post_init__(self) -> None:
        self.text = TextSource()
        self.qtext = TextSource(seed=9)
        self.pick = random.Random(13)
        self.t0 = time.time() - 365 * 86400

    def grow_to(self, total: int, batch: int = 2_000) -> float:
        """Append users until ``total`` events are stored; returns events/s."""
        store, indexer = self.weave.store, self.weave.indexer
        pending: list[Event] = []
        n, spent = 0, 0.0
        while (self.users * self.layout.per_user) < total:
            pending += user_events(self.text, self.users, self.layout, self.t0)
            self.users += 1
            if len(pending) >= batch or self.users * self.layout.per_user >= total:
                t0 = time.perf_counter()
                store.append(pending)
                if indexer is not None and self.vector_share > 0:
                    step = max(1, round(1 / self.vector_share))
                    indexer.on_stored(pending[::step])
                spent += time.perf_counter() - t0
                n += len(pending)
                pending = []
        sync = getattr(store, "sync_text_index", None)
        t0 = time.perf_counter()
        if callable(sync):
            sync()  # what the writer's background thread does after a batch
        if indexer is not None:
            indexer.sync(600)
        spent += time.perf_counter() - t0
        return n / spent if spent else float("nan")

    def session(self) -> str:
        return f"u{self.pick.randrange(self.users)}-s{self.pick.randrange(self.layout.sessions)}"

    def scope(self, name: str) -> dict[str, str]:
        """Retrieve arguments for one call scoped to a random session, user or the tenant."""
        if name == "session":
            return {"session_id": self.session()}
        if name == "user":
            return {"user_id": f"user{self.pick.randrange(self.users)}"}
        return {}

    def retrieve(self, scope: str) -> Callable[[], object]:
        query, where = self.qtext.query(), self.scope(scope)
        return lambda: self.weave.retrieve(query, k=10, **where)

    def assemble(self) -> Callable[[], object]:
        sid, query = self.session(), self.qtext.query()
        return lambda: self.weave.assemble(sid, query, budget_tokens=2_000, record=False)

    def measure(self, total: int, rate: float, ref: Grower | None = None) -> dict[str, Any]:
        """One row; ``ref`` (the first step's store, kept as it was) is measured call
        for call between this store's calls, so a change in machine load shows in both."""
        from beeweave_bench.report import percentile

        row: dict[str, Any] = {"events": total, "ingest_ev_s": rate}
        for name in ("session", "user", "tenant"):
            lat, base = _paired(self, ref, self.queries, lambda g, n=name: g.retrieve(n))
            row[f"{name}_p50_ms"] = percentile(lat, 50)
            row[f"{name}_p95_ms"] = percentile(lat, 95)
            if base:
                row[f"{name}_ref_p50_ms"] = percentile(base, 50)
        row.update(self.assemble_row(ref))
        check = self.ranking_check()
        if check is not None:
            row["tenant_bm25_share"], row["tenant_top10_overlap"] = check
        if self.db_path is not None:
            size = sum(p.stat().st_size for p in self.db_path.parent.glob(self.db_path.name + "*"))
            row["bytes_per_event"] = size / total
        row["rss_mb"] = rss_mb()
        return row

    def assemble_row(self, ref: Grower | None) -> dict[str, float]:
        """Assembly of sampled sessions: the first call (the user's session stats and
        token counts not read yet) and the next one, as each turn of a conversation
        makes it (``assemble_p50_ms``; the reference's likewise)."""
        from beeweave_bench.report import percentile

        first, again, base = [], [], []
        for i in range(max(5, self.queries // 3)):
            call = self.assemble()
            ref_call = ref.assemble() if ref is not None and i % 2 else None
            if ref_call is not None:  # the reference first every other time
                ref_call()
                base += _timed(ref_call, 1)
            first += _timed(call, 1)
            again += _timed(call, 1)
            if ref is not None and not i % 2:
                ref_call = ref.assemble()
                ref_call()
                base += _timed(ref_call, 1)
        out = {
            "assemble_p50_ms": percentile(again, 50),
            "assemble_first_p50_ms": percentile(first, 50),
        }
        if base:
            out["assemble_ref_p50_ms"] = percentile(base, 50)
        return out

    def ranking_check(self, n: int = 20) -> tuple[float, float] | None:
        """SQLite: the tenant-wide top 10's share of the best attainable BM25 (the
        exhaustive ranking of the whole index, computed here only to compare) and
        its overlap with that top 10 (medians over ``n`` queries)."""
        from beeweave_bench.report import percentile
        from beeweave_core.backends.sqlite.events import SQLiteEventStore
        from beeweave_core.backends.sqlite.wide_search import ranking_share

        store = self.weave.store
        if not isinstance(store, SQLiteEventStore):
            return None
        checks = []
        for _ in range(n):
            query = self.qtext.query()
            ids = [ev.id for ev, _s in store.search_text(query, k=10)]
            shared = store.connection
            with shared.lock:  # maintenance's text-index catch-up shares the connection
                checks.append(ranking_share(shared.conn, store.tenant, query, ids, 10))
        checks = [c for c in checks if not math.isnan(c.share)]  # a query with no match
        return (
            percentile([c.share for c in checks], 50),
            percentile([c.overlap for c in checks], 50),
        )


def _paired(
    grower: Grower, ref: Grower | None, n: int, make: Callable[[Grower], Callable[[], object]]
) -> tuple[list[float], list[float]]:
    """``n`` timed calls on ``grower``, each beside one on ``ref`` (when given); who goes
    first alternates, so neither always finds the other's caches (stems, embeddings) warm."""
    mine: list[float] = []
    base: list[float] = []
    for i in range(n):
        pair = [(grower, mine), (ref, base)] if ref is not None else [(grower, mine)]
        for g, out in pair if i % 2 == 0 else pair[::-1]:
            out += _timed(make(g), 1)
    return mine, base


def print_row(row: dict[str, Any]) -> None:
    """One line per finished step (a 1M-event run takes a while)."""
    print(
        " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
        flush=True,
    )


def growth(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's last/first ratio (the row a reader checks first)."""
    first, last = rows[0], rows[-1]
    out: dict[str, Any] = {"events": f"x{last['events'] / first['events']:.0f}"}
    for key, v in first.items():
        if key != "events" and isinstance(v, float) and v:
            out[key] = last.get(key, float("nan")) / v
    for name in ("session", "user", "tenant", "assemble"):
        mine, ref = f"{name}_p50_ms", f"{name}_ref_p50_ms"
        if all(r.get(k) for r in (first, last) for k in (mine, ref)):
            # growth of (this store / the reference measured beside it): load-adjusted
            out[f"{name}_p50_adjusted"] = (last[mine] / last[ref]) / (first[mine] / first[ref])
    return out


@dataclass
class ScaleRun:
    backend: str = "sqlite"
    max_events: int = 300_000
    vector_share: float = 0.005
    queries: int = 30
    url: str | None = None
    auth: Any = None


def steps_for(max_events: int) -> list[int]:
    steps = [s for s in STEPS if s <= max_events]
    return steps if steps and steps[-1] == max_events else [*steps, max_events]


def _open(run: ScaleRun, tmp: str) -> tuple[Weave, Path | None]:
    tenant = f"scale-{int(time.time() * 1000)}-{Path(tmp).name}"  # two stores a run
    index: Any = None if run.vector_share > 0 else False
    # only the sampled share is embedded: no gap check that would embed the rest
    opts: dict[str, Any] = {"spool_dir": tmp, "index": index, "index_options": {"backfill": False}}
    if run.backend == "sqlite":
        path = Path(tmp) / "scale.db"
        url = run.url or f"sqlite:///{path}"
        return Weave.open(url, tenant=tenant, **opts), path
    if run.backend == "neo4j":
        url = run.url or os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687")
        return Weave.open(url, tenant=tenant, auth=run.auth, **opts), None
    raise ValueError(f"unknown backend {run.backend!r} (sqlite, neo4j)")


@dataclass
class _Cleanup:
    weave: Weave
    backend: str

    def __call__(self) -> None:
        if self.backend == "neo4j":
            from beeweave_bench.ingest import purge_bench_data

            purge_bench_data(self.weave.store)
        self.weave.close()


def run(cfg: ScaleRun, on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict]:
    """One row per step, then the growth-ratio row."""
    rows: list[dict[str, Any]] = []
    steps = steps_for(cfg.max_events)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp_ref:
        weave, path = _open(cfg, tmp)
        base, base_path = _open(cfg, tmp_ref)
        done = [_Cleanup(weave, cfg.backend), _Cleanup(base, cfg.backend)]
        try:
            grower = Grower(weave, Layout(), cfg.vector_share, path, queries=cfg.queries)
            # the first step's store again, grown the same way and kept at that size
            ref = Grower(base, Layout(), cfg.vector_share, base_path, queries=cfg.queries)
            ref.grow_to(steps[0])
            for total in steps:
                rate = grower.grow_to(total)
                row = {"backend": cfg.backend, **grower.measure(total, rate, ref)}
                rows.append(row)
                if on_row is not None:
                    on_row(row)
        finally:
            for close in done:
                close()
    if len(rows) > 1:
        rows.append({"backend": "growth last/first", **growth(rows)})
    return rows
