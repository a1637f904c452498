"""The CheckpointStore seam: what a LangGraph checkpointer needs from a backend.

The core knows nothing about LangGraph's serializer: channel values, the checkpoint
body and pending writes arrive as *typed bytes* ``(type_tag, data)`` produced by the
saver's serde, and leave the same way.  Metadata is plain JSON, because ``list``
filters on it.  Both backends (one SQLite file beside the events, or Neo4j nodes
beside the event graph) implement this protocol and share the pruning plan below,
so they cannot disagree on what ``prune`` keeps.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from beeweave_core.errors import StoreError
from beeweave_core.fallback import cause, unavailable
from beeweave_core.scopes import Readable

#: A value serialised by the saver's serde: ``(type tag, bytes)``.
Typed = tuple[str, bytes]

#: Metadata filter keys: the ``SqliteSaver`` rule (dots walk into nested objects).
_FILTER_KEY = re.compile(r"^[a-zA-Z0-9_.-]+$")
#: Separator between a channel and its version in blob keys (never in either).
KEY_SEP = "\x1f"
#: Page size of ``list``: rows are fetched in pages so no lock is held across yields.
LIST_PAGE = 64
#: The branch a thread that was never forked is on.
MAIN_BRANCH = "main"


class CheckpointStoreError(StoreError):
    """The checkpoint store could not do what was asked (bad input is a ``ValueError``).

    A closed or unreachable store is reported as this, in one line naming the store and
    the cause (:func:`store_failure`): LangGraph's state is the saver's writes, so unlike
    capture and memory reads the saver cannot go on without them.
    """


def store_failure(store: str, exc: BaseException) -> CheckpointStoreError | None:
    """The one-line error for an outage ``exc`` of the checkpoint store ``store``
    (None: ``exc`` is no outage, e.g. bad input, and is raised as it is)."""
    if isinstance(exc, CheckpointStoreError) or not unavailable(exc):
        return None
    return CheckpointStoreError(
        f"checkpoint store {store} is unavailable ({type(exc).__name__}: {cause(exc)}); "
        "the graph cannot save or resume its threads until it answers"
    )


@dataclass(frozen=True, slots=True)
class WriteRow:
    """One pending write: what a task wrote to a channel before the next checkpoint."""

    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Typed


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """A stored checkpoint as the saver hands it over and gets it back.

    ``checkpoint`` is the checkpoint body *without* ``channel_values``; each channel
    value is a blob keyed by ``(channel, version)`` so an unchanged channel is not
    written again.  On read, ``values`` holds the blobs of this checkpoint's
    versions and ``writes`` its pending writes in ``writes_sort_key`` order.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: Typed
    metadata: dict[str, Any]
    channel_versions: dict[str, str]
    values: dict[str, Typed] = field(default_factory=dict)
    writes: list[WriteRow] = field(default_factory=list)
    #: Exact serde form of metadata whose JSON form was lossy (None: JSON is exact).
    metadata_exact: Typed | None = None
    #: The business line the thread belongs to (see ``checkpoint_scopes``); on a put,
    #: None takes the thread's scope if it has one.
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class BranchInfo:
    """A named line of a thread's checkpoint tree (``langchain-neo4j`` branches)."""

    name: str
    head_checkpoint_id: str | None
    fork_point_id: str | None
    active: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One checkpoint of a thread's tree: its parent and the branches whose head it is."""

    checkpoint_id: str
    parent_checkpoint_id: str | None
    heads: tuple[str, ...] = ()


@runtime_checkable
class CheckpointStore(Protocol):
    """Storage for LangGraph checkpoints, scoped to one tenant like every store."""

    tenant: str

    def setup(self) -> None: ...
    def put(self, row: CheckpointRow, blobs: Mapping[tuple[str, str], Typed | None]) -> None: ...
    def get(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> CheckpointRow | None: ...
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
    ) -> Iterator[CheckpointRow]: ...
    def thread_scope(self, thread_id: str) -> str | None: ...
    def put_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None: ...
    def delete_thread(self, thread_id: str) -> None: ...
    def delete_for_runs(self, run_ids: Sequence[str]) -> None: ...
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None: ...
    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        limits: PruneLimits | None = None,
    ) -> None: ...
    def fork(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, name: str
    ) -> BranchInfo: ...
    def switch_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> BranchInfo: ...
    def list_branches(self, thread_id: str, checkpoint_ns: str = "") -> list[BranchInfo]: ...
    def delete_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None: ...
    def tree(self, thread_id: str, checkpoint_ns: str = "") -> list[TreeNode]: ...
    def close(self) -> None: ...


@runtime_checkable
class AsyncCheckpointStore(Protocol):
    """A backend's checkpoint writes as coroutines (the async saver's fast path).

    Only a backend with an async driver offers one (Neo4j): a small write's round trip
    is about as long as handing it to a worker thread and back.  Reads carry whole
    checkpoints and are dominated by decoding them, which a sync driver does with less
    CPU, so the saver runs them (and every call of a backend without one) on a worker
    thread.  Bound to the event loop it was opened in.
    """

    async def aput(
        self, row: CheckpointRow, blobs: Mapping[tuple[str, str], Typed | None]
    ) -> None: ...
    async def aput_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None: ...
    async def aclose(self) -> None: ...


# ----------------------------------------------------------------- shared helpers
def check_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate metadata filter keys (they reach a JSON path) and return a plain dict."""
    if not filter:
        return {}
    for key in filter:
        if not isinstance(key, str) or not _FILTER_KEY.match(key):
            raise ValueError(
                f"invalid filter key {key!r}: use letters, digits, '_', '-' and '.' only"
            )
    return dict(filter)


def canonical(value: Any) -> str:
    """The one JSON text of a metadata value that both backends compare against."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def metadata_pairs(metadata: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``path<US>json`` for every key path of ``metadata`` (nested objects walked).

    Graph stores cannot look inside a JSON string, so a checkpoint carries these
    pairs and a filter ``{"a.b": 1}`` becomes "``a.b<US>1`` is one of them".
    """
    out: list[str] = []
    for k, v in metadata.items():
        path = f"{prefix}{k}"
        out.append(f"{path}{KEY_SEP}{canonical(v)}")
        if isinstance(v, dict) and v:
            out.extend(metadata_pairs(v, prefix=f"{path}."))
    return out


def filter_pairs(filter: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """A filter as (pairs that must be present, key prefixes that must be absent-or-null)."""
    must, null_keys = [], []
    for k, v in check_filter(filter).items():
        if v is None:
            null_keys.append(f"{k}{KEY_SEP}")
        else:
            must.append(f"{k}{KEY_SEP}{canonical(v)}")
    return must, null_keys


def blob_key(channel: str, version: str) -> str:
    return f"{channel}{KEY_SEP}{version}"


def version_text(version: Any) -> str:
    """Channel versions may be int, float or str; blobs are keyed by their text."""
    return version if isinstance(version, str) else repr(version)


def delta_channels(metadata: Mapping[str, Any]) -> list[str]:
    """Channels a ``DeltaChannel`` rebuilds from ancestors (LangGraph's own counter key)."""
    counters = metadata.get("counters_since_delta_snapshot")
    return list(counters) if isinstance(counters, dict) else []


@dataclass(frozen=True, slots=True)
class Skeleton:
    """What pruning needs of one checkpoint: its place in the tree and its channels."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    delta_channels: tuple[str, ...]
    stored_channels: frozenset[str]
    created_at: float = 0.0


def plan_keep(
    rows: Iterable[Skeleton], keep_last: int = 1, cutoff: float | None = None
) -> set[tuple[str, str]]:
    """The ``(ns, checkpoint_id)`` pairs pruning must keep.

    Per namespace: the newest ``keep_last`` checkpoints that are not older than
    ``cutoff`` (a ``created_at`` time), and always the newest one (a thread must stay
    resumable); plus — for each ``DeltaChannel`` a kept checkpoint rebuilds from
    ancestors — every ancestor up to the nearest one that stores a value (snapshot)
    for that channel.  Without those, LangGraph would silently rebuild the channel as
    empty (see ``BaseCheckpointSaver.prune``).
    """
    if keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, got {keep_last}")
    by_ns: dict[str, dict[str, Skeleton]] = {}
    for r in rows:
        by_ns.setdefault(r.checkpoint_ns, {})[r.checkpoint_id] = r
    keep: set[tuple[str, str]] = set()
    for ns, nodes in by_ns.items():
        newest = sorted(nodes, reverse=True)[:keep_last]
        chosen = [nodes[i] for i in newest[:1]] + [
            nodes[i] for i in newest[1:] if cutoff is None or nodes[i].created_at >= cutoff
        ]
        for kept in chosen:
            keep.add((ns, kept.checkpoint_id))
            needed = set(kept.delta_channels) - kept.stored_channels
            cursor = kept.parent_checkpoint_id
            while needed and cursor is not None and cursor in nodes:
                node = nodes[cursor]
                keep.add((ns, node.checkpoint_id))
                needed -= node.stored_channels
                cursor = node.parent_checkpoint_id
    return keep


def plan_keep_latest(rows: Iterable[Skeleton]) -> set[tuple[str, str]]:
    """What ``prune(strategy="keep_latest")`` keeps: the newest per namespace (+ seeds)."""
    return plan_keep(rows)


def prunable(
    rows: Sequence[Skeleton], keep_last: int = 1, cutoff: float | None = None
) -> list[Skeleton]:
    """The checkpoints pruning deletes: all that :func:`plan_keep` need not keep."""
    keep = plan_keep(rows, keep_last, cutoff)
    return [r for r in rows if (r.checkpoint_ns, r.checkpoint_id) not in keep]


@dataclass(frozen=True, slots=True)
class PruneLimits:
    """``keep_latest`` generalised: newest ``keep_last`` per namespace, none older
    than ``max_age_days`` at ``now`` (the newest always stays)."""

    keep_last: int = 1
    max_age_days: float | None = None
    now: float | None = None

    @property
    def cutoff(self) -> float | None:
        if self.max_age_days is None:
            return None
        return (time.time() if self.now is None else self.now) - self.max_age_days * 86_400.0


def prune_threads(
    thread_ids: Sequence[str],
    strategy: str,
    *,
    delete_thread: Callable[[str], None],
    keep_latest: Callable[[str], None],
) -> None:
    """``prune`` for both backends: ``delete`` drops whole threads, ``keep_latest`` thins them."""
    check_strategy(strategy)
    for tid in thread_ids:
        (delete_thread if strategy == "delete" else keep_latest)(tid)


#: ``fetch(page_size, after)``: up to ``page_size`` rows older than ``after`` (None: from the top).
PageFetch = Callable[[int, "CheckpointRow | None"], list[CheckpointRow]]


def paged(fetch: PageFetch, limit: int | None) -> Iterator[CheckpointRow]:
    """``list``'s rows newest first, one page per round trip, each page after the last row.

    Pages keep a backend from holding a lock or transaction open while the caller
    works through the rows it was given.
    """
    left = limit if limit is not None else -1
    after: CheckpointRow | None = None
    while left != 0:
        page = LIST_PAGE if left < 0 else min(left, LIST_PAGE)
        rows = fetch(page, after)
        yield from rows
        if len(rows) < page:
            return
        after = rows[-1]
        if left > 0:
            left -= len(rows)


def check_strategy(strategy: str) -> None:
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")


def check_name(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    return value


def implicit_main(latest: str | None, first_ts: float | None) -> list[BranchInfo]:
    """The branches of a thread never forked: ``main`` at its newest checkpoint (or none)."""
    if latest is None:
        return []
    return [BranchInfo(MAIN_BRANCH, latest, None, True, first_ts or 0.0)]


class ForkTx(Protocol):
    """What forking needs from one backend transaction on one thread and namespace."""

    def exists(self, checkpoint_id: str) -> bool: ...
    def branch_names(self) -> set[str]: ...
    def latest(self) -> tuple[str | None, float | None]: ...
    def create(
        self, name: str, head: str | None, fork_point: str | None, created_at: float | None
    ) -> None: ...
    def activate(self, name: str) -> None: ...


def fork_in(tx: ForkTx, thread_id: str, checkpoint_id: str, name: str) -> BranchInfo:
    """Start branch ``name`` at ``checkpoint_id`` and make it active, inside ``tx``.

    The first fork of a thread first records its implicit ``main`` branch, so the
    line it leaves keeps a name to switch back to.
    """
    check_name("branch name", name)
    if not tx.exists(checkpoint_id):
        raise ValueError(f"no checkpoint {checkpoint_id!r} in thread {thread_id!r}")
    existing = tx.branch_names()
    if not existing:
        latest, first_ts = tx.latest()
        tx.create(MAIN_BRANCH, latest, None, first_ts)
        existing = {MAIN_BRANCH}
    if name in existing:
        raise ValueError(f"branch {name!r} already exists in thread {thread_id!r}")
    now = time.time()
    tx.create(name, checkpoint_id, checkpoint_id, now)
    tx.activate(name)
    return BranchInfo(name, checkpoint_id, checkpoint_id, True, now)


class BranchOps:
    """Branch rules both backends share; they supply the four primitives below."""

    def list_branches(self, thread_id: str, checkpoint_ns: str = "") -> list[BranchInfo]:
        raise NotImplementedError

    def _set_active_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None:
        raise NotImplementedError

    def _delete_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None:
        raise NotImplementedError

    def _tree_rows(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str | None]]:
        raise NotImplementedError

    def _branch(self, thread_id: str, checkpoint_ns: str, name: str) -> BranchInfo:
        branches = {b.name: b for b in self.list_branches(thread_id, checkpoint_ns)}
        if name not in branches:
            raise ValueError(f"no branch {name!r} in thread {thread_id!r}; have {sorted(branches)}")
        return branches[name]

    def switch_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> BranchInfo:
        """Make ``name`` active: the thread's next step continues from its head."""
        b = self._branch(thread_id, checkpoint_ns, name)
        self._set_active_branch(thread_id, checkpoint_ns, name)
        return BranchInfo(b.name, b.head_checkpoint_id, b.fork_point_id, True, b.created_at)

    def delete_branch(self, thread_id: str, checkpoint_ns: str, name: str) -> None:
        """Forget a branch pointer (its checkpoints stay: other branches may share them)."""
        if self._branch(thread_id, checkpoint_ns, name).active:
            raise ValueError(f"branch {name!r} is active; switch to another branch first")
        self._delete_branch(thread_id, checkpoint_ns, name)

    def tree(self, thread_id: str, checkpoint_ns: str = "") -> list[TreeNode]:
        """Every checkpoint of the thread with its parent, oldest first, heads marked."""
        heads: dict[str, list[str]] = {}
        for b in self.list_branches(thread_id, checkpoint_ns):
            if b.head_checkpoint_id:
                heads.setdefault(b.head_checkpoint_id, []).append(b.name)
        return [
            TreeNode(cid, parent, tuple(heads.get(cid, ())))
            for cid, parent in self._tree_rows(thread_id, checkpoint_ns)
        ]
