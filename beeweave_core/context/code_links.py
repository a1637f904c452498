"""Recall follows codes: a recalled turn that names an item by its code (a ticket, an
order, a product) brings the other turns of the session that name the same code.

Items that differ only by a code are separate items, and they are often introduced far
apart ("the first blocker is X-1" … many turns later … "the second one is X-2, looks
like X-1"): a question about both matches the first turn's words and not the second's.
The turn that names the second item next to the first shares the first one's code, and
a code is a word no other item shares, so following it costs one lexical search.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from beeweave_core.events import Event, EventType
from beeweave_core.store import EventReader
from beeweave_core.text.language import identifiers

#: The best recalled turns whose codes are followed.
SEEDS = 8
#: Codes followed per request, and turns brought per code.
CODES = 4
PER_CODE = 3
#: A linked turn ranks just below the turn that named its code.
SHARE = 0.95
#: Only what was said names an item (a tool's output names dozens of codes).
_NAMERS = frozenset({EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE})


@functools.lru_cache(maxsize=4_096)
def codes(text: str) -> tuple[str, ...]:
    """The codes ``text`` names: identifiers holding both letters and digits (kept per
    text: the best recalled turns are much the same from one call to the next)."""
    return tuple(
        t
        for t in dict.fromkeys(identifiers(text))
        if any(c.isdigit() for c in t) and any(c.isalpha() for c in t) and len(t) >= 4
    )


def with_code_links(
    store: EventReader,
    session_id: str,
    keep: Sequence[tuple[Event, float]],
    accept: Callable[[Event], bool],
    query: str = "",
) -> list[tuple[Event, float]]:
    """``keep`` (recalled events, best first) with, after each of its first turns that
    names a code, the session's other turns naming it (``accept`` decides what may be
    shown; codes the query names itself are searched for by the query already).  A
    linked turn the retriever ranked lower moves up next to its seed: ranked low, it is
    the first thing a tight budget drops, though it is the only one naming the item."""
    named = set(codes(query))
    rank = {ev.id: i for i, (ev, _s) in enumerate(keep)}
    moved: set[str] = set()
    links: dict[str, list[tuple[Event, float]]] = {}
    followed = 0
    for i, (ev, score) in enumerate(keep[:SEEDS]):
        if ev.type not in _NAMERS or ev.id in moved:
            continue
        for code in codes(ev.content or ""):
            if code in named or followed >= CODES:
                continue
            named.add(code)
            followed += 1
            found = store.search_text(code, k=PER_CODE + 1, session_id=session_id, types=_NAMERS)
            fresh = [
                o
                for o, _bm25 in found
                if rank.get(o.id, len(keep)) > i
                and o.id not in moved
                and code in (o.content or "")
                and accept(o)
            ]
            for other in fresh[:PER_CODE]:
                moved.add(other.id)
                links.setdefault(ev.id, []).append((other, score * SHARE))
    if not links:
        return list(keep)
    out: list[tuple[Event, float]] = []
    for ev, score in keep:
        if ev.id not in moved:
            out.append((ev, score))
            out += links.get(ev.id, [])
    return out


__all__ = ["codes", "with_code_links"]
