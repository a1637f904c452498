"""Capture: every event an agent emits reaches the store, without blocking or breaking it.

One class, :class:`ContextBus`, composed of small parts, each read at once:

* ``item``: the queued record (:class:`~beeweave_core.capture.item.Item`, a named tuple);
* ``intake``: ``emit()`` / ``submit()`` on the caller's thread;
* ``overflow``: high-priority events past the memory bound, kept on disk;
* ``journal``: the journal thread (coalescing, records, appending to the spool);
* ``records``: an event's record, redaction and dead letters;
* ``drain``: the store thread (batches, backoff, stall detection, listeners);
* ``replay``: this process's spool and dead processes' spools, back into the store;
* ``purge``: ``forget()``, which reaches pending copies;
* ``spool``: the spool, overflow and dead-letter files;
* ``shutdown``: saving every bus on SIGTERM;
* ``state``: the settings, queues, locks and offsets the parts share;
* ``bus``: :class:`ContextBus`, their composition, and its public calls.
"""

from __future__ import annotations

from beeweave_core.capture.bus import ContextBus
from beeweave_core.capture.state import Listener

__all__ = ["ContextBus", "Listener"]
