"""The scope line on LangGraph threads: a thread takes the scope of its writer.

A checkpoint holds the whole graph state (messages, tool results, a card number a user
typed), so a scoped weave must not read another business line's thread through its
checkpointer any more than through its events.  The rules are :mod:`beeweave_core.scopes`'
own, applied per thread:

* A thread's scope is the one its checkpoints carry (every checkpoint of a thread carries
  the same one, or none: unscoped, visible to every reader).
* A put takes the thread's scope when it has one; otherwise the writer's (its one scope,
  the ``scope`` named in the run's ``configurable``, or none for an unrestricted writer).
  A scoped writer never writes into another scope's thread.
* ``list`` leaves other scopes' checkpoints out in the query; ``get_tuple`` of one, and
  every thread-wide operation on another scope's thread (pending writes, delete, copy,
  prune, fork, branches, tree), raises :class:`~beeweave_core.scopes.ScopeError`.

An unrestricted saver asks nothing: the store inherits the thread's scope inside its own
put statement, so a weave without scopes pays no extra round trip.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from beeweave_core.checkpoints import CheckpointRow, CheckpointStore
from beeweave_core.scopes import Readable, ScopeError, visible, write_scope

#: Threads whose (named) scope a saver remembers; a named scope never changes.
CACHED_THREADS = 4096


class ThreadScopes:
    """What one saver may read and write, thread by thread."""

    def __init__(self, store: CheckpointStore, scopes: Readable) -> None:
        self.store = store
        self.scopes = scopes
        self._named: OrderedDict[str, str] = OrderedDict()

    def of(self, thread_id: str) -> str | None:
        """The thread's scope (None: unscoped or no such thread)."""
        if thread_id in self._named:
            self._named.move_to_end(thread_id)
            return self._named[thread_id]
        scope = self.store.thread_scope(thread_id)
        if scope is not None:
            self._remember(thread_id, scope)
        return scope

    def check(self, *thread_ids: str) -> None:
        """Raise unless every thread is readable (and so writable) here."""
        if self.scopes is None:
            return
        for tid in thread_ids:
            self._allowed(tid, self.of(tid))

    def for_put(self, thread_id: str, named: str | None) -> str | None:
        """The scope a new checkpoint of ``thread_id`` is stored with (None for an
        unrestricted writer: the store keeps the thread's own)."""
        if self.scopes is None:
            return write_scope(named, None)
        scope = self._allowed(thread_id, self.of(thread_id))  # one lookup per put
        return scope or write_scope(named, self.scopes)

    def seen(self, row: CheckpointRow | None) -> CheckpointRow | None:
        """``row`` if it may be read here; a read of another scope's checkpoint raises."""
        if row is None:
            return None
        if row.scope is not None:
            self._remember(row.thread_id, row.scope)
        self._allowed(row.thread_id, row.scope)
        return row

    def forget(self, thread_ids: Iterable[str]) -> None:
        for tid in thread_ids:
            self._named.pop(tid, None)

    def _allowed(self, thread_id: str, scope: str | None) -> str | None:
        """``scope`` (the thread's) if this saver may touch it, else ``ScopeError``."""
        if not visible(scope, self.scopes):
            raise ScopeError(
                f"thread {thread_id!r} belongs to scope {scope!r}, outside this weave's "
                f"scopes {sorted(self.scopes or ())}"
            )
        return scope

    def _remember(self, thread_id: str, scope: str) -> None:
        self._named[thread_id] = scope
        self._named.move_to_end(thread_id)
        while len(self._named) > CACHED_THREADS:
            self._named.popitem(last=False)


__all__ = ["ThreadScopes"]
