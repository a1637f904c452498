"""What a memory event is, read by everything that shows memories: its kinds, its
lifespan, the conflicts it flags.  No dependency on the writer or the context engine,
so the memory tools and the working state can read memories without importing them."""

from __future__ import annotations

from collections.abc import Iterable

from beeweave_core.events import Event
from beeweave_core.ranking import age_weight

KINDS = ("fact", "decision", "preference", "constraint", "artifact")
#: A memory older than this many half-lives of its kind is no longer recalled.
EXPIRE_HALF_LIVES = 4.0


def decay(ev: Event, now: float | None = None) -> float:
    """Recall weight of a memory by age and kind: 1.0 new, halving every half-life."""
    return age_weight(ev, now)


def expired(ev: Event, now: float | None = None) -> bool:
    return decay(ev, now) < 0.5**EXPIRE_HALF_LIVES


def conflicts(memories: Iterable[Event]) -> list[tuple[Event, Event]]:
    """Pairs of active memories flagged as possibly saying different things of one setting."""
    by_id = {m.id: m for m in memories}
    return [
        (by_id[o], m)
        for m in by_id.values()
        for o in m.payload.get("conflicts_with") or ()
        if o in by_id
    ]
