"""The caller's side of capture: ``emit()`` and ``submit()`` queue an item and return.

They run on the agent's thread, so they do the cheap things only: check the types and
the session id, mint the id, and append one :class:`~beeweave_core.capture.item.Item`
to a deque (``emit()`` costs a few microseconds; the journal thread does the rest).
Bounds: at most ``max_low`` low-priority items wait (beyond that the newest are dropped
and counted); past ``max_high`` high-priority items go to the overflow file, never
dropped; at most ``max_low`` refused emits wait for the journal to dead-letter them
(beyond that they are counted in ``refused_unkept``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from beeweave_core import telemetry
from beeweave_core.capture.item import Item, Submitted, as_str
from beeweave_core.capture.overflow import Overflow
from beeweave_core.errors import shown
from beeweave_core.events import (
    HIGH_PRIORITY_TYPES,
    EdgeType,
    Event,
    EventType,
    event_id_for,
    new_event_id,
)
from beeweave_core.ids import session_problem

log = logging.getLogger("beeweave.bus")
_HIGH = frozenset(t.value for t in HIGH_PRIORITY_TYPES)
_TYPES = frozenset(t.value for t in EventType)
_new = tuple.__new__  # an Item at a plain tuple's cost (Item(...) runs Python code)
#: Session ids already found valid, so a session's every emit is not checked again.
MAX_VALID_SESSIONS = 4_096
_VALID_SESSIONS: set[str] = set()


def emit_problem(tv: Any, sid: Any, ck: Any, ts: Any, priority: Any, key: Any) -> str | None:
    """Why an emit() cannot become an event (None: it can).  Cheap: the caller's thread."""
    if type(tv) is not str or tv not in _TYPES:
        return f"unknown event type {shown(tv)}"
    if type(sid) is not str or sid not in _VALID_SESSIONS:  # (most emits repeat a few)
        problem = session_problem(sid)
        if problem:
            return problem
        if len(_VALID_SESSIONS) >= MAX_VALID_SESSIONS:
            _VALID_SESSIONS.clear()
        _VALID_SESSIONS.add(sid)
    if ck is not None and type(ck) is not str:
        return f"coalesce_key must be a string, got {type(ck).__name__}"
    if key is not None and type(key) is not str:
        return f"key must be a string, got {type(key).__name__}"
    if ts is not None and (type(ts) not in (int, float) or not math.isfinite(ts)):
        return f"ts must be a finite number of seconds, got {shown(ts)}"
    if priority not in (None, "high", "low"):
        return f"priority must be 'high' or 'low', got {shown(priority)}"
    return None


class Intake(Overflow):
    """``emit()`` and ``submit()`` (a part of :class:`ContextBus`)."""

    def emit(
        self,
        type: EventType | str,
        content: Any = "",
        *,
        session_id: str,
        role: str | None = None,
        payload: Mapping[str, Any] | None = None,
        parents: Sequence[str] = (),
        links: Mapping[EdgeType | str, Sequence[str]] | None = None,
        meta: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
        key: str | None = None,
        ts: float | None = None,
        priority: str | None = None,
        coalesce_key: str | None = None,
        lazy: bool = False,
    ) -> str:
        """Queue one event and return its id at once; never raises, never blocks.

        ``key`` makes the id deterministic (a hook redelivered maps to the same id).
        ``priority`` overrides the type's ("high" / "low"); low ones of one ``coalesce_key``
        within ``coalesce_window`` merge.  ``lazy``: no read waits for it (an audit record,
        ``flush(reading=True)``).  Bad input (``ts="yesterday"``) is dead-lettered.
        """
        eid = ""
        try:
            n = next(self._counter)
            if lazy:
                self._lazy.add(n)
            self._stats["emitted"] += 1
            if telemetry.CAPTURE is not None:
                telemetry.CAPTURE.add(1)
            tv = as_str(type)  # (an EventType is a str: its value, without the enum's lookup)
            session_id, coalesce_key, key = (as_str(session_id), as_str(coalesce_key), as_str(key))  # fmt: skip
            problem = emit_problem(tv, session_id, coalesce_key, ts, priority, key)
            eid = new_event_id() if problem or key is None else event_id_for(self.tenant, session_id, key)  # fmt: skip
            hi = priority == "high" or (priority is None and tv in _HIGH)
            item: Item = _new(Item, (
                n, eid, tv, content, session_id, role, payload, parents,
                links, meta, source, ts if ts is not None else time.time(), coalesce_key, hi,
            ))  # fmt: skip
            if problem:
                self._reject(n, problem, item)
            elif hi:
                if self._overflowing or len(self._high) + self._inflight >= self.max_high:
                    self._overflow(item)
                else:
                    self._high.append(item)
                    # waking the writer per event would make it fight the agent for the GIL
                    if len(self._high) >= self.max_high // 2 and not self._wake.is_set():
                        self._wake.set()
            elif len(self._low) < self.max_low:
                self._low.append(item)
            else:
                self._stats["dropped_low"] += 1
        except Exception:  # capture must never break the host
            self._stats["emit_errors"] += 1
            log.exception("beeweave: emit() failed; event not captured")
        return eid

    def _reject(self, n: int, problem: str, item: Item) -> None:
        """Queue a refusal for the dead-letter file, within ``max_low`` (a flood of bad
        input is counted past that, never held)."""
        if len(self._rejects) < self.max_low:
            self._rejects.append((n, problem, item))
        else:
            self._stats["refused_unkept"] += 1

    def submit(self, event: Event) -> str:
        """Queue an already built :class:`Event` (integrations that need full control).

        Args:
            event: The event, queued as high priority and written as it is.

        Returns:
            The event's id.
        """
        self._stats["emitted"] += 1
        if telemetry.CAPTURE is not None:
            telemetry.CAPTURE.add(1)
        self._high.append(Submitted(next(self._counter), event))
        self._wake.set()
        return event.id
