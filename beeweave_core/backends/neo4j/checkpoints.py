"""LangGraph checkpoints as nodes in Neo4j, beside the event graph.

Does what ``langchain-neo4j``'s ``Neo4jSaver`` does — checkpoints chained by
``PREVIOUS``, channel values stored once per version, pending writes, named branches
with an active head — and what it leaves out: metadata filters in ``list``, full
tuples (values and writes) from ``list``, ``delete_for_runs``, ``copy_thread``,
``prune``, and tenant scoping on every node and query.  Each call is one managed
transaction (``session.execute_write``: retried on transient errors, bookmarked so a
read sees the write before it).  The driver is shared with the Neo4j event store
when there is one; the store then does not close it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from beeweave_core.backends.neo4j import checkpoints_cypher as q
from beeweave_core.backends.neo4j import tx as neo4j_tx
from beeweave_core.backends.neo4j.auth import AuthSpec, driver_auth
from beeweave_core.checkpoints import (
    KEY_SEP,
    BranchInfo,
    BranchOps,
    CheckpointRow,
    PruneLimits,
    Skeleton,
    Typed,
    WriteRow,
    blob_key,
    canonical,
    delta_channels,
    filter_pairs,
    fork_in,
    implicit_main,
    metadata_pairs,
    paged,
    prunable,
    prune_threads,
)
from beeweave_core.scopes import Readable


def _bytes(value: Any) -> bytes | None:
    return bytes(value) if value is not None else None


# The parameters below are shared by the sync store and its async twin
# (checkpoints_async.py, writes only): the two differ only in how a statement is sent.
def put_params(row: CheckpointRow, blobs: Mapping[tuple[str, str], Typed | None]) -> dict[str, Any]:
    """``CYPHER_PUT_CHECKPOINT``'s parameters: the checkpoint, its new blobs, its keys."""
    mtype, mblob = row.metadata_exact or (None, None)
    run_id = row.metadata.get("run_id")
    return {
        "thread_id": row.thread_id,
        "checkpoint_ns": row.checkpoint_ns,
        "checkpoint_id": row.checkpoint_id,
        "parent_checkpoint_id": row.parent_checkpoint_id,
        "type": row.checkpoint[0],
        "checkpoint": row.checkpoint[1],
        "metadata": canonical(row.metadata),
        "md_pairs": metadata_pairs(row.metadata),
        "metadata_type": mtype,
        "metadata_blob": mblob,
        "channel_versions": json.dumps(row.channel_versions),
        "cv_keys": [blob_key(ch, v) for ch, v in row.channel_versions.items()],
        "run_id": run_id if isinstance(run_id, str) else None,
        "created_at": time.time(),
        "scope": row.scope,
        "blobs": [
            {
                "key": blob_key(ch, ver),
                "channel": ch,
                "version": ver,
                "type": typed[0] if typed is not None else "empty",
                "blob": typed[1] if typed is not None else None,
            }
            for (ch, ver), typed in blobs.items()
        ],
    }


def writes_params(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
) -> dict[str, Any]:
    """``CYPHER_CREATE_WRITES``' (and ``CYPHER_PUT_WRITES``') parameters."""
    return {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "writes": [
            {
                "task_id": w.task_id,
                "idx": w.idx,
                "task_path": w.task_path,
                "channel": w.channel,
                "type": w.value[0],
                "value": w.value[1],
            }
            for w in writes
        ],
    }


def create_writes(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
) -> tuple[str, dict[str, Any]]:
    """The statement that stores ``writes`` as new nodes, with its parameters."""
    params = writes_params(thread_id, checkpoint_ns, checkpoint_id, writes)
    if len(writes) != 1:
        return q.CYPHER_CREATE_WRITES, params
    (one,) = params.pop("writes")
    return q.CYPHER_CREATE_WRITE, {**params, **one}


class _ForkTx:
    """:class:`~beeweave_core.checkpoints.ForkTx` on one managed Neo4j transaction."""

    def __init__(self, tx: Any, params: dict[str, str]) -> None:
        self.tx, self.params = tx, params  # tenant, thread_id, checkpoint_ns

    def exists(self, checkpoint_id: str) -> bool:
        found = self.tx.run(q.CYPHER_CHECKPOINT_EXISTS, checkpoint_id=checkpoint_id, **self.params)
        return bool(found.single()["found"])

    def branch_names(self) -> set[str]:
        return {r["name"] for r in self.tx.run(q.CYPHER_LIST_BRANCHES, **self.params)}

    def latest(self) -> tuple[str | None, float | None]:
        rec = self.tx.run(q.CYPHER_LATEST_ID, **self.params).single()
        return rec["latest"], rec["first_ts"]

    def create(
        self, name: str, head: str | None, fork_point: str | None, created_at: float | None
    ) -> None:
        self.tx.run(
            q.CYPHER_CREATE_BRANCH,
            name=name,
            head=head,
            fork_point=fork_point,
            created_at=created_at,
            **self.params,
        ).consume()

    def activate(self, name: str) -> None:
        self.tx.run(q.CYPHER_SET_ACTIVE_BRANCH, name=name, **self.params).consume()


class Neo4jCheckpointStore(neo4j_tx.TenantNodes, BranchOps):
    """Checkpoints, blobs, pending writes and branches as tenant-scoped Neo4j nodes."""

    schema = q.SCHEMA_STATEMENTS
    purge = q.CYPHER_PURGE_TENANT

    @classmethod
    def from_uri(
        cls,
        uri: str,
        *,
        auth: AuthSpec = None,
        database: str | None = None,
        tenant: str = "default",
    ) -> Neo4jCheckpointStore:
        """A store with its own driver (closed by :meth:`close`)."""
        import neo4j

        driver = neo4j.GraphDatabase.driver(uri, auth=driver_auth(auth))
        try:
            return cls(driver, tenant=tenant, database=database, owns_driver=True)
        except BaseException:
            driver.close()
            raise

    def _session(self, *, read: bool = False) -> Any:
        return neo4j_tx.session(self.driver, self.database, read=read)

    # --------------------------------------------------------------- writes
    def put(self, row: CheckpointRow, blobs: Mapping[tuple[str, str], Typed | None]) -> None:
        self._run(q.CYPHER_PUT_CHECKPOINT, **put_params(row, blobs))

    def put_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        import neo4j.exceptions as nx

        if not writes:
            return
        query, params = create_writes(thread_id, checkpoint_ns, checkpoint_id, writes)
        try:
            self._run(query, **params)
        except nx.ConstraintError:  # the task ran before: keep or replace, write by write
            self._run(
                q.CYPHER_PUT_WRITES,
                **writes_params(thread_id, checkpoint_ns, checkpoint_id, writes),
            )

    # ---------------------------------------------------------------- reads
    @staticmethod
    def _row(rec: Mapping[str, Any]) -> CheckpointRow:
        writes = sorted(
            (
                WriteRow(
                    w["task_id"],
                    w["task_path"] or "",
                    w["idx"],
                    w["channel"],
                    (w["type"], _bytes(w["value"])),
                )
                for w in rec["writes"]
            ),
            key=lambda w: (w.task_path, w.task_id, w.idx),
        )
        mtype = rec.get("metadata_type")
        return CheckpointRow(
            thread_id=rec["thread_id"],
            checkpoint_ns=rec["checkpoint_ns"],
            checkpoint_id=rec["checkpoint_id"],
            parent_checkpoint_id=rec.get("parent_checkpoint_id"),
            checkpoint=(rec["type"], _bytes(rec["checkpoint"])),
            metadata=json.loads(rec["metadata"]),
            channel_versions=json.loads(rec["channel_versions"]),
            values={v["channel"]: (v["type"], _bytes(v["blob"])) for v in rec["values"]},
            writes=writes,
            metadata_exact=(mtype, _bytes(rec.get("metadata_blob"))) if mtype else None,
            scope=rec.get("scope"),
        )

    def get(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> CheckpointRow | None:
        params = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        if checkpoint_id:
            recs = self._run(
                q.CYPHER_GET_CHECKPOINT, read=True, checkpoint_id=checkpoint_id, **params
            )
        else:
            recs = self._run(q.CYPHER_GET_LATEST_CHECKPOINT, read=True, **params)
        return self._row(recs[0]["row"]) if recs else None

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
        """Newest first, a page per round trip; scope and metadata filters run inside Neo4j."""
        must, null_keys = filter_pairs(filter or {})
        scopes = sorted(readable) if readable is not None else None
        if thread_id is not None and checkpoint_ns is not None and checkpoint_id is None:
            return self._list_namespace(
                thread_id, checkpoint_ns, before, (must, null_keys, scopes), limit
            )
        query = q.CYPHER_LIST_THREAD if thread_id is not None else q.CYPHER_LIST_ALL
        params: dict[str, Any] = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
            "before": before,
            "must": must,
            "null_keys": null_keys,
            "readable": scopes,
            "after_id": None,
            "after_thread": None,
            "after_ns": None,
        }

        def fetch(page: int, after: CheckpointRow | None) -> list[CheckpointRow]:
            if after is not None:
                params.update(
                    after_id=after.checkpoint_id,
                    after_thread=after.thread_id,
                    after_ns=after.checkpoint_ns,
                )
            return [self._row(r["row"]) for r in self._run(query, read=True, limit=page, **params)]

        return paged(fetch, limit)

    def _list_namespace(
        self,
        thread_id: str,
        checkpoint_ns: str,
        before: str | None,
        filters: tuple[list[str], list[str], list[str] | None],
        limit: int | None,
    ) -> Iterator[CheckpointRow]:
        """One thread and namespace: pages read in index order, each below the last."""
        must, null_keys, scopes = filters
        params = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "must": must,
            "null_keys": null_keys,
            "readable": scopes,
        }

        def fetch(page: int, after: CheckpointRow | None) -> list[CheckpointRow]:
            below = after.checkpoint_id if after is not None else before  # after < before
            query = q.CYPHER_LIST_NAMESPACE if below is None else q.CYPHER_LIST_NAMESPACE_BELOW
            recs = self._run(query, read=True, limit=page, below=below, **params)
            return [self._row(r["row"]) for r in recs]

        return paged(fetch, limit)

    def thread_scope(self, thread_id: str) -> str | None:
        return self._run(q.CYPHER_THREAD_SCOPE, read=True, thread_id=thread_id)[0]["scope"]

    # --------------------------------------------------------- housekeeping
    def delete_thread(self, thread_id: str) -> None:
        self._run(q.CYPHER_DELETE_THREAD, thread_id=thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        run_ids = [str(r) for r in run_ids]
        if not run_ids:
            return
        recs = self._run(q.CYPHER_DELETE_FOR_RUNS, run_ids=run_ids)
        for tid in recs[0]["threads"] if recs else ():
            self._drop_orphan_blobs(tid)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(q.CYPHER_COPY_THREAD, source=source_thread_id, target=target_thread_id)

    def _skeleton(self, thread_id: str) -> tuple[list[Skeleton], list[tuple[str, str, bool]]]:
        blobs = [
            (r["ns"], r["key"], r["stored"])
            for r in self._run(q.CYPHER_THREAD_BLOBS, read=True, thread_id=thread_id)
        ]
        stored = {(ns, key) for ns, key, ok in blobs if ok}
        rows = []
        for r in self._run(q.CYPHER_THREAD_SKELETON, read=True, thread_id=thread_id):
            rows.append(
                Skeleton(
                    checkpoint_ns=r["ns"],
                    checkpoint_id=r["id"],
                    parent_checkpoint_id=r["parent"],
                    delta_channels=tuple(delta_channels(json.loads(r["metadata"]))),
                    stored_channels=frozenset(
                        k.split(KEY_SEP, 1)[0] for k in r["keys"] if (r["ns"], k) in stored
                    ),
                    created_at=float(r["created"] or 0.0),
                )
            )
        return rows, blobs

    def _drop_orphan_blobs(self, thread_id: str) -> None:
        rows = self._run(q.CYPHER_THREAD_SKELETON, read=True, thread_id=thread_id)
        live = {(r["ns"], k) for r in rows for k in r["keys"]}
        blobs = self._run(q.CYPHER_THREAD_BLOBS, read=True, thread_id=thread_id)
        orphans = [
            {"ns": r["ns"], "key": r["key"]} for r in blobs if (r["ns"], r["key"]) not in live
        ]
        if orphans:
            self._run(q.CYPHER_DELETE_BLOBS, thread_id=thread_id, keys=orphans)

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        limits: PruneLimits | None = None,
    ) -> None:
        lim = limits or PruneLimits()
        prune_threads(
            thread_ids,
            strategy,
            delete_thread=self.delete_thread,
            keep_latest=lambda tid: self._keep_latest(tid, lim),
        )

    def _keep_latest(self, thread_id: str, limits: PruneLimits) -> None:
        skeleton, _ = self._skeleton(thread_id)
        gone = prunable(skeleton, limits.keep_last, limits.cutoff)
        drop = [{"ns": s.checkpoint_ns, "id": s.checkpoint_id} for s in gone]
        if drop:
            self._run(q.CYPHER_DELETE_CHECKPOINTS, thread_id=thread_id, ids=drop)
            self._drop_orphan_blobs(thread_id)

    # ------------------------------------------------------------- branches
    def list_branches(self, thread_id: str, checkpoint_ns: str = "") -> list[BranchInfo]:
        params = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        rows = self._run(q.CYPHER_LIST_BRANCHES, read=True, **params)
        if rows:
            return [
                BranchInfo(
                    r["name"], r["head"], r["fork_point"], bool(r["active"]), r["created_at"]
                )
                for r in rows
            ]
        rec = self._run(q.CYPHER_LATEST_ID, read=True, **params)[0]
        return implicit_main(rec["latest"], rec["first_ts"])

    def fork(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, name: str) -> BranchInfo:
        params = {"tenant": self.tenant, "thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        with self._session() as session:
            return session.execute_write(
                lambda tx: fork_in(_ForkTx(tx, params), thread_id, checkpoint_id, name)
            )

    def _set_active_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None:
        self._run(
            q.CYPHER_SET_ACTIVE_BRANCH, thread_id=thread_id, checkpoint_ns=checkpoint_ns, name=name
        )

    def _delete_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None:
        self._run(
            q.CYPHER_DELETE_BRANCH, thread_id=thread_id, checkpoint_ns=checkpoint_ns, name=name
        )

    def _tree_rows(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str | None]]:
        rows = self._run(q.CYPHER_TREE, read=True, thread_id=thread_id, checkpoint_ns=checkpoint_ns)
        return [(r["id"], r["parent"]) for r in rows]
