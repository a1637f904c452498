"""Replay: events on disk that the store does not have yet go to it, in order.

Two sources, read in chunks of ``batch_size`` lines (never loaded whole): this
process's own spool, from the first line not yet stored (after an outage, or when the
store fell behind the journal), and the spool and overflow files that dead processes
left for the same store and tenant, oldest first, before anything newer counts as
stored.  Ids are fixed before spooling, so replaying a line twice stores nothing twice.
The store thread (drain.py) runs these; the overflow file of this process is moved
into its spool by the journal thread (overflow.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from beeweave_core.capture.records import Records, canonical, reason
from beeweave_core.capture.spool import chunks
from beeweave_core.events import Event

log = logging.getLogger("beeweave.bus")


class Replay(Records):
    """Replaying spools into the store (a part of :class:`ContextBus`)."""

    if TYPE_CHECKING:  # the store thread's, in drain.py (whose Drain builds on this)

        def _store(self, events: list[Event]) -> bool: ...

        def _advance(self) -> None: ...

    def _replay_own(self) -> None:
        """The store is back (or was slow): replay the spool from the first unstored line."""
        with self._spool_lock:
            start, end = self._stored_off, self._spool.end
        for lines, pos in chunks(self._spool.path, self.batch_size, start, end):
            events = self._events(line["event"] for line in self._parse(lines))
            if not self._store(events):
                return
            self._stats["replayed"] += len(events)
            with self._spool_lock:
                self._stored_off = max(self._stored_off, pos)
            self._advance()
            if time.monotonic() > self._stop_at:
                return
        with self._spool_lock:
            if self._stored_off >= self._spool.end:
                self._disk = False
        self._advance()

    def _replay_orphans(self) -> bool:
        """Replay spools left by dead processes, oldest first; False while the store is down."""
        while self._orphans:
            path, handle = self._orphans[0]
            for lines, pos in chunks(path, self.batch_size, self._orphan_off):
                # another process's (or version's) journal wrote them: made canonical here
                events = self._events(canonical(line["event"]) for line in self._parse(lines))
                if not self._store(events):
                    return False
                self._stats["replayed"] += len(events)
                self._orphan_off = pos
            path.unlink(missing_ok=True)
            if handle is not None:
                handle.close()
            self._orphans.pop(0)
            self._orphan_off = 0
            log.info("beeweave: replayed events a stopped process left in %s", path.name)
        return True

    def _parse(self, lines: list[bytes]) -> Iterator[dict[str, Any]]:
        for line in lines:
            try:
                rec = json.loads(line)
                if isinstance(rec, dict) and isinstance(rec.get("event"), dict):
                    yield rec
                    continue
                problem = "not a spool record"
            except ValueError as exc:
                problem = str(exc)
            self._refuse((line.decode("utf-8", "replace"),), f"unreadable spool line: {problem}")

    def _events(self, records: Iterable[dict[str, Any]]) -> list[Event]:
        """Validate records into events; one that does not validate is refused alone."""
        out: list[Event] = []
        for rec in records:
            try:
                out.append(Event.from_record(rec))
            except Exception as exc:  # ts="yesterday" from a spool, an unknown edge type …
                self._refuse(rec, reason(exc))
        return out
