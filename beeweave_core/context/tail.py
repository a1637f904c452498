"""The newest turns of a session, read without the rest: what a call answers from while
the session's full view is built in the background.

A first call on a long session the engine has no view of (written by another process,
imported, or the process restarted) would otherwise read every stored event before it
answers: 6.6 s at 100k events.  Instead the call reads pages from the end until they
hold more tokens than the budget, and assembles from those: the system prompts, the
newest turns, and supersession among them (a setting stated again inside the tail with
another value keeps only the newer one, by the slot comparison the memory writer uses).

The answer is weaker than the full one, never wrong: no long-term memories, summaries,
working-state memories or recall of older turns until the view is ready, so nothing the
tail does not hold reaches the model, and no wording the tail itself overturned.  (An
explicit cancellation without a new value, "cancel that", is applied by the memory
writer once the catch-up has read it; until then the tail shows it as it was said, as a
plain buffer would.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from beeweave_core.context.memory import statement_sentences
from beeweave_core.context.session_view import SessionView
from beeweave_core.context.supersession import SlotIndex, parse
from beeweave_core.events import Event, EventType
from beeweave_core.store import EventStore
from beeweave_core.text.statements import Setting
from beeweave_core.tokens import TokenCounter

#: Events read per page from the end of the session.
TAIL_PAGE = 256
#: Turns whose parsed statements are kept between calls.
PARSED_TURNS = 4_096
#: What a tail holds besides the system prompts (read apart: they open the session).
_TURNS = (
    EventType.USER_MESSAGE,
    EventType.ASSISTANT_MESSAGE,
    EventType.TOOL_INVOCATION,
    EventType.TOOL_RESULT,
)
_ROLES = {EventType.USER_MESSAGE: "user", EventType.ASSISTANT_MESSAGE: "assistant"}


@dataclass
class Tail:
    """The newest turns of a session (active events, oldest first)."""

    session_id: str
    events: list[Event]
    #: the tail reaches the session's first turn (nothing was left unread)
    complete: bool

    @property
    def first_seq(self) -> int:
        return self.events[0].seq if self.events else -1

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else -1


def read_tail(
    store: EventStore, session_id: str, budget: int, counter: TokenCounter, page: int = TAIL_PAGE
) -> Tail:
    """Pages of turns from the end until their text holds more than ``budget`` tokens
    (or the session's start): the reads follow the budget, not the session."""
    events: list[Event] = []
    tokens, seq_to = 0, None
    while True:
        got = store.timeline(session_id, last=page, seq_to=seq_to, types=_TURNS)
        events[:0] = got
        if len(got) < page:
            return Tail(session_id, events, complete=True)
        tokens += sum(counter.count_text(e.content or "") for e in got)
        if tokens > budget:
            return Tail(session_id, events, complete=False)
        seq_to = got[0].seq - 1


def overturned_in(events: Sequence[Event]) -> list[tuple[str, str]]:
    """(event id, wording) of statements a later turn of ``events`` gave another value
    (rules only, as the memory writer's slot index decides without a judge)."""
    index = SlotIndex()
    said: dict[str, tuple[str, str]] = {}
    out: list[tuple[str, str]] = []
    for ev in events:
        role = _ROLES.get(ev.type)
        if role is None:
            continue
        for n, (sentence, found) in enumerate(_statements(ev.content or "", role)):
            key = f"{ev.id}#{n}"
            said[key] = (ev.id, sentence)
            # only a user's statement overturns (as in the memory writer)
            gone = index.observe(key, sentence, ev.seq, supersede=role == "user", found=found)
            out += [said[k] for k in gone]
    return out


@lru_cache(maxsize=PARSED_TURNS)
def _statements(text: str, role: str) -> tuple[tuple[str, tuple[Setting, ...]], ...]:
    """A turn's statements with their settings (kept: while a session catches up, each
    call reads its tail again, and the turns it parses are mostly the last call's)."""
    return tuple((s, parse(s)) for s in statement_sentences(text, role))


def tail_view(store: EventStore, tail: Tail) -> SessionView:
    """A view of the tail alone (with the session's system prompts), what a call
    assembles from while the full view is being built."""
    systems = store.timeline(tail.session_id, types=(EventType.SYSTEM_PROMPT,))
    events = tail.events
    first_user = next((i for i, e in enumerate(events) if e.type == EventType.USER_MESSAGE), 0)
    view = SessionView(tail.session_id)  # the turns from a user's (no orphaned tool result)
    view.fold(sorted([*systems, *events[first_user:]], key=lambda e: e.seq))
    view.overturn(overturned_in(events))
    return view
