"""One append transaction written in parts, each part's rows built while the server
creates the part before it.

``tx.run`` returns once the server has the statement (a statement that returns rows
runs as they are pulled, and the driver asks for them in the same message), so the
append builds the next part's rows and full-text terms (most of the client's time
per event) while the server creates this part's events, and waits for the part's
answer only to place the next one: the client's Python and the server's work
overlap instead of taking turns, on the caller's thread.

A part's statement reaches the events of the same part by position (``near``),
those of earlier parts by the element ids their statements returned (``far``: no
index seek, no lock), stored ones by seek (``seek``); an edge to an event of a
later part is drawn once that one exists (``late``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beeweave_core.backends.neo4j import session_scopes, user_sessions
from beeweave_core.backends.neo4j import terms as event_terms
from beeweave_core.events import AppendResult, Edge, EdgeType
from beeweave_core.store import Prepared
from beeweave_core.text.lucene import Turn

#: Events per ``CREATE`` statement of a big append: small enough that the first part
#: is soon built, big enough that a statement's round trip is spread over many events.
PART_EVENTS = 250

#: An event's row (see ``Neo4jEventStore._row``).
Row = dict[str, Any]


def split(prepared: list[Prepared], whole: bool) -> list[list[Prepared]]:
    """The parts an append is written in: one unless it is big (``whole``: an import,
    which fills seqs in and recomputes its sessions' terms after, is one part)."""
    if whole or len(prepared) <= PART_EVENTS:
        return [prepared]
    return [prepared[i : i + PART_EVENTS] for i in range(0, len(prepared), PART_EVENTS)]


@dataclass
class Placement:
    """What one append transaction has placed so far: per session its last seq, the
    NEXT predecessor of its next event and its terms context; placeholders to fill
    in and edges to events of a later part, both written once every part exists."""

    last: dict[str, int]
    prev: dict[str, str | None]
    context: dict[str, str]
    #: Ids of this append already in the graph: stored (True) or placeholders (False).
    found: dict[str, bool]
    #: Ids of new events of this append that no part has created yet.
    unstored: set[str]
    keep_seq: bool
    result: AppendResult = field(default_factory=AppendResult)
    placed: list[Row] = field(default_factory=list)  # new and filled-in rows, in order
    placeholders: list[Row] = field(default_factory=list)
    late: list[Edge] = field(default_factory=list)
    #: Element ids of the events earlier parts created, by event id.
    made: dict[str, str] = field(default_factory=dict)

    @classmethod
    def begin(
        cls,
        begun: list[dict[str, Any]],
        found: dict[str, bool],
        prepared: list[Prepared],
        keep_seq: bool,
    ) -> Placement:
        """From CYPHER_BEGIN_APPEND's sessions and which of the ids exist."""
        return cls(
            last={x["sid"]: x["last_seq"] for x in begun},
            prev={x["sid"]: x["tail"] for x in begun},
            context=event_terms.contexts(begun),
            found=found,
            unstored={p.event.id for p in prepared if p.event.id not in found},
            keep_seq=keep_seq,
        )

    def place(
        self, part: list[Prepared], rows: list[Row], turns: dict[str, Turn] | None
    ) -> dict[str, Any]:
        """Give a part's events their seq, predecessor and terms (``turns`` None: an
        import's, computed after); returns CYPHER_CREATE_EVENTS's ``rows`` (the new
        events) and their edges (see :meth:`_refer`)."""
        new: list[Row] = []
        ordered: list[Row] = []
        for p, row in zip(part, rows, strict=True):
            ev = p.event
            if self.found.get(ev.id):
                self.result.duplicates += 1
                continue
            sid = ev.session_id
            if self.keep_seq:
                seq, before = ev.seq, None  # NEXT by seq neighbours, after
                self.last[sid] = max(self.last[sid], seq)
            else:
                seq = self.last[sid] = self.last[sid] + 1
                before, self.prev[sid] = self.prev[sid], ev.id
            row["props"]["seq"], row["prev"] = seq, before
            (self.placeholders if ev.id in self.found else new).append(row)
            ordered.append(row)
            self.result.ids.append(ev.id)
        if turns is not None:
            self.context.update(event_terms.fill(ordered, self.context, turns))
        self.placed += ordered
        self.unstored.difference_update(r["props"]["id"] for r in new)
        return self._refer(new)

    def created(self, rows: list[Row], element_ids: list[str]) -> None:
        """Keep the element ids CYPHER_CREATE_EVENTS returned for ``rows``."""
        self.made.update(zip((r["props"]["id"] for r in rows), element_ids, strict=True))

    def _refer(self, rows: list[Row]) -> dict[str, Any]:
        """CYPHER_CREATE_EVENTS's parameters for a part's new rows: each edge and
        predecessor by position in the part, by element id in an earlier part, by id
        otherwise; an edge to an event of a later part is set aside (``late``)."""
        at = {r["props"]["id"]: i for i, r in enumerate(rows)}
        by: dict[str, dict[str, list[list[int | str]]]] = {"near": {}, "far": {}, "seek": {}}
        nexts: dict[str, list[list[int | str]]] = {"next_near": [], "next_far": [], "next_seek": []}
        for i, r in enumerate(rows):
            if (p := r["prev"]) in at:
                nexts["next_near"].append([at[p], i])
            elif p in self.made:
                nexts["next_far"].append([self.made[p], i])
            elif p is not None:
                nexts["next_seek"].append([p, i])
            for etype, targets in r["edges"].items():
                for d in targets:
                    if d in at:
                        by["near"].setdefault(etype, []).append([i, at[d]])
                    elif d in self.made:
                        by["far"].setdefault(etype, []).append([i, self.made[d]])
                    elif d in self.unstored:
                        self.late.append(Edge(src=r["props"]["id"], dst=d, type=EdgeType(etype)))
                    else:
                        by["seek"].setdefault(etype, []).append([i, d])
        created = [{"props": r["props"], "label": r["label"]} for r in rows]
        return {"rows": created, **by, **nexts}

    def sessions(self) -> list[dict[str, Any]]:
        """The append's ``$sessions``: per session its new ``last_seq``, the scopes and
        the users of its new events, and (an append's, not an import's: its terms are
        recomputed) its ``context_terms`` after them."""
        written = set() if self.keep_seq else {r["props"]["session_id"] for r in self.placed}
        users = user_sessions.users_by_session(self.placed)
        return [
            {
                **x,
                "context": self.context[x["id"]] if x["id"] in written else None,
                "users": users.get(x["id"]),
            }
            for x in session_scopes.sessions_param(self.last, self.placed)
        ]
