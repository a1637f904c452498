"""``StoreWriter``: the one path of BeeWeave's own writes to a store.

Capture goes through the bus; what BeeWeave derives itself (memories, summaries, memory
tools' notes and invalidations, retention notes, imports' edges, confirmations) is
written synchronously, so it is readable at once.  Those writes go through one writer per
store (``weave.writer``, built by the weave), which runs each the same way::

    redact -> the store's write scope (in_scope) -> the store -> subscribers

Subscribers are what keeps state derived from the store and must follow BeeWeave's own
writes as they happen: the vector indexer (a new memory is searchable by meaning at once)
and the context engines' session views (a memory invalidated is gone from the next
assembly without a re-read).  A writer with no subscriber only calls the store.

The writer writes and does not read: a part that does both reads ``writer.store``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from beeweave_core.events import AppendResult, Edge, Event, Status
from beeweave_core.governance.redaction import EVENT_FIELDS
from beeweave_core.store import EventStore

T = TypeVar("T")
#: A store call changing the status of some events; returns how many changed.
StatusCall = Callable[[], int]


class Redact(Protocol):
    """What the weave's redactor does to a value (``Weave.redact``): the same value with
    every string inside redacted, its type kept."""

    def __call__(self, value: T) -> T: ...


class WriteSubscriber(Protocol):
    """What follows a :class:`StoreWriter`'s writes.

    Two moments matter: events just stored (to index them), and a status change BeeWeave
    makes itself, which a subscriber *wraps*: the session views run the store call under
    their lock and apply the new status after it, so no read in between sees half of it.
    """

    def on_stored(self, events: list[Event]) -> None:
        """Events the writer just stored, as stored (redacted, scoped); ids it found
        stored already are left out.

        Args:
            events: The new events, in the order given.
        """

    def own_change(self, change: StatusCall, ids: Sequence[str], status: Status) -> int:
        """Run ``change`` (the store call) and follow what it does to ``ids``.

        Args:
            change: The store call, or the next subscriber's wrapping of it; call it once.
            ids: The events whose status changes.
            status: Their new status.

        Returns:
            What ``change`` returned (how many events changed).
        """


@dataclass(frozen=True)
class AppendListener:
    """A subscriber that follows appends only (the vector indexer): a status change just
    runs.  Two built over the same listener are equal, so either unsubscribes it.

    Args:
        listener: Called with each list of events the writer stored.
    """

    listener: Callable[[list[Event]], None]

    def on_stored(self, events: list[Event]) -> None:
        """Hand ``events`` to the listener.

        Args:
            events: The new events.
        """
        self.listener(events)

    def own_change(self, change: StatusCall, ids: Sequence[str], status: Status) -> int:
        """Run ``change``: an index keeps no status (recall reads it from the store).

        Args:
            change: The store call.
            ids: The events whose status changes.
            status: Their new status.

        Returns:
            What ``change`` returned.
        """
        return change()


class StoreWriter:
    """BeeWeave's own writes to one store, redacted, scoped and followed by subscribers.

    Args:
        store: The store (or scope view) written to; reads go to it directly.
        redact: The weave's redactor (``None``: redaction is off).  Memory tools write
            what an agent passed them, so derived writes are redacted like capture.
    """

    def __init__(self, store: EventStore, *, redact: Redact | None = None) -> None:
        self._store = store
        self._redact = redact
        self._subscribers: tuple[WriteSubscriber, ...] = ()
        self._lock = threading.Lock()

    @property
    def store(self) -> EventStore:
        """The store written to, for reads: the writer only writes."""
        return self._store

    def subscribe(self, subscriber: WriteSubscriber) -> None:
        """Tell ``subscriber`` of every write from now on (once, however often subscribed).

        Args:
            subscriber: What follows the writes; told in the order subscribed.
        """
        with self._lock:  # replaced, never changed in place: a write walks its own copy
            if subscriber not in self._subscribers:
                self._subscribers = (*self._subscribers, subscriber)

    def unsubscribe(self, subscriber: WriteSubscriber) -> None:
        """Stop telling ``subscriber`` (safe to repeat).

        Args:
            subscriber: One given to :meth:`subscribe`.
        """
        with self._lock:
            self._subscribers = tuple(s for s in self._subscribers if s != subscriber)

    def append(self, events: Sequence[Event], *, canonical: bool = False) -> AppendResult:
        """Store ``events`` redacted and in the store's write scope, then tell subscribers
        of those it stored (the scope is set here so their vectors carry the same one).

        Args:
            events: The events.
            canonical: Their payload, meta and source are in canonical form already.

        Returns:
            The store's result.

        Raises:
            TypeError: An item is not an :class:`Event`.
            ValueError: An id, session id or parent id is empty or too long.
            ScopeError: An event names a scope the store may not write.
        """
        # (anything but an Event goes to the store as it is: the store refuses it)
        ready = [self._prepared(e) if isinstance(e, Event) else e for e in events]
        result = self._store.append(ready, canonical=canonical)
        subscribers = self._subscribers
        if subscribers and result.ids:
            new = set(result.ids)
            stored = [e for e in ready if e.id in new]
            for subscriber in subscribers:
                subscriber.on_stored(stored)
        return result

    def _prepared(self, ev: Event) -> Event:
        redact = self._redact
        if redact is not None:
            ev = ev.model_copy(update={f: redact(getattr(ev, f)) for f in EVENT_FIELDS})
        return self._store.in_scope(ev)

    def link(self, edges: Sequence[Edge]) -> int:
        """:meth:`EventWriter.link <beeweave_core.store.EventWriter.link>` (same arguments,
        result and errors), here so derived writers write through one object; no
        subscriber follows edges: the store counts them (``Changes.link_changes``)."""
        return self._store.link(edges)

    def invalidate(self, ids: Sequence[str], reason: str, *, by: str | None = None) -> int:
        """:meth:`EventWriter.invalidate <beeweave_core.store.EventWriter.invalidate>`
        (same arguments, result and errors) run through every subscriber, so the engine's
        views drop what it invalidates at once (see :meth:`WriteSubscriber.own_change`)."""
        ids = list(ids)
        store = self._store
        return self._changed(lambda: store.invalidate(ids, reason, by=by), ids, Status.INVALIDATED)

    def soft_delete(self, ids: Sequence[str], reason: str) -> int:
        """:meth:`EventWriter.soft_delete <beeweave_core.store.EventWriter.soft_delete>`
        (same arguments, result and errors) run through every subscriber, as
        :meth:`invalidate` is."""
        ids = list(ids)
        store = self._store
        return self._changed(lambda: store.soft_delete(ids, reason), ids, Status.DELETED)

    def _changed(self, call: StatusCall, ids: list[str], status: Status) -> int:
        """Run ``call`` wrapped by every subscriber (the first subscribed outermost)."""
        for subscriber in reversed(self._subscribers):
            call = _wrapped(subscriber, call, ids, status)
        return call()

    def __repr__(self) -> str:
        return f"StoreWriter({self._store!r})"


def _wrapped(
    subscriber: WriteSubscriber, call: StatusCall, ids: list[str], status: Status
) -> StatusCall:
    """``call`` as ``subscriber`` runs it (a function of its own: a lambda in the loop of
    :meth:`StoreWriter._changed` would see the loop's last values)."""
    return lambda: subscriber.own_change(call, ids, status)


__all__ = ["AppendListener", "Redact", "StoreWriter", "WriteSubscriber"]
