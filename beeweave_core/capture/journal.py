"""The journal thread: queued items become event records in this process's spool.

Every ``flush_interval`` (50 ms) it takes what is queued in emit order, in chunks of
``_CHUNK`` (each on disk before the next is taken), builds each item's record alone
(a bad one is dead-lettered alone), merges bursts of low-priority fragments of one
``coalesce_key`` within ``coalesce_window``, appends the records to the spool and
hands them to the store thread.  So an event is on disk one journal tick after
``emit()`` returned, whether the store answers or not.  At most ``max_low`` fragments
wait in coalescing groups (beyond that the oldest group is written early); a store
slower than capture keeps at most ``READY_MAX`` journaled records in memory (it reads
the rest from the spool).  Refusals are written and logged once per cycle.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from beeweave_core.capture.item import Item, Queued, Submitted
from beeweave_core.capture.overflow import Overflow
from beeweave_core.capture.records import canonical, reason
from beeweave_core.capture.spool import encode

log = logging.getLogger("beeweave.bus")
#: Journaled records kept in memory for a store that is behind; beyond this the store
#: thread reads them back from the spool file (memory stays bounded under any burst).
READY_MAX = 20_000
#: Items the journal takes from memory per write (each chunk is on disk before the next).
_CHUNK = 250
Built = tuple[int, dict[str, Any]]  # (n, the event in its JSON record form)


class Journal(Overflow):
    """The journal thread's cycle (a part of :class:`ContextBus`)."""

    def _journal_loop(self) -> None:
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            closing = self._closing
            try:
                with self._jpause:
                    self._journal_cycle(force=closing or self._flush_target > self._persisted_upto)
            except Exception:  # the writer must survive anything
                log.exception("beeweave: journal cycle failed")
            if closing and not (self._high or self._low or self._pending_low or self._rejects):
                self._swake.set()
                return

    def _take(self, k: int) -> list[Queued]:
        """Up to ``k`` queued items in emit order (they count as in memory until written)."""
        items: list[Queued] = []
        high, low = self._high, self._low
        while len(items) < k and (high or low):
            take_high = high and (not low or high[0].n < low[0].n)
            items.append(high.popleft() if take_high else low.popleft())
        self._inflight = len(items)
        return items

    def _journal_cycle(self, force: bool) -> None:
        seen = -1
        refused = [self._rejects.popleft() for _ in range(len(self._rejects))]
        if refused:
            self._refuse_all([(item, why) for _, why, item in refused])
            seen = max(n for n, _, _ in refused)
        seen = max(seen, self._journal_memory())
        older = self._start_overflow_drain()
        if older is not None:
            # what reached memory before the overflow file was cut off may be older than
            # lines in it (a thread's next emit overflowed): those go first; what came
            # after the cut is newer than every line, and waits for the next cycle
            seen = max(seen, self._journal_memory(older))
            self._drain_overflow()
        batch: list[Built] = []
        now = time.time()
        for ck in [
            ck
            for ck, g in self._pending_low.items()
            if force or now - g[0].ts >= self.coalesce_window
        ]:
            self._add_group(batch, self._take_group(ck))
        self._persist(batch)
        done = seen
        if self._pending_low:
            done = min([done] + [g[0].n - 1 for g in self._pending_low.values()])
        elif not (self._high or self._low or self._overflowing):
            done = max(done, self._flush_target)
        self._commit(done)

    def _journal_memory(self, budget: int | None = None) -> int:
        """Write what is queued now (at most ``budget`` items, oldest queued first), in
        small chunks (each on disk before the next is taken); the highest ``n`` written
        (-1: none)."""
        seen = -1
        if budget is None:
            budget = len(self._high) + len(self._low)
        while budget > 0:
            items = self._take(min(budget, _CHUNK))
            if not items:
                break
            budget -= len(items)
            batch: list[Built] = []
            for it in items:
                self._arrange(batch, it)
            self._persist(batch)
            self._inflight = 0
            seen = max(seen, items[-1].n)
        return seen

    def _arrange(self, batch: list[Built], it: Queued) -> None:
        """Place one queued item: pre-built, high priority, or a fragment to coalesce."""
        try:
            if isinstance(it, Submitted):  # pre-built event (submit): made canonical too
                self._close_groups(batch, session_id=it.event.session_id)
                batch.append((it.n, canonical(it.event.to_record())))
            elif it.high:
                self._close_groups(batch, session_id=it.session_id)
                self._add_built(batch, it)
            else:
                self._coalesce(batch, it)
        except Exception as exc:  # one bad item never takes the others with it
            self._refuse(it, reason(exc))

    # ------------------------------------------------------------ coalescing
    def _coalesce(self, batch: list[Built], it: Item) -> None:
        ck = (it.session_id, it.type, it.coalesce_key)
        group = self._pending_low.get(ck)
        while self._pending_low and self._pending_n >= self.max_low:  # oldest goes out early
            oldest = next(iter(self._pending_low))
            self._add_group(batch, self._take_group(oldest))
            group = None if oldest == ck else group
        self._pending_n += 1
        if group is not None and it.ts - group[0].ts <= self.coalesce_window:
            group.append(it)
            return
        if group is not None:
            self._add_group(batch, self._take_group(ck))
        self._pending_low[ck] = [it]

    def _take_group(self, ck: tuple[Any, ...]) -> list[Item]:
        group = self._pending_low.pop(ck)
        self._pending_n -= len(group)
        return group

    def _close_groups(self, batch: list[Built], session_id: str) -> None:
        """Fragments of a session precede the high-priority event that follows them."""
        for ck in [ck for ck in self._pending_low if ck[0] == session_id]:
            self._add_group(batch, self._take_group(ck))

    def _add_group(self, batch: list[Built], group: list[Item]) -> None:
        if len(group) == 1:
            self._add_built(batch, group[0])
            return
        first = group[0]
        try:
            text = "".join(
                x.content if isinstance(x.content, str) else str(x.content) for x in group
            )
            payload = dict(first.payload or {})
        except Exception:  # a fragment that cannot be merged: keep each one on its own
            for it in group:
                self._add_built(batch, it)
            return
        payload["coalesced"] = {
            "fragments": len(group),
            "first_ts": first.ts,
            "last_ts": group[-1].ts,
        }
        self._stats["coalesced"] += len(group) - 1
        self._add_built(batch, first._replace(content=text, payload=payload))

    def _add_built(self, batch: list[Built], it: Item) -> None:
        try:
            batch.append((it.n, self._record(it)))
        except Exception as exc:  # a payload whose model_dump raises …
            self._refuse(it, reason(exc))

    # ------------------------------------------------------------ to the spool
    def _persist(self, batch: list[Built]) -> None:
        """Append records to the spool and hand them to the store thread."""
        if not batch:
            return
        parts: list[bytes] = []
        records: list[dict[str, Any]] = []
        for n, rec in batch:
            try:
                rec = self._redacted(rec)
                parts.append(encode(n, rec))
                records.append(rec)
            except Exception as exc:
                self._refuse(rec, reason(exc))
        with self._spool_lock:
            end = self._spool.append(b"".join(parts))
            if self._disk:
                self._stats["spooled"] += 0 if self._store_up else len(records)
            else:
                self._ready.append((records, end))
                if len(self._ready) > 8 and sum(len(r) for r, _ in self._ready) > READY_MAX:
                    self._ready.clear()  # a store behind the journal: it reads the spool
                    self._disk = True
        self._stats["journaled"] += len(records)
        self._swake.set()

    def _commit(self, done: int) -> None:
        """Publish that every item up to ``done`` is on disk (``persisted()`` waits on it)."""
        if done < 0:
            return
        with self._spool_lock:
            self._marks.append((self._spool.end, done))
        with self._cond:
            if done > self._persisted_upto:
                self._persisted_upto = done
                self._cond.notify_all()
        self._swake.set()
