"""Checkpointer latency: BeeWeave's saver beside LangGraph's own savers, in one run.

Every saver gets the same workload through LangGraph's async API (what
``graph.ainvoke`` uses): a thread of ``steps`` checkpoints whose ``messages`` channel
grows by one message per step (as in a chat agent), each followed by ``put_writes`` of
one task, by turns as a graph step sends it (the node's update and the trigger of the
edge it takes: what ``StateGraph`` writes for every node but the last) and as a last
node does (the update alone); then ``get_tuple`` of the latest and of random older
checkpoints, and ``list(limit=10)``.
An untimed pass of every saver warms the server first; rounds then vary the savers'
order (each saver in every place, after every other) so a noisy neighbour or one
saver's after-effects hurt them all alike.  Each call's
process CPU time is kept beside its wall time: on a shared machine the wall ratios of
two runs can differ by half, the CPU ones hardly move (CPU counts every thread of the
process, so a saver's background work is charged to it).  LangGraph is imported lazily:
``beeweave_core`` itself does not depend on it.
"""

from __future__ import annotations

import asyncio
import gc
import random
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from beeweave_bench.report import median, percentile

OPS = (
    "put",
    "get_tuple latest",
    "get_tuple by id",
    "list limit=10",
    "put_writes",
    "put_writes 1 write",
)
BASELINE = "AsyncSqliteSaver"
OURS = "BeeWeave sqlite"
TARGET_RATIO = 1.2
NEO4J_OURS = "BeeWeave neo4j"
NEO4J_BASELINE = "Neo4jSaver (langchain-neo4j)"
#: Neo4j: BeeWeave at least as fast as Neo4jSaver on these (it is far ahead on the rest).
NEO4J_TARGET_OPS = ("list limit=10", "put_writes", "put_writes 1 write")

SaverFactory = Callable[[], AbstractAsyncContextManager[Any]]
#: Per operation, one (wall µs, process CPU µs) pair per call.
Samples = dict[str, list[tuple[float, float]]]


class _Timer:
    """Wall and process CPU time of each call, per operation."""

    def __init__(self) -> None:
        self.samples: Samples = {op: [] for op in OPS}

    @contextmanager
    def __call__(self, op: str) -> Iterator[None]:
        cpu, wall = time.process_time_ns(), time.perf_counter_ns()
        yield
        done = ((time.perf_counter_ns() - wall) / 1000, (time.process_time_ns() - cpu) / 1000)
        self.samples[op].append(done)


def _message(i: int) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage

    text = f"step {i}: order ORD-{10_000 + i} costs {12.5 + i:.2f} EUR; " + "details " * 20
    return (HumanMessage if i % 2 == 0 else AIMessage)(content=text, id=f"m-{i}")


async def _workload(saver: Any, thread_id: str, steps: int, reads: int) -> Samples:
    """One thread through one saver; (wall, CPU) µs per call of each operation."""
    from langgraph.checkpoint.base import empty_checkpoint

    timed = _Timer()
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    versions: dict[str, Any] = {}
    messages: list[Any] = []
    ids: list[dict[str, Any]] = []
    for i in range(steps):
        messages = [*messages, _message(i)]
        new = {ch: saver.get_next_version(versions.get(ch), None) for ch in ("messages", "step")}
        versions.update(new)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": messages, "step": i}
        cp["channel_versions"] = dict(versions)
        cp["versions_seen"] = {"agent": dict(versions)}
        meta = {"source": "loop", "step": i, "parents": {}, "run_id": f"run-{thread_id}"}
        with timed("put"):
            config = await saver.aput(config, cp, meta, new)
        ids.append(config)
        # a graph step's task writes its update and its edge's trigger, a last node
        # its update alone: every other step each (a checkpoint has one task's writes)
        writes = [("messages", [_message(i + 1)]), ("branch:to:tools", None)][: 1 + i % 2]
        with timed("put_writes" if i % 2 else "put_writes 1 write"):
            await saver.aput_writes(config, writes, f"task-{i}", "~__pregel_pull, agent")
    latest = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    rng = random.Random(7)
    for _ in range(reads):
        with timed("get_tuple latest"):
            tup = await saver.aget_tuple(latest)
        assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == steps
        with timed("get_tuple by id"):
            tup = await saver.aget_tuple(rng.choice(ids))
        assert tup is not None
    for _ in range(max(1, reads // 4)):
        with timed("list limit=10"):
            got = [t async for t in saver.alist(latest, limit=10)]
        assert len(got) == min(10, steps)
    return timed.samples


def _savers(tmp: Path, neo4j_uri: str | None, auth: Any, tenant: str) -> dict[str, SaverFactory]:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from beeweave_langchain.checkpoint import AsyncBeeWeaveCheckpointer

    @asynccontextmanager
    async def memory() -> AsyncIterator[Any]:
        yield InMemorySaver()

    @asynccontextmanager
    async def async_sqlite() -> AsyncIterator[Any]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp / "langgraph.sqlite")) as s:
            await s.setup()
            yield s

    def beeweave(url: str, *, index: bool = False, **kw: Any) -> SaverFactory:
        options: dict[str, Any] = {"spool_dir": tmp / "spool"}
        if not index:
            options["index"] = False

        @asynccontextmanager
        async def factory() -> AsyncIterator[Any]:
            async with AsyncBeeWeaveCheckpointer.from_conn_string(
                url, tenant=tenant, auth=auth, weave_options=options, **kw
            ) as s:
                yield s

        return factory

    savers: dict[str, SaverFactory] = {
        "InMemorySaver": memory,
        BASELINE: async_sqlite,
        # the checkpointer + the messages woven into the event graph (the target row)
        OURS: beeweave(str(tmp / "beeweave.db")),
        "BeeWeave sqlite, checkpoints only": beeweave(
            str(tmp / "beeweave-plain.db"), record_messages=False
        ),
        # + the weave's background vector indexer embedding every message (MiniLM on
        # this machine's CPU, competing with the graph for cores): the full default
        "BeeWeave sqlite + vector indexing": beeweave(str(tmp / "beeweave-full.db"), index=True),
    }
    if neo4j_uri:
        savers["BeeWeave neo4j"] = beeweave(neo4j_uri)
        # what the recording of messages (a background append beside each call) costs
        savers["BeeWeave neo4j, checkpoints only"] = beeweave(neo4j_uri, record_messages=False)
        savers["Neo4jSaver (langchain-neo4j)"] = _neo4j_saver(neo4j_uri, auth)
    return savers


def _neo4j_saver(uri: str, auth: Any) -> SaverFactory:
    @asynccontextmanager
    async def factory() -> AsyncIterator[Any]:
        import neo4j
        from langchain_neo4j.checkpoint.aio import AsyncNeo4jSaver

        driver = neo4j.AsyncGraphDatabase.driver(uri, auth=auth)
        saver = AsyncNeo4jSaver(driver)
        try:
            await saver.setup()
            yield saver
        finally:
            await driver.close()

    return factory


async def _cleanup(saver: Any, threads: list[str]) -> None:
    for tid in threads:
        await saver.adelete_thread(tid)
    purge = getattr(getattr(saver, "store", None), "purge_tenant", None)
    if callable(purge):
        await asyncio.to_thread(purge)


def balanced_order(n: int, r: int) -> list[int]:
    """Round ``r``'s order of ``n`` savers, a Williams design: over ``n`` rounds (``2n``
    when ``n`` is odd) each saver runs once in every place and right after every other
    saver equally often.  A rotation of one fixed order puts the same saver before each
    one in almost every round, so whatever a saver leaves behind (its purge, the
    server's collector or checkpoint it made due) always lands in the same neighbour's
    calls; balanced, every saver shares those after-effects alike."""
    first, low, high = [0], 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    row = [(i + r) % n for i in first]
    return row[::-1] if n % 2 and (r // n) % 2 else row


async def _pass(factory: SaverFactory, name: str, tid: str, steps: int, reads: int) -> Samples:
    """One saver through one workload, from a collected heap, its thread deleted after."""
    async with factory() as saver:
        # a full pass of the collector is due every so many surviving objects: collect
        # here, untimed, so the pass that the savers before (InMemorySaver keeps every
        # checkpoint) or this one's opening made due does not land in this saver's
        # calls (~70 ms: 0.1 ms per call)
        gc.collect()
        try:
            return await _workload(saver, tid, steps, reads)
        finally:
            if "neo4j" in name.lower():
                await _cleanup(saver, [tid])


async def _run(
    steps: int, rounds: int | None, reads: int, neo4j_uri: str | None, auth: Any
) -> list[dict[str, Samples]]:
    """Per round, each saver's samples.  First an untimed pass of every saver: a
    fresh server compiles its plans and its JIT warms on the first statements it
    sees, which put a 2-4x slower round on whichever Neo4j saver ran first.
    ``rounds`` None: one per saver (two if their number is odd), so each saver runs
    once in every place and after every other saver (:func:`balanced_order`)."""
    per_round: list[dict[str, Samples]] = []
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as d:
        factories = _savers(Path(d), neo4j_uri, auth, tenant)
        names = list(factories)
        for name in names:
            await _pass(factories[name], name, f"warm-{uuid.uuid4().hex[:6]}", steps, reads)
        n = len(names)
        for r in range(rounds or n * (1 + n % 2)):
            got: dict[str, Samples] = {}
            for i in balanced_order(n, r):
                tid = f"bench-{r}-{uuid.uuid4().hex[:6]}"
                got[names[i]] = await _pass(factories[names[i]], names[i], tid, steps, reads)
            per_round.append(got)
    return per_round


def _ratios(rows: list[dict[str, Any]], ours: str, base: str, key: str) -> dict[str, float]:
    by = {(r["system"], r["case"]): r[key] for r in rows}
    return {op: round(by[(ours, op)] / by[(base, op)], 3) for op in OPS if (base, op) in by}


def _round_ranges(
    per_round: list[dict[str, Samples]], ours: str, base: str
) -> dict[str, list[float]]:
    """Per operation, the lowest and highest of the rounds' own median ratios: how far
    one round's figure strays from the pooled one (the noise of a short run)."""
    ranges: dict[str, list[float]] = {}
    for op in OPS:
        ratios = [
            median([w for w, _ in got[ours][op]]) / median([w for w, _ in got[base][op]])
            for got in per_round
            if ours in got and base in got and got[ours][op] and got[base][op]
        ]
        if ratios:
            ranges[op] = [round(min(ratios), 3), round(max(ratios), 3)]
    return ranges


def _summary(rows: list[dict[str, Any]], per_round: list[dict[str, Samples]]) -> dict[str, Any]:
    ours = _ratios(rows, OURS, BASELINE, "median_us")
    core = ("put", "get_tuple latest", "get_tuple by id", "list limit=10")
    summary: dict[str, Any] = {
        "beeweave_sqlite_x_async_sqlite": ours,
        "beeweave_sqlite_cpu_x_async_sqlite": _ratios(rows, OURS, BASELINE, "cpu_median_us"),
        "beeweave_sqlite_x_async_sqlite_round_range": _round_ranges(per_round, OURS, BASELINE),
        "target_x": TARGET_RATIO,
        "meets_target": all(ours[op] <= TARGET_RATIO for op in core),
    }
    if any(r["system"] == NEO4J_BASELINE for r in rows):
        neo = _ratios(rows, NEO4J_OURS, NEO4J_BASELINE, "median_us")
        summary |= {
            "beeweave_neo4j_x_neo4jsaver": neo,
            "beeweave_neo4j_cpu_x_neo4jsaver": _ratios(
                rows, NEO4J_OURS, NEO4J_BASELINE, "cpu_median_us"
            ),
            "beeweave_neo4j_x_neo4jsaver_round_range": _round_ranges(
                per_round, NEO4J_OURS, NEO4J_BASELINE
            ),
            "neo4j_meets_target": all(neo[op] <= 1.0 for op in NEO4J_TARGET_OPS),
        }
    return summary


def run(
    *,
    steps: int = 200,
    rounds: int | None = None,
    reads: int = 200,
    neo4j_uri: str | None = None,
    auth: Any = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows (saver × operation: wall median/p95/mean µs, CPU median µs, ratio to
    AsyncSqliteSaver) + summary (the ratios the targets are read on)."""
    per_round = asyncio.run(_run(steps, rounds, reads, neo4j_uri, auth))
    samples: dict[str, Samples] = {}
    for got in per_round:
        for name, ops in got.items():
            for op, values in ops.items():
                samples.setdefault(name, {}).setdefault(op, []).extend(values)
    base = {op: median([w for w, _ in samples[BASELINE][op]]) for op in OPS}
    rows = []
    for name, ops in samples.items():
        for op in OPS:
            wall = [w for w, _ in ops[op]]
            rows.append(
                {
                    "system": name,
                    "case": op,
                    "n": len(wall),
                    "median_us": median(wall),
                    "p95_us": percentile(wall, 95),
                    "mean_us": sum(wall) / len(wall),
                    "cpu_median_us": median([c for _, c in ops[op]]),
                    "x_async_sqlite": median(wall) / base[op],
                }
            )
    return rows, _summary(rows, per_round)
