"""Each event's ``terms``: the text the Neo4j full-text index ranks.

An event's terms hold its own tokens and its previous turn's (what a reply
answers), as the SQLite store's ``events_fts`` row does (see
:func:`beeweave_core.text.lucene.session_terms`).  Appends compute them from the
batch and the session's ``context_terms`` (the tokens of its last content, kept on
the session node, so no append reads stored text); this module recomputes both
for whole sessions when the order they depend on changed (an import filling seqs
in, a purge of single events) or when an older database has none (``setup()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from beeweave_core.backends.neo4j import events_cypher as q
from beeweave_core.text.lucene import Turn, context_terms, session_terms, turn_tokens

#: Sessions whose terms are recomputed per write transaction during an upgrade.
SESSIONS_PER_TX = 200


def contexts(sessions: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each session's ``context_terms`` from CYPHER_BEGIN_APPEND's rows; a session
    an older BeeWeave wrote has none yet, but the start of its last content."""
    return {
        x["sid"]: x["context"] if x["context"] is not None else context_terms(x["before"] or "")
        for x in sessions
    }


def fill(
    rows: Sequence[dict[str, Any]], context: dict[str, str], turns: dict[str, Turn]
) -> dict[str, str]:
    """Set ``props.terms`` of new event rows (``_row`` maps, in session order).

    ``context``: per session, its ``context_terms`` before the batch; ``turns``: per
    event id, its :func:`~beeweave_core.text.lucene.turn_tokens`.  Returns the
    sessions' ``context_terms`` after the batch (for the sessions of ``rows``).
    """
    by_session: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_session.setdefault(r["props"]["session_id"], []).append(r)
    after = {}
    for sid, mine in by_session.items():
        mine_turns = [turns[r["props"]["id"]] for r in mine]
        terms, after[sid] = session_terms(mine_turns, context.get(sid, ""))
        for r, t in zip(mine, terms, strict=True):
            r["props"]["terms"] = t
    return after


def refresh(tx: Any, sessions: Sequence[tuple[str, str]]) -> int:
    """Recompute the terms of every stored event of ``sessions`` ((tenant, id) pairs)
    and their ``context_terms``."""
    if not sessions:
        return 0
    params = [{"tenant": t, "id": s} for t, s in sessions]
    found = list(tx.run(q.CYPHER_GET_SESSION_TEXTS, sessions=params))
    rows: list[dict[str, Any]] = []
    after = {(t, s): "" for t, s in sessions}
    for (tenant, sid), group in groupby(found, key=lambda r: (r["tenant"], r["sid"])):
        events = list(group)
        turns = turn_tokens([r["content"] or "" for r in events])
        terms, after[tenant, sid] = session_terms(turns)
        rows += [
            {"tenant": tenant, "id": r["id"], "terms": t}
            for r, t in zip(events, terms, strict=True)
        ]
    done = [{"tenant": t, "id": s, "context": c} for (t, s), c in after.items()]
    tx.run(q.CYPHER_SET_TERMS, rows=rows, sessions=done).consume()
    return len(rows)


def backfill(session: Any) -> int:
    """Give terms to the events an older BeeWeave stored (every tenant), a few
    sessions per transaction, so an interrupted upgrade resumes where it stopped."""
    pending = [
        (r["tenant"], r["id"])
        for r in session.run(q.CYPHER_GET_SESSIONS_WITHOUT_TERMS)
        if r["tenant"] is not None and r["id"] is not None
    ]
    done = 0
    for i in range(0, len(pending), SESSIONS_PER_TX):
        part = pending[i : i + SESSIONS_PER_TX]
        done += session.execute_write(refresh, part)
    return done
