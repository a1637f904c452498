"""``BeeWeaveCheckpointer``: a LangGraph checkpointer whose threads are BeeWeave sessions.

A thin translator.  LangGraph's serializer (``serde``, ``JsonPlusSerializer`` by
default) turns values into typed bytes here; storage, branches and pruning live in
:mod:`beeweave_core.checkpoints` (the same SQLite file or Neo4j database as the event
graph).  ``thread_id`` is the BeeWeave ``session_id``, and every message that enters a
thread's ``messages`` channel is also recorded as an event — through the weave's one
:class:`~beeweave_core.transcript.Transcript`, so a graph that also runs the callback
handler or the context hook still gets each message once — which gives a LangGraph
app the causal event graph with no callbacks at all.

Construction follows ``langgraph-checkpoint-sqlite``::

    with BeeWeaveCheckpointer.from_conn_string("agent.db") as saver:          # sync
        graph = builder.compile(checkpointer=saver)

    async with AsyncBeeWeaveCheckpointer.from_conn_string("agent.db") as saver:
        graph = builder.compile(checkpointer=saver)

    saver = BeeWeaveCheckpointer(weave=weave)   # or BeeWeaveCheckpointer.from_weave(weave)

Both classes implement every sync *and* async method; the async ones run the sync
store call on a worker thread, like ``AsyncSqliteSaver`` does through ``aiosqlite``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import logging
import math
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    SerializerProtocol,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from beeweave_core.backends import store_url
from beeweave_core.checkpoint_scopes import ThreadScopes
from beeweave_core.checkpoints import (
    LIST_PAGE,
    AsyncCheckpointStore,
    BranchInfo,
    CheckpointRow,
    CheckpointStore,
    TreeNode,
    WriteRow,
    store_failure,
    version_text,
)
from beeweave_core.errors import shown
from beeweave_core.payloads import to_jsonable
from beeweave_core.transcript import Transcript, transcript_for
from beeweave_core.weave import Weave, require_weave
from beeweave_langchain.messages import to_messages

log = logging.getLogger("beeweave.langchain")
T = TypeVar("T")

__all__ = ["AsyncBeeWeaveCheckpointer", "BeeWeaveCheckpointer"]

#: Threads whose woven-message prefix is remembered (beyond this, a rescan is idempotent).
_MAX_WOVEN_THREADS = 4_096


def open_weave(
    conn_string: str | None,
    *,
    tenant: str = "default",
    auth: Any = None,
    database: str | None = None,
    weave_options: dict[str, Any] | None = None,
) -> Weave:
    """The weave a ``from_conn_string`` factory opens (path, BeeWeave URL or default file)."""
    return Weave.open(
        store_url(conn_string),
        tenant=tenant,
        auth=auth,
        database=database,
        **(weave_options or {}),
    )


def _reported(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A saver method whose store outage surfaces as one ``CheckpointStoreError`` line
    naming the store and the cause, without the driver's chain."""

    def fail(self: BeeWeaveCheckpointer, exc: Exception) -> None:
        error = store_failure(self.store_name, exc)
        if error is not None:
            raise error from None

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen(self: BeeWeaveCheckpointer, *args: Any, **kw: Any) -> Iterator[Any]:
            try:
                yield from fn(self, *args, **kw)
            except Exception as exc:
                fail(self, exc)
                raise

        return gen
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def coro(self: BeeWeaveCheckpointer, *args: Any, **kw: Any) -> Any:
            try:
                return await fn(self, *args, **kw)
            except Exception as exc:
                fail(self, exc)
                raise

        return coro

    @functools.wraps(fn)
    def call(self: BeeWeaveCheckpointer, *args: Any, **kw: Any) -> Any:
        try:
            return fn(self, *args, **kw)
        except Exception as exc:
            fail(self, exc)
            raise

    return call


def _plain(value: Any) -> bool:
    """True when ``value`` round-trips through JSON unchanged (tuples become lists)."""
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _delete_mode(value: bool | str) -> str:
    modes = {True: "purge", False: "keep", "purge": "purge", "keep": "keep", "hide": "hide"}
    if value not in modes:
        raise ValueError(f"delete_events must be 'hide', 'purge' or 'keep', got {value!r}")
    return modes[value]


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


class BeeWeaveCheckpointer(BaseCheckpointSaver[str]):
    """LangGraph checkpointer on BeeWeave's store (SQLite file or Neo4j), sync and async.

    Args:
        weave: The :class:`~beeweave_core.weave.Weave` whose store holds the
            checkpoints and whose event graph receives the thread's messages.
        serde: LangGraph serializer (default ``JsonPlusSerializer``).
        store: A ready :class:`~beeweave_core.checkpoints.CheckpointStore` (default: the
            one beside ``weave``'s events).
        record_messages: Record the ``messages_channel`` as events (default True).
        messages_channel: The state key holding the conversation (``"messages"``).
        delete_events: What ``delete_thread`` does to the thread's events:
            ``"hide"`` (default) soft-deletes them, so no read path (retrieve,
            assemble, memory) shows them and a new run on the same thread id starts
            clean, while audit and recovery still can (``include_inactive``);
            ``"purge"`` (or True) deletes them for good; ``"keep"`` (or False) leaves
            them as they are (checkpoints as housekeeping only).
    """

    def __init__(
        self,
        weave: Weave | None = None,
        *,
        serde: SerializerProtocol | None = None,
        store: CheckpointStore | None = None,
        record_messages: bool = True,
        messages_channel: str = "messages",
        delete_events: bool | str = "hide",
    ) -> None:
        super().__init__(serde=serde)
        if weave is not None or store is None:
            weave = require_weave(weave, type(self).__name__)
        # where the async twin's coroutine store comes from: the weave's own backend
        # (a store handed in has none; see AsyncBeeWeaveCheckpointer)
        self._backend = weave.backend if weave is not None and store is None else None
        if store is None:
            store = weave.backend.checkpoints()  # type: ignore[union-attr]  # closed with the weave's backend
        self.weave = weave
        self.store = store
        self._scopes = ThreadScopes(store, weave.scopes if weave is not None else None)
        self.messages_channel = messages_channel
        self.delete_events = _delete_mode(delete_events)
        self._recorder: Transcript | None = None
        if record_messages and weave is not None:
            self._recorder = transcript_for(weave)
        self._woven: OrderedDict[tuple[str, str], tuple[int, str]] = OrderedDict()
        self._woven_lock = threading.Lock()
        self._owned_weave: Weave | None = None

    @property
    def store_name(self) -> str:
        """How an error names the store: the weave's URL, else the store's class."""
        return shown(self.weave.url, 200) if self.weave is not None else type(self.store).__name__

    # ------------------------------------------------------------ construction
    @classmethod
    def from_weave(cls, weave: Weave, **kw: Any) -> BeeWeaveCheckpointer:
        """A checkpointer beside ``weave``'s events (same file or database).

        Args:
            weave: The open weave.
            **kw: The constructor's other keyword arguments (``serde``,
                ``record_messages``, ``delete_events`` ...).

        Returns:
            The checkpointer; the weave stays the caller's to close.
        """
        return cls(weave, **kw)

    @classmethod
    def _open(
        cls,
        conn_string: str | None,
        *,
        tenant: str,
        auth: Any,
        database: str | None,
        weave_options: dict[str, Any],
        kw: dict[str, Any],
    ) -> BeeWeaveCheckpointer:
        weave = open_weave(
            conn_string, tenant=tenant, auth=auth, database=database, weave_options=weave_options
        )
        try:
            saver = cls(weave, **kw)
        except BaseException:
            weave.close()
            raise
        saver._owned_weave = weave
        return saver

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str | None = None,
        *,
        tenant: str = "default",
        auth: Any = None,
        database: str | None = None,
        weave_options: dict[str, Any] | None = None,
        **kw: Any,
    ) -> Iterator[BeeWeaveCheckpointer]:
        """Open a weave at ``conn_string`` and yield a checkpointer on it; close both after.

        Args:
            conn_string: A file path (``"agent.db"``, ``":memory:"``), a BeeWeave URL
                (``sqlite:///…``, ``bolt://…``, ``neo4j+s://…``) or None (the default file).
            tenant: Whose records the weave reads and writes.
            auth: Neo4j credentials (see :meth:`Weave.open`).
            database: The Neo4j database (``None``: the server's default).
            weave_options: More keyword arguments for :meth:`Weave.open`.
            **kw: The checkpointer's keyword arguments (``serde``, ``delete_events`` ...).

        Yields:
            The checkpointer, closed with its weave when the block ends.

        Raises:
            ValueError: A bad URL or option.
        """
        saver = cls._open(
            conn_string,
            tenant=tenant,
            auth=auth,
            database=database,
            weave_options=dict(weave_options or {}),
            kw=kw,
        )
        try:
            yield saver
        finally:
            saver.close()

    def close(self) -> None:
        """Close the store (and the weave, when ``from_conn_string`` opened it)."""
        if self._owned_weave is not None:
            self._owned_weave.close()  # also closes the store: its backend opened it
        else:
            self.store.close()

    def __enter__(self) -> BeeWeaveCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def setup(self) -> None:
        """Create or migrate the tables/constraints; idempotent (construction runs it)."""
        self.store.setup()

    # ------------------------------------------------------------ translation
    def _redact(self, value: T) -> T:
        """What reaches storage goes through the weave's redactor (channel values,
        pending writes, metadata; the checkpoint's own ids and versions are kept)."""
        return self.weave.redact(value) if self.weave is not None else value

    def _row_to_tuple(self, row: CheckpointRow) -> CheckpointTuple:
        loads = self.serde.loads_typed
        checkpoint: Checkpoint = loads(row.checkpoint)
        checkpoint["channel_values"] = {k: loads(v) for k, v in row.values.items()}
        metadata = loads(row.metadata_exact) if row.metadata_exact else row.metadata
        return CheckpointTuple(
            config=_config(row.thread_id, row.checkpoint_ns, row.checkpoint_id),
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=(
                _config(row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id)
                if row.parent_checkpoint_id
                else None
            ),
            pending_writes=[(w.task_id, w.channel, loads(w.value)) for w in row.writes],
        )

    def _metadata(self, metadata: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """JSON for filtering; plus the exact serde form when JSON would lose something."""
        if _plain(metadata):
            return metadata, None
        return to_jsonable(metadata), self.serde.dumps_typed(metadata)

    @staticmethod
    def _target(config: RunnableConfig) -> tuple[str, str, str | None]:
        """(thread_id, checkpoint_ns, checkpoint_id) a config names."""
        conf = config["configurable"]
        return str(conf["thread_id"]), conf.get("checkpoint_ns", ""), get_checkpoint_id(config)

    def _put_row(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        scope: str | None,
    ) -> tuple[CheckpointRow, dict[tuple[str, str], Any]]:
        """The stored form of a checkpoint (of ``scope``, see :meth:`_put_scope`): the row
        and the blobs of its new versions."""
        conf = config["configurable"]
        body = checkpoint.copy()
        values = self._redact(body.pop("channel_values"))  # type: ignore[misc]
        dumps = self.serde.dumps_typed
        blobs = {
            (ch, version_text(v)): (dumps(values[ch]) if ch in values else None)
            for ch, v in new_versions.items()
        }
        meta, exact = self._metadata(self._redact(get_checkpoint_metadata(config, metadata)))
        row = CheckpointRow(
            thread_id=str(conf["thread_id"]),
            checkpoint_ns=conf.get("checkpoint_ns", ""),
            checkpoint_id=checkpoint["id"],
            parent_checkpoint_id=conf.get("checkpoint_id"),
            checkpoint=dumps(body),
            metadata=meta,
            channel_versions={k: version_text(v) for k, v in body["channel_versions"].items()},
            metadata_exact=exact,
            scope=scope,
        )
        return row, blobs

    def _put_scope(self, config: RunnableConfig) -> str | None:
        """The scope a put stores the checkpoint with (a scoped saver reads the thread's
        the first time it sees it: blocking I/O, kept off an event loop by the async twin)."""
        conf = config["configurable"]
        return self._scopes.for_put(str(conf["thread_id"]), conf.get("scope"))

    def _put_done(
        self,
        config: RunnableConfig,
        row: CheckpointRow,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """After the store took the checkpoint: its new messages to the event graph."""
        if self._recorder is not None and self.messages_channel in new_versions:
            self._record_messages(
                config["configurable"], row.thread_id, row.checkpoint_ns, checkpoint, row.metadata
            )
        return _config(row.thread_id, row.checkpoint_ns, row.checkpoint_id)

    def _writes_args(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> tuple[str, str, str, list[WriteRow]]:
        """The store's ``put_writes`` arguments: thread, namespace, checkpoint, rows (the
        caller checked the thread's scope)."""
        thread_id, ns, _ = self._target(config)
        dumps = self.serde.dumps_typed
        rows = [
            WriteRow(task_id, task_path, WRITES_IDX_MAP.get(ch, idx), ch, dumps(self._redact(v)))
            for idx, (ch, v) in enumerate(writes)
        ]
        return thread_id, ns, str(config["configurable"]["checkpoint_id"]), rows

    # ------------------------------------------------------------ sync API
    @_reported
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Load the checkpoint a graph resumes from: the one ``config`` names, else the
        head of the thread's active branch.

        Args:
            config: ``configurable`` with ``thread_id``, and optionally ``checkpoint_ns``
                and ``checkpoint_id``.

        Returns:
            The checkpoint with its metadata, parent and pending writes; ``None`` when
            there is none.

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        row = self._scopes.seen(self.store.get(*self._target(config)))
        return self._row_to_tuple(row) if row is not None else None

    @_reported
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoints for history views and time travel, newest first.

        Args:
            config: Narrows to a thread (and namespace, checkpoint); ``None``: every
                thread this weave may read.
            filter: Metadata key/values the checkpoints must have.
            before: Only checkpoints older than the one this config names.
            limit: Most checkpoints returned.

        Yields:
            Each checkpoint with its metadata, parent and pending writes.

        Raises:
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        conf = (config or {}).get("configurable") or {}
        thread_id = conf.get("thread_id")
        rows = self.store.list(
            thread_id=str(thread_id) if thread_id is not None else None,
            checkpoint_ns=conf.get("checkpoint_ns"),
            checkpoint_id=conf.get("checkpoint_id"),
            filter=self._redact(filter),  # metadata holds placeholders
            before=get_checkpoint_id(before) if before else None,
            limit=limit,
            readable=self._scopes.scopes,
        )
        for row in rows:
            yield self._row_to_tuple(row)

    @_reported
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint (redacted) and record its new messages as events.

        Args:
            config: Names the thread, namespace and the parent checkpoint.
            checkpoint: The checkpoint; only the channels in ``new_versions`` are stored
                anew, the others are shared with earlier checkpoints.
            metadata: Its metadata (kept as JSON for filtering).
            new_versions: The channels that changed since the parent, with their versions.

        Returns:
            The config naming the saved checkpoint.

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        row, blobs = self._put_row(
            config, checkpoint, metadata, new_versions, self._put_scope(config)
        )
        self.store.put(row, blobs)
        return self._put_done(config, row, checkpoint, new_versions)

    @_reported
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save what a task wrote before the next checkpoint, so a resumed run keeps it.

        Args:
            config: Names the thread, namespace and checkpoint the writes belong to.
            writes: ``(channel, value)`` pairs (values redacted).
            task_id: The task that wrote them.
            task_path: Where the task sits in the graph.

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        self._scopes.check(self._target(config)[0])
        self.store.put_writes(*self._writes_args(config, writes, task_id, task_path))

    @_reported
    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes; hide (or purge, or keep) its events
        as ``delete_events`` says.

        Args:
            thread_id: The thread (the BeeWeave session of the same id).

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        thread_id = str(thread_id)
        self._scopes.check(thread_id)
        self.store.delete_thread(thread_id)
        self._scopes.forget([thread_id])
        self._forget(thread_id)
        if self.delete_events == "keep" or self.weave is None:
            return
        self.weave.flush()
        if self.delete_events == "purge":
            self.weave.purge(session_id=thread_id)
        else:
            self.weave.hide_session(thread_id, "thread deleted (BeeWeaveCheckpointer)")
        if self._recorder is not None:
            self._recorder.forget(thread_id)

    @_reported
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) created by the given runs.

        Args:
            run_ids: The runs (``metadata["run_id"]`` of their checkpoints).

        Raises:
            ScopeError: A run wrote a thread of a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        run_ids = [str(r) for r in run_ids]
        if self._scopes.scopes is not None:  # every thread the runs wrote must be ours
            for run in run_ids:
                self._scopes.check(*{r.thread_id for r in self.store.list(filter={"run_id": run})})
        self.store.delete_for_runs(run_ids)

    @_reported
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy the whole checkpoint tree, writes and branches of one thread to another.

        Args:
            source_thread_id: The thread copied.
            target_thread_id: The thread that receives the copy.

        Raises:
            ScopeError: Either thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        self._scopes.check(str(source_thread_id), str(target_thread_id))
        self.store.copy_thread(str(source_thread_id), str(target_thread_id))

    @_reported
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Bound the storage of long-lived threads.

        Args:
            thread_ids: The threads to prune.
            strategy: ``keep_latest``: the newest checkpoint per namespace, plus the
                ancestors a ``DeltaChannel`` needs to rebuild its value; ``delete``:
                everything.

        Raises:
            ValueError: An unknown ``strategy``.
            ScopeError: A thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        self._scopes.check(*(str(t) for t in thread_ids))
        self.store.prune([str(t) for t in thread_ids], strategy=strategy)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The version of a channel's next value: ordered, and collision-free across
        concurrent writers (``<counter>.<random>``, as ``SqliteSaver`` does).

        Args:
            current: The channel's current version (``None``: none yet).
            channel: Unused (LangGraph's signature).

        Returns:
            The next version.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ------------------------------------------------------------ branches
    @_reported
    def fork(self, config: RunnableConfig, name: str) -> BranchInfo:
        """Start branch ``name`` at the checkpoint ``config`` names and make it active.

        The thread's next run (``get_tuple`` without a ``checkpoint_id``) continues from
        there; the branch's head then follows the new checkpoints.

        Args:
            config: Names the thread, namespace and checkpoint to branch from.
            name: The new branch's name.

        Returns:
            The new branch.

        Raises:
            ValueError: ``config`` names no checkpoint, no such checkpoint exists, or
                the branch exists already.
            ScopeError: The thread belongs to a scope outside the weave's.
        """
        conf = config["configurable"]
        cid = get_checkpoint_id(config)
        if not cid:
            raise ValueError("fork() needs a config with a checkpoint_id")
        self._scopes.check(str(conf["thread_id"]))
        return self.store.fork(str(conf["thread_id"]), conf.get("checkpoint_ns", ""), cid, name)

    @_reported
    def switch_branch(self, thread_id: str, name: str, checkpoint_ns: str = "") -> BranchInfo:
        """Make ``name`` the active branch: the next run continues from its head.

        Args:
            thread_id: The thread.
            name: The branch.
            checkpoint_ns: The namespace (``""``: the root graph).

        Returns:
            The branch, now active.

        Raises:
            ValueError: The thread has no such branch.
            ScopeError: The thread belongs to a scope outside the weave's.
        """
        self._scopes.check(str(thread_id))
        return self.store.switch_branch(str(thread_id), checkpoint_ns, name)

    @_reported
    def list_branches(self, thread_id: str, checkpoint_ns: str = "") -> list[BranchInfo]:
        """The named lines of a thread (a thread never forked has one implicit ``main``).

        Args:
            thread_id: The thread.
            checkpoint_ns: The namespace (``""``: the root graph).

        Returns:
            Each branch with its head, fork point and whether it is active.

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
        """
        self._scopes.check(str(thread_id))
        return self.store.list_branches(str(thread_id), checkpoint_ns)

    @_reported
    def delete_branch(self, thread_id: str, name: str, checkpoint_ns: str = "") -> None:
        """Forget a branch pointer (its checkpoints stay: other branches may share them).

        Args:
            thread_id: The thread.
            name: The branch.
            checkpoint_ns: The namespace (``""``: the root graph).

        Raises:
            ValueError: No such branch, or it is the active one.
            ScopeError: The thread belongs to a scope outside the weave's.
        """
        self._scopes.check(str(thread_id))
        self.store.delete_branch(str(thread_id), checkpoint_ns, name)

    @_reported
    def checkpoint_tree(self, thread_id: str, checkpoint_ns: str = "") -> list[TreeNode]:
        """Every checkpoint of the thread with its parent and the branch heads on it, for
        drawing the thread's history.

        Args:
            thread_id: The thread.
            checkpoint_ns: The namespace (``""``: the root graph).

        Returns:
            The checkpoints, oldest first.

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
        """
        self._scopes.check(str(thread_id))
        return self.store.tree(str(thread_id), checkpoint_ns)

    # ------------------------------------------------------------ async API
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple` (on a worker thread).

        Args:
            config: Names the thread, and optionally the namespace and checkpoint.

        Returns:
            The checkpoint tuple, or ``None``.
        """
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of :meth:`list`, read a page at a time on a worker thread.

        Args:
            config: Narrows to a thread (``None``: every thread).
            filter: Metadata key/values the checkpoints must have.
            before: Only checkpoints older than the one this config names.
            limit: Most checkpoints returned.

        Yields:
            Each checkpoint tuple, newest first.
        """
        it = self.list(config, filter=filter, before=before, limit=limit)
        while True:
            page = await asyncio.to_thread(lambda: list(itertools.islice(it, LIST_PAGE)))
            for item in page:
                yield item
            if len(page) < LIST_PAGE:
                return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put` (on a worker thread).

        Args:
            config: Names the thread, namespace and the parent checkpoint.
            checkpoint: The checkpoint.
            metadata: Its metadata.
            new_versions: The channels that changed since the parent.

        Returns:
            The config naming the saved checkpoint.
        """
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes` (on a worker thread).

        Args:
            config: Names the checkpoint the writes belong to.
            writes: ``(channel, value)`` pairs.
            task_id: The task that wrote them.
            task_path: Where the task sits in the graph.
        """
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of :meth:`delete_thread` (on a worker thread).

        Args:
            thread_id: The thread.
        """
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async twin of :meth:`delete_for_runs` (on a worker thread).

        Args:
            run_ids: The runs whose checkpoints go.
        """
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async twin of :meth:`copy_thread` (on a worker thread).

        Args:
            source_thread_id: The thread copied.
            target_thread_id: The thread that receives the copy.
        """
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async twin of :meth:`prune` (on a worker thread).

        Args:
            thread_ids: The threads to prune.
            strategy: ``keep_latest`` or ``delete``.
        """
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def asetup(self) -> None:
        """Async twin of :meth:`setup` (on a worker thread)."""
        await asyncio.to_thread(self.setup)

    # ------------------------------------------------------------ events
    def _forget(self, thread_id: str) -> None:
        with self._woven_lock:
            for key in [k for k in self._woven if k[0] == thread_id]:
                del self._woven[key]

    def _record_messages(
        self,
        conf: dict[str, Any],
        thread_id: str,
        checkpoint_ns: str,
        checkpoint: Checkpoint,
        metadata: dict[str, Any],
    ) -> None:
        """Hand the messages this thread has not recorded yet to the weave's recorder.

        Only the tail past the last message recorded from this thread is passed on
        (see :func:`_unrecorded`); a rewritten history is passed whole — the
        recorder's keys make that idempotent.  Never raises into the graph.
        """
        try:
            messages = checkpoint["channel_values"].get(self.messages_channel)
            if not isinstance(messages, list) or not messages:
                return
            key = (thread_id, checkpoint_ns)
            with self._woven_lock:
                done = self._woven.get(key)
            tail = _unrecorded(messages, done)
            if tail and self._recorder is not None:
                meta = {k: conf[k] for k in ("user_id", "agent_id") if isinstance(conf.get(k), str)}
                source = {
                    "framework": "langgraph",
                    "hook": "checkpoint",
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": checkpoint["id"],
                    "run_id": metadata.get("run_id"),
                }
                self._recorder.record(thread_id, to_messages(tail), meta=meta, source=source)
            last = messages[-1]
            if isinstance(last, BaseMessage) and last.id:
                with self._woven_lock:
                    self._woven[key] = (len(messages), last.id)
                    self._woven.move_to_end(key)
                    if len(self._woven) > _MAX_WOVEN_THREADS:
                        self._woven.popitem(last=False)
        except Exception:  # recording must never break the graph
            log.exception("beeweave: recording checkpointed messages failed (thread %s)", thread_id)


def _unrecorded(messages: list[Any], done: tuple[int, str] | None) -> list[BaseMessage]:
    """The messages of a thread's channel past the ``done`` one (its count, its id).

    Each checkpoint holds the whole history, so looking at more than its new end
    would make every step cost in proportion to the thread's length.  The tail alone
    is enough when the list still holds the recorded message where it was and every
    message after it has an id (``add_messages`` gives one to each): the recorder
    keys those by id.  A message without one is keyed by its content and how often
    that content came before it, which only the whole list tells.
    """
    if done is not None:
        n, last_id = done
        if len(messages) >= n and getattr(messages[n - 1], "id", None) == last_id:
            tail = [m for m in messages[n:] if isinstance(m, BaseMessage)]
            if all(m.id for m in tail):
                return tail
    return [m for m in messages if isinstance(m, BaseMessage)]


class AsyncBeeWeaveCheckpointer(BeeWeaveCheckpointer):
    """The ``AsyncSqliteSaver``-shaped twin: ``async with …from_conn_string(...)``.

    Same class of storage and the same methods (sync ones work from worker threads
    as well); only construction, ``setup`` and ``aclose`` are coroutines.  On a
    backend with an async driver (Neo4j) ``aput`` and ``aput_writes`` await it in the
    event loop of the first async call instead of running the sync store on a worker
    thread; reads, housekeeping and calls from any other loop use the thread.
    """

    _native_loop: asyncio.AbstractEventLoop | None = None
    _native_store: AsyncCheckpointStore | None = None

    @classmethod
    @asynccontextmanager  # type: ignore[override]
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str | None = None,
        *,
        tenant: str = "default",
        auth: Any = None,
        database: str | None = None,
        weave_options: dict[str, Any] | None = None,
        **kw: Any,
    ) -> AsyncIterator[AsyncBeeWeaveCheckpointer]:
        """Open a weave at ``conn_string`` (off the event loop) and yield a checkpointer
        on it; close both after.

        Args:
            conn_string: A file path, a BeeWeave URL or None (the default file).
            tenant: Whose records the weave reads and writes.
            auth: Neo4j credentials (see :meth:`Weave.open`).
            database: The Neo4j database (``None``: the server's default).
            weave_options: More keyword arguments for :meth:`Weave.open`.
            **kw: The checkpointer's keyword arguments (``serde``, ``delete_events`` ...).

        Yields:
            The checkpointer, closed with its weave when the block ends.

        Raises:
            ValueError: A bad URL or option.
        """
        saver = await asyncio.to_thread(
            cls._open,
            conn_string,
            tenant=tenant,
            auth=auth,
            database=database,
            weave_options=dict(weave_options or {}),
            kw=kw,
        )
        try:
            yield saver  # type: ignore[misc]
        finally:
            await saver.aclose()

    @property
    def async_store(self) -> AsyncCheckpointStore | None:
        """What the async writes await (None: the sync store, on a worker thread)."""
        return self._native_store

    def _native(self) -> AsyncCheckpointStore | None:
        """The backend's coroutine store for the running loop (opened on first use);
        None: run the sync store on a worker thread."""
        loop = asyncio.get_running_loop()
        if self._native_loop is None:
            self._native_loop = loop
            if self._backend is not None:
                self._native_store = self._backend.async_checkpoints()
        return self._native_store if loop is self._native_loop else None

    @_reported
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint, awaiting the backend's async driver when it has one.

        Args:
            config: Names the thread, namespace and the parent checkpoint.
            checkpoint: The checkpoint.
            metadata: Its metadata.
            new_versions: The channels that changed since the parent.

        Returns:
            The config naming the saved checkpoint.

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        native = self._native()
        if native is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        scope = await self._off_loop(self._put_scope, config)
        row, blobs = self._put_row(config, checkpoint, metadata, new_versions, scope)
        await native.aput(row, blobs)
        return self._put_done(config, row, checkpoint, new_versions)

    @_reported
    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save a task's pending writes, awaiting the backend's async driver when it has one.

        Args:
            config: Names the checkpoint the writes belong to.
            writes: ``(channel, value)`` pairs.
            task_id: The task that wrote them.
            task_path: Where the task sits in the graph.

        Raises:
            ScopeError: The thread belongs to a scope outside the weave's.
            CheckpointStoreError: The store did not answer (one line naming it).
        """
        native = self._native()
        if native is None:
            return await super().aput_writes(config, writes, task_id, task_path)
        await self._off_loop(self._scopes.check, self._target(config)[0])
        await native.aput_writes(*self._writes_args(config, writes, task_id, task_path))

    async def _off_loop(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)``: on a worker thread when it may read the store (a scoped
        saver's first look at a thread), here when it cannot (an unrestricted saver)."""
        if self._scopes.scopes is None:
            return call(*args)
        return await asyncio.to_thread(call, *args)

    async def setup(self) -> None:  # type: ignore[override]
        """Create or migrate the tables/constraints, off the event loop; idempotent."""
        await asyncio.to_thread(self.store.setup)

    async def aclose(self) -> None:
        """Close the async driver's store, then the store (and the weave, when
        ``from_conn_string`` opened it)."""
        native, self._native_store = self._native_store, None
        if native is not None:
            if asyncio.get_running_loop() is self._native_loop:
                await native.aclose()
            else:
                _close_in(self._native_loop, native)
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Close from sync code: the async store is closed in its own loop while it runs."""
        native, self._native_store = self._native_store, None
        if native is not None:
            _close_in(self._native_loop, native)
        super().close()

    async def __aenter__(self) -> AsyncBeeWeaveCheckpointer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _close_in(loop: asyncio.AbstractEventLoop | None, native: AsyncCheckpointStore) -> None:
    """Close a coroutine store from outside its loop: scheduled there while it runs (a
    finished loop's connections are gone with it)."""
    if loop is None or loop.is_closed() or not loop.is_running():
        return
    asyncio.run_coroutine_threadsafe(native.aclose(), loop)
