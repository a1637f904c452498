"""LangGraph checkpoints in the embedded SQLite file, beside the event graph.

One file holds a thread's events *and* its checkpoints, so an agent resumes from
the same ``beeweave.db`` it remembers from.  The store has its own connection (WAL:
the event bus writing and a graph step checkpointing never block each other's
reads), one transaction per ``put``, and each channel value stored once per version.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from beeweave_core.backends.sqlite import checkpoints_sql as q
from beeweave_core.backends.sqlite.db import IN_SCOPES, SideTables, marks
from beeweave_core.checkpoints import (
    BranchInfo,
    BranchOps,
    CheckpointRow,
    PruneLimits,
    Skeleton,
    Typed,
    WriteRow,
    canonical,
    check_filter,
    fork_in,
    implicit_main,
    paged,
    prunable,
    prune_threads,
)
from beeweave_core.scopes import Readable


def _json_path(key: str) -> str:
    return "$" + "".join(f'."{part}"' for part in key.split("."))


def _filter_value(value: Any) -> Any:
    """What ``json_extract`` returns for a stored value equal to ``value``."""
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, (str, int, float)):
        return value
    return canonical(value)


class _ForkTx:
    """:class:`~beeweave_core.checkpoints.ForkTx` on one SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection, scope: tuple[str, str, str]) -> None:
        self.conn, self.scope = conn, scope  # (tenant, thread_id, checkpoint_ns)

    def exists(self, checkpoint_id: str) -> bool:
        return (
            self.conn.execute(q.CHECKPOINT_EXISTS, (*self.scope, checkpoint_id)).fetchone()
            is not None
        )

    def branch_names(self) -> set[str]:
        return {r[0] for r in self.conn.execute(q.LIST_BRANCHES, self.scope)}

    def latest(self) -> tuple[str | None, float | None]:
        latest, first_ts = self.conn.execute(q.LATEST_ID, self.scope).fetchone()
        return latest, first_ts

    def create(
        self, name: str, head: str | None, fork_point: str | None, created_at: float | None
    ) -> None:
        self.conn.execute(q.INSERT_BRANCH, (*self.scope, name, head, fork_point, 0, created_at))

    def activate(self, name: str) -> None:
        self.conn.execute(q.SET_ACTIVE_BRANCH, (name, *self.scope))


class SQLiteCheckpointStore(SideTables, BranchOps):
    """Checkpoints, blobs, pending writes and branches in a SQLite file.

    ``path`` is usually the event store's file.  ``connection`` (the backend's) lets
    an in-memory event store and its checkpoints share one ``:memory:`` database.
    """

    sql = q

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **kw: Any) -> Iterator[SQLiteCheckpointStore]:
        store = cls(conn_string, **kw)
        try:
            yield store
        finally:
            store.close()

    # --------------------------------------------------------------- writes
    def put(self, row: CheckpointRow, blobs: Mapping[tuple[str, str], Typed | None]) -> None:
        """Store a checkpoint and the blobs of the channel versions it made new."""
        t, tid, ns = self.tenant, row.thread_id, row.checkpoint_ns
        mtype, mblob = row.metadata_exact or (None, None)
        run_id = row.metadata.get("run_id")
        blob_rows = [
            (t, tid, ns, ch, ver, *(typed if typed is not None else ("empty", None)))
            for (ch, ver), typed in blobs.items()
        ]
        with self._tx() as c:
            c.execute(
                q.UPSERT_CHECKPOINT,
                (
                    t,
                    tid,
                    ns,
                    row.checkpoint_id,
                    row.parent_checkpoint_id,
                    *row.checkpoint,
                    canonical(row.metadata),
                    mtype,
                    mblob,
                    json.dumps(row.channel_versions),
                    run_id if isinstance(run_id, str) else None,
                    time.time(),
                    row.scope,
                ),
            )
            if blob_rows:
                c.executemany(q.UPSERT_BLOB, blob_rows)
            c.execute(q.ADVANCE_ACTIVE_BRANCH, (row.checkpoint_id, t, tid, ns))

    def put_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        """Regular writes are stored once per (task, idx); special ones (idx < 0) replace."""
        t = self.tenant
        rows = [
            (
                t,
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                w.task_id,
                w.idx,
                w.task_path,
                w.channel,
                *w.value,
            )
            for w in writes
        ]
        regular = [r for r in rows if r[5] >= 0]
        special = [r for r in rows if r[5] < 0]
        with self._tx() as c:
            if regular:
                c.executemany(q.INSERT_WRITE, regular)
            if special:
                c.executemany(q.REPLACE_WRITE, special)

    # ---------------------------------------------------------------- reads
    def _row(self, rec: Sequence[Any]) -> CheckpointRow:
        tid, ns, cid, parent, ctype, body, meta, mtype, mblob, versions, scope = rec
        values: dict[str, Typed] = {}
        writes: list[tuple[str, int, WriteRow]] = []
        for kind, channel, typ, data, task_id, task_path, idx in self._read(
            q.GET_VALUES_AND_WRITES, (self.tenant, tid, ns, cid, versions)
        ):
            if kind == 0:
                if typ != "empty":
                    values[channel] = (typ, data)
            else:
                writes.append(
                    (task_path, idx, WriteRow(task_id, task_path, idx, channel, (typ, data)))
                )
        writes.sort(key=lambda w: (w[0], w[2].task_id, w[1]))
        return CheckpointRow(
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=cid,
            parent_checkpoint_id=parent,
            checkpoint=(ctype, body),
            metadata=json.loads(meta),
            channel_versions=json.loads(versions),
            values=values,
            writes=[w[2] for w in writes],
            metadata_exact=(mtype, mblob) if mtype is not None else None,
            scope=scope,
        )

    def get(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> CheckpointRow | None:
        """One checkpoint, or the thread's current one (active branch head, else newest)."""
        if checkpoint_id:
            recs = self._read(
                q.GET_CHECKPOINT, (self.tenant, thread_id, checkpoint_ns, checkpoint_id)
            )
        else:
            recs = self._read(q.GET_LATEST_CHECKPOINT, (self.tenant, thread_id, checkpoint_ns))
        return self._row(recs[0]) if recs else None

    def list(
        self,
        *,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
        readable: Readable = None,
    ) -> Iterator[CheckpointRow]:
        """Checkpoints newest first, fetched a page at a time (no lock held while yielding)."""
        sql, params = q.LIST_HEAD, [self.tenant]
        for fragment, value in (
            (q.LIST_THREAD, thread_id),
            (q.LIST_NS, checkpoint_ns),
            (q.LIST_ID, checkpoint_id),
            (q.LIST_BEFORE, before),
        ):
            if value is not None:
                sql += fragment
                params.append(value)
        for key, value in check_filter(filter).items():
            if value is None:
                sql += q.LIST_META_NULL
                params.append(_json_path(key))
            else:
                sql += q.LIST_META_EQ
                params += [_json_path(key), _filter_value(value)]
        if readable is not None:
            sql += IN_SCOPES.format(scopes=marks(len(readable)))
            params += sorted(readable)

        def fetch(page: int, after: CheckpointRow | None) -> list[CheckpointRow]:
            page_sql, page_params = sql, list(params)
            if after is not None:
                page_sql += q.LIST_AFTER
                page_params += [after.checkpoint_id, after.thread_id, after.checkpoint_ns]
            return [self._row(r) for r in self._read(page_sql + q.LIST_ORDER, (*page_params, page))]

        return paged(fetch, limit)

    def thread_scope(self, thread_id: str) -> str | None:
        rows = self._read(q.THREAD_SCOPE, (self.tenant, thread_id))
        return rows[0][0] if rows else None

    # --------------------------------------------------------- housekeeping
    def delete_thread(self, thread_id: str) -> None:
        with self._tx() as c:
            for sql in q.DELETE_THREAD:
                c.execute(sql, (self.tenant, thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop the checkpoints (and their writes) that the given runs created."""
        run_ids = [str(r) for r in run_ids]
        if not run_ids:
            return
        t, m = self.tenant, marks(len(run_ids))
        with self._tx() as c:
            threads = [r[0] for r in c.execute(q.THREADS_OF_RUNS.format(ids=m), (t, *run_ids))]
            c.execute(q.DELETE_WRITES_OF_RUNS.format(ids=m), (t, t, *run_ids))
            c.execute(q.DELETE_CHECKPOINTS_OF_RUNS.format(ids=m), (t, *run_ids))
            for tid in threads:
                c.execute(q.DELETE_ORPHAN_BLOBS, (t, tid))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, blob, write and branch (the whole parent chain)."""
        with self._tx() as c:
            for sql in q.COPY_THREAD:
                c.execute(sql, (target_thread_id, self.tenant, source_thread_id))

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        limits: PruneLimits | None = None,
    ) -> None:
        """``keep_latest``: newest per namespace (``limits``: newest N, none older than an
        age) plus DeltaChannel seeds; ``delete``: all."""
        lim = limits or PruneLimits()
        prune_threads(
            thread_ids,
            strategy,
            delete_thread=self.delete_thread,
            keep_latest=lambda tid: self._keep_latest(tid, lim),
        )

    def _keep_latest(self, thread_id: str, limits: PruneLimits) -> None:
        t = self.tenant
        with self._tx() as c:
            stored = {(ns, ch, v) for ns, ch, v in c.execute(q.STORED_BLOBS, (t, thread_id))}
            skeleton = []
            for ns, cid, parent, counters, versions, created in c.execute(
                q.PRUNE_SKELETON, (t, thread_id)
            ):
                cv = json.loads(versions)
                skeleton.append(
                    Skeleton(
                        checkpoint_ns=ns,
                        checkpoint_id=cid,
                        parent_checkpoint_id=parent,
                        delta_channels=tuple(json.loads(counters)) if counters else (),
                        stored_channels=frozenset(
                            ch for ch, v in cv.items() if (ns, ch, v) in stored
                        ),
                        created_at=created,
                    )
                )
            gone = prunable(skeleton, limits.keep_last, limits.cutoff)
            drop = [(t, thread_id, s.checkpoint_ns, s.checkpoint_id) for s in gone]
            if drop:
                c.executemany(q.DELETE_WRITES_OF_CHECKPOINT, drop)
                c.executemany(q.DELETE_CHECKPOINT, drop)
                c.execute(q.DELETE_ORPHAN_BLOBS, (t, thread_id))

    # ------------------------------------------------------------- branches
    def list_branches(self, thread_id: str, checkpoint_ns: str = "") -> list[BranchInfo]:
        """Named branches; a thread never forked has one implicit ``main`` branch."""
        rows = self._read(q.LIST_BRANCHES, (self.tenant, thread_id, checkpoint_ns))
        if rows:
            return [BranchInfo(n, h, f, bool(a), ts) for n, h, f, a, ts in rows]
        return implicit_main(*self._read(q.LATEST_ID, (self.tenant, thread_id, checkpoint_ns))[0])

    def fork(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, name: str) -> BranchInfo:
        """Start branch ``name`` at ``checkpoint_id`` and make it the active one."""
        with self._tx() as c:
            return fork_in(
                _ForkTx(c, (self.tenant, thread_id, checkpoint_ns)), thread_id, checkpoint_id, name
            )

    def _set_active_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None:
        with self._tx() as c:
            c.execute(q.SET_ACTIVE_BRANCH, (name, self.tenant, thread_id, checkpoint_ns))

    def _delete_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None:
        with self._tx() as c:
            c.execute(q.DELETE_BRANCH, (self.tenant, thread_id, checkpoint_ns, name))

    def _tree_rows(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str | None]]:
        return [(r[0], r[1]) for r in self._read(q.TREE, (self.tenant, thread_id, checkpoint_ns))]
