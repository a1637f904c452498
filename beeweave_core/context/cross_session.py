"""What recall reads of the user's other sessions, at a cost that does not grow with them.

Reading every memory of the user's twenty most recent other sessions on each call
(and their session stats, a count over every event of the user) made a call in a
short session cost in proportion to the user's whole history: 5 s per call with 50k
events in the other sessions.  Instead the user's recent sessions come from an index
(``store.recent_user_sessions``: a seek per session), and each of them is read through
a recall view (:meth:`Views.other`) that folds in only the memories and summaries
stored since the call before, with a term index over them.  A call then takes from
each session only bounded candidates: the memories sharing the most query terms, the
newest of each kind (what the kind prior can still bring in with no word in common),
the newest lines of its newest top summaries and the older lines sharing query terms.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from beeweave_core.context.memory import MemoryWriter
from beeweave_core.context.recall import SUMMARY_LINES, OtherSession
from beeweave_core.context.session_view import SessionView, Views
from beeweave_core.events import Event
from beeweave_core.store import EventStore

#: How many of a user's other sessions recall reads (the most recently active).
OTHER_SESSIONS = 20
#: Memories per other session sharing the most query terms.
MATCHING_MEMORIES = 24
#: Newest memories per kind per other session, offered on their kind's prior alone.
NEWEST_PER_KIND = 8
#: Newest top summaries per other session whose newest lines are offered.
NEWEST_SUMMARIES = 2

#: memories -> the ids of those that are dormant (governance/dormancy.py)
Asleep = Callable[[Sequence[Event]], Collection[str]]


class OtherSessions:
    """Recall candidates from a user's other recent sessions, read incrementally."""

    def __init__(self, store: EventStore, views: Views, memory: MemoryWriter, asleep: Asleep):
        self.store = store
        self.views = views
        self.memory = memory
        self.asleep = asleep

    def read(
        self, session_id: str, user_id: str | None, terms: frozenset[str], write: bool = True
    ) -> list[OtherSession]:
        """Candidates of ``user_id``'s other recent sessions for a query of ``terms``
        (``write``: memories of a session changed since the last call are caught up
        first, as for a session imported or written by another process)."""
        if not user_id:
            return []
        out = []
        for sid, last in self.store.recent_user_sessions(user_id, OTHER_SESSIONS + 1):
            if sid == session_id:
                continue
            changed = self.views.other_cursor(sid) < last
            if write and changed:
                self.memory.process(sid, use_llm=False)
            with self.views.lock:
                view = self.views.other(sid, last, read_new=write and changed)
                found = _candidates(view, terms)
            asleep = self.asleep(found.memories)
            if asleep:
                found.memories = [m for m in found.memories if m.id not in asleep]
            if found.memories or found.summaries or found.lines:
                out.append(found)
        return out[:OTHER_SESSIONS]


def _candidates(view: SessionView, terms: frozenset[str]) -> OtherSession:
    """A session's bounded share of the candidates (the caller holds the views' lock)."""
    ids = dict.fromkeys(view.memories_matching(terms, MATCHING_MEMORIES))
    for kind in view.kinds:
        ids.update(dict.fromkeys(m.id for m in view.newest_memories(NEWEST_PER_KIND, kind)))
    memories = sorted((view.memories[i] for i in ids), key=lambda m: m.seq)
    tops = [s for s in view.tops() if s.content]
    older = {s.id for s in tops[:-NEWEST_SUMMARIES]}
    lines = view.lines_matching(terms, older, SUMMARY_LINES) if older and terms else []
    return OtherSession(view.session_id, memories, tops[-NEWEST_SUMMARIES:], lines)
