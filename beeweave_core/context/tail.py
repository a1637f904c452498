"""The newest turns of a session, read without the rest: what every call starts from.

A call reads pages of turns from the end until they hold more tokens than its budget
(or the session's first turn), so its reads follow the budget, not the session: 256
events is one page, whatever was stored before them.  Token counts of stored events are
kept by id (a stored event never changes, and the same newest turns are read by call
after call).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from beeweave_core.context.messages import CONVERSATION_TYPES
from beeweave_core.events import Event, EventType
from beeweave_core.store import EventReader
from beeweave_core.tokens import TokenCounter

#: Events read per page from the end of the session (the first page is smaller: a
#: budget of a few thousand tokens is usually filled by it; each next one doubles).
TAIL_PAGE = 256
FIRST_PAGE = 64
#: Token counts kept (event id, encoding); cleared when full.
_COUNTS_MAX = 200_000
_counts: dict[tuple[str, str], int] = {}
_counts_lock = threading.Lock()


@dataclass
class Tail:
    """The newest turns of a session (active events, oldest first), system prompts
    among them."""

    session_id: str
    events: list[Event]
    #: the tail reaches the session's first turn (nothing was left unread)
    complete: bool
    #: tokens of the events' text (a lower bound of what their messages cost)
    tokens: int = 0

    @property
    def first_seq(self) -> int:
        return self.events[0].seq if self.events else -1

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else -1

    def since(self, seq: int) -> list[Event]:
        """The tail's events after ``seq``."""
        return [e for e in self.events if e.seq > seq]


def event_tokens(counter: TokenCounter, ev: Event) -> int:
    """Tokens of a stored event's text, counted once per encoding."""
    key = (ev.id, counter.encoding_name)
    n = _counts.get(key)
    if n is None:
        n = counter.count_text(ev.content or "")
        with _counts_lock:
            if len(_counts) >= _COUNTS_MAX:
                _counts.clear()
            _counts[key] = n
    return n


def read_tail(
    store: EventReader, session_id: str, budget: int, counter: TokenCounter, page: int = TAIL_PAGE
) -> Tail:
    """Pages of turns from the end until their text holds more than ``budget`` tokens
    (or the session's start)."""
    events: list[Event] = []
    tokens, seq_to, size = 0, None, FIRST_PAGE
    while True:
        got = store.timeline(session_id, last=size, seq_to=seq_to, types=CONVERSATION_TYPES)
        events[:0] = got
        tokens += sum(event_tokens(counter, e) for e in got)
        if len(got) < size:
            return Tail(session_id, events, complete=True, tokens=tokens)
        if tokens > budget:
            return Tail(session_id, events, complete=False, tokens=tokens)
        seq_to = got[0].seq - 1
        size = min(page, size * 2)


def systems_of(store: EventReader, session_id: str) -> list[Event]:
    """The session's system prompts (a first call before maintenance has read them)."""
    return store.timeline(session_id, types=(EventType.SYSTEM_PROMPT,))


class EarlySystems:
    """System prompts of the sessions maintenance has not read yet, for the calls made
    before it has: the first such call reads a session's prompts, the next ones only
    what was stored since and the known ones again by id (so a deleted prompt drops
    out).  Reading a long session's prompts means scanning it: at 100k events that
    was most of such a call."""

    def __init__(self, max_sessions: int = 256) -> None:
        self._seen: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._max = max_sessions
        self._lock = threading.Lock()

    def of(self, store: EventReader, session_id: str, stored_to: int) -> list[Event]:
        """``stored_to``: a seq of the session read before this call (the tail's
        newest): every prompt up to it is stored already."""
        with self._lock:
            known = self._seen.get(session_id)
        if known is None:
            found = systems_of(store, session_id)
        else:
            since, ids = known
            newer = store.timeline(session_id, seq_from=since + 1, types=(EventType.SYSTEM_PROMPT,))
            found = sorted([*store.get(list(ids)), *newer], key=lambda e: e.seq)
        read_to = max([stored_to, *(e.seq for e in found)])
        with self._lock:
            if len(self._seen) >= self._max:
                self._seen.clear()
            self._seen[session_id] = (read_to, tuple(e.id for e in found))
        return found

    def forget(self, session_id: str) -> None:
        """Maintenance has read the session: its snapshot holds the prompts now."""
        if session_id in self._seen:
            with self._lock:
                self._seen.pop(session_id, None)


__all__ = ["TAIL_PAGE", "EarlySystems", "Tail", "event_tokens", "read_tail", "systems_of"]
