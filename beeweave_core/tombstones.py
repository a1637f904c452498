"""Tombstones: what a purge erased, so no later copy of it is stored again.

A purge runs in one process; copies of what it erased may still wait elsewhere (the
spool of a process that was alive when the purge ran and died after it, an overflow
file, a dead letter, an archive someone imports).  Every one of those paths ends in the
store's append, so the store keeps a tombstone per purge and its append refuses the
copies, in the same transaction that would have written them.

A purged event id is refused for good (ids are never reused), until an operator lifts
its tombstone (``Weave.lift_tombstone``, ``beeweave tombstones lift``).  A purged session or
user is refused for events dated at or before the purge (``Event.ts``): a copy made
before the purge is a copy of erased data; what the user says in that session
afterwards is new and is kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from beeweave_core.events import Event

EVENT = "event"
SESSION = "session"
USER = "user"
KINDS = (EVENT, SESSION, USER)


class Tombstone(NamedTuple):
    kind: str  # EVENT, SESSION or USER
    value: str
    at: float  # when the purge ran (seconds since the epoch)


def of_purge(
    *, session_id: str | None = None, ids: Sequence[str] = (), user_id: str | None = None
) -> list[Tombstone]:
    """The tombstones a purge of these records leaves."""
    now = time.time()
    out = [Tombstone(EVENT, i, now) for i in dict.fromkeys(ids)]
    if session_id is not None:
        out.append(Tombstone(SESSION, session_id, now))
    if user_id is not None:
        out.append(Tombstone(USER, user_id, now))
    return out


def keys(events: Iterable[Event]) -> list[str]:
    """The values a batch's tombstones could be filed under (ids, sessions, users)."""
    out: set[str] = set()
    for ev in events:
        out.add(ev.id)
        out.add(ev.session_id)
        user = ev.meta.get("user_id")
        if isinstance(user, str):
            out.add(user)
    return sorted(out)


def buried(events: Iterable[Event], found: Iterable[Tombstone]) -> set[str]:
    """Ids of the events among ``events`` that a purge erased."""
    marks = {(t.kind, t.value): t.at for t in found}
    if not marks:
        return set()
    out = set()
    for ev in events:
        user = ev.meta.get("user_id")
        if (
            (EVENT, ev.id) in marks
            or ev.ts <= marks.get((SESSION, ev.session_id), -1.0)
            or (isinstance(user, str) and ev.ts <= marks.get((USER, user), -1.0))
        ):
            out.add(ev.id)
    return out
