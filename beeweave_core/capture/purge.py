"""Purge's reach into capture: pending copies of purged events are dropped too.

A purge must also reach what the store does not have yet: items in the queues and
coalescing groups, records handed to the store thread, this process's spool, the
overflow file, spools left by dead processes (else the next start replays what was
removed), and the dead-letter file.  Both threads are paused (``_jpause`` and
``_spause``) while it runs, so the files and queues hold still.
"""

from __future__ import annotations

from collections.abc import Mapping

from beeweave_core.capture.item import Queued, Submitted
from beeweave_core.capture.overflow import Overflow
from beeweave_core.capture.spool import DRAINING, Match, filter_file, keys_of, line_matches


class Purge(Overflow):
    """``forget()`` (a part of :class:`ContextBus`)."""

    def forget(self, match: Match) -> int:
        """Drop pending events ``match(id, session_id, user_id)`` selects from memory, the
        spool, the overflow and spools left by dead processes, and such entries from
        the dead-letter file: a purge must also reach what the store does not have yet.

        Args:
            match: Says which events to drop, from their id, session id and user id.

        Returns:
            The number of pending events dropped.
        """
        with self._jpause, self._spause:
            dropped = self._forget_memory(match)
            with self._spool_lock:
                dropped += self._spool.rewrite(match, self._stored_off)
                self._stored_off = 0
                self._ready.clear()
                self._disk = self._spool.end > 0
                self._marks.clear()
                self._marks.append((self._spool.end, self._persisted_upto))
            with self._overflow_lock:
                self._close_overflow_file()
                for path in (self.overflow_path, self._spool.file(DRAINING)):
                    dropped += filter_file(path, lambda line: line_matches(line, match))
            self._claim_orphans()
            for i, (path, _) in enumerate(self._orphans):
                start = self._orphan_off if i == 0 else 0
                dropped += filter_file(path, lambda line: line_matches(line, match), start)
            self._orphan_off = 0
            self._dead.forget(match)
        self._swake.set()
        return dropped

    def _claim_orphans(self) -> None:
        """Take on the spools of processes that died since this bus opened: a purge must
        reach them (else the next start replays what it removed), and they are replayed."""
        known = {path for path, _ in self._orphans}
        self._orphans += [o for o in self._spool.orphans() if o[0] not in known]

    def _forget_memory(self, match: Match) -> int:
        def hit(it: Queued) -> bool:
            if isinstance(it, Submitted):
                return match(it.event.id, it.event.session_id, it.event.user_id)
            meta = it.meta if isinstance(it.meta, Mapping) else {}
            user = meta.get("user_id")
            return match(it.id, it.session_id, user if isinstance(user, str) else None)

        dropped = 0
        for q in (self._high, self._low):
            for _ in range(len(q)):
                it = q.popleft()
                if hit(it):
                    dropped += 1
                else:
                    q.append(it)  # order is restored by ``n`` when the journal takes them
        for ck in list(self._pending_low):
            group = [it for it in self._pending_low[ck] if not hit(it)]
            dropped += len(self._pending_low[ck]) - len(group)
            if group:
                self._pending_low[ck] = group
            else:
                del self._pending_low[ck]
        self._pending_n = sum(len(g) for g in self._pending_low.values())
        with self._spool_lock:
            for records, _ in self._ready:
                dropped += sum(1 for r in records if match(*keys_of(r)))
        return dropped
