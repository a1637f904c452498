"""Which scopes a session's events carry, kept on its ``Session`` node.

``scopes_in(session)`` runs on every assembly (the audit record names the scopes it
read).  Asked of the events, it reads every node of the session; the SQLite store
answers from an index (a loose scan of ``(tenant, session_id, scope)``).  Here the
``Session`` node, which every append locks anyway, keeps the answer:

* ``scopes``: the named scopes (a list of strings), ``unscoped``: whether any event
  has none;
* ``scopes_seq``: the session's ``last_seq`` they were computed for.

They hold only while ``scopes_seq = last_seq``: an append of this BeeWeave extends
them in its transaction, a purge recomputes them; a writer that does not know them
(an older BeeWeave on the same database) moves ``last_seq`` alone, and the read then
falls back to the events until :func:`backfill` (run by ``setup()``, a few sessions
per transaction, so an interrupted upgrade resumes where it stopped) or a later
purge computes them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from beeweave_core.events import Event

#: Sessions whose scopes are computed per write transaction during an upgrade.
SESSIONS_PER_TX = 200

#: Extend each session's scopes by a batch's (appended under the session's lock, its
#: ``x.count`` events took the seqs just below ``last_seq``; scopes computed for
#: another seq than the one before them are not extended but cleared).
CYPHER_NOTE = """
UNWIND $sessions AS x
MATCH (s:Session {tenant: $tenant, id: x.id})
WITH s, x, s.last_seq - x.count AS before
WITH s, x, before = -1 OR s.scopes_seq = before AS valid
SET s.scopes = CASE WHEN valid THEN reduce(acc = coalesce(s.scopes, []), v IN x.scopes |
                 CASE WHEN v IN acc THEN acc ELSE acc + v END) END,
    s.unscoped = CASE WHEN valid THEN coalesce(s.unscoped, false) OR x.unscoped END,
    s.scopes_seq = CASE WHEN valid THEN s.last_seq END
"""
#: Compute them from the events (a purge, an upgrade); the session is locked first.
CYPHER_COMPUTE = """
UNWIND $sessions AS x
MATCH (s:Session {tenant: x.tenant, id: x.id})
SET s._lock = true
REMOVE s._lock
WITH s, x
CALL (x) {
  OPTIONAL MATCH (e:Event {tenant: x.tenant, session_id: x.id})
  WHERE e.seq IS NOT NULL
  RETURN collect(DISTINCT e.scope) AS named, count(e) > count(e.scope) AS unscoped
}
SET s.scopes = named, s.unscoped = unscoped, s.scopes_seq = s.last_seq
"""
#: The kept answer, or nothing when it does not hold (see the module docstring).
CYPHER_READ = """
MATCH (s:Session {tenant: $tenant, id: $session_id})
RETURN s.scopes_seq = s.last_seq AS valid, s.scopes AS scopes, s.unscoped AS unscoped
"""
#: The database-wide mark of an upgrade done (no tenant: ``purge_tenant`` keeps it).
UPGRADE = "session_scopes"
CYPHER_UPGRADED = """
MATCH (u:BeeweaveUpgrade {name: $name})
RETURN count(u) > 0 AS done
"""
CYPHER_MARK_UPGRADED = "MERGE (u:BeeweaveUpgrade {name: $name})"
#: Sessions (of any tenant) whose scopes do not hold.
CYPHER_PENDING = """
MATCH (s:Session)
WHERE ($tenant IS NULL OR s.tenant = $tenant)
  AND (s.scopes_seq IS NULL OR s.scopes_seq <> s.last_seq)
RETURN s.tenant AS tenant, s.id AS id
"""


def note(tx: Any, tenant: str, events: Sequence[Event], *, recount: bool = False) -> None:
    """Extend the scopes of the sessions ``events`` were just appended to (``recount``:
    an import, whose seqs fill in anywhere, computes them from the events instead)."""
    named: dict[str, set[str]] = {}
    unscoped: dict[str, bool] = {}
    count: dict[str, int] = {}
    for ev in events:
        sid = ev.session_id
        count[sid] = count.get(sid, 0) + 1
        named.setdefault(sid, set())
        if ev.scope is None:
            unscoped[sid] = True
        else:
            named[sid].add(ev.scope)
    if recount:
        compute(tx, [(tenant, sid) for sid in sorted(named)])
        return
    sessions = [{"id": sid, "scopes": sorted(found), "unscoped": unscoped.get(sid, False),
                 "count": count[sid]} for sid, found in named.items()]  # fmt: skip
    if sessions:
        tx.run(CYPHER_NOTE, tenant=tenant, sessions=sessions).consume()


def compute(tx: Any, sessions: Sequence[tuple[str, str]]) -> None:
    """Compute the scopes of ``sessions`` ((tenant, id) pairs) from their events."""
    if sessions:
        params = [{"tenant": t, "id": s} for t, s in sessions]
        tx.run(CYPHER_COMPUTE, sessions=params).consume()


def kept(rows: Sequence[Mapping[str, Any]]) -> set[str | None] | None:
    """The scopes a :data:`CYPHER_READ` answer holds (an empty set: no such session),
    or ``None`` when they do not hold (read them from the events)."""
    if not rows:
        return set()
    row = rows[0]
    if not row["valid"]:
        return None
    out: set[str | None] = set(row["scopes"] or ())
    if row["unscoped"]:
        out.add(None)
    return out


def backfill(session: Any) -> int:
    """Once per database: compute the scopes of every session whose scopes do not hold
    (every tenant), a few sessions per transaction, then mark the upgrade done (an
    interrupted one runs again on the next open, over the sessions still pending);
    returns how many sessions were done."""
    if session.run(CYPHER_UPGRADED, name=UPGRADE).single()["done"]:
        return 0
    done = compute_pending(session)
    session.run(CYPHER_MARK_UPGRADED, name=UPGRADE).consume()
    return done


def compute_pending(session: Any, tenant: str | None = None) -> int:
    """Compute the scopes of the sessions (of ``tenant``, or every one) whose scopes do
    not hold, :data:`SESSIONS_PER_TX` per transaction."""
    pending = [(r["tenant"], r["id"]) for r in session.run(CYPHER_PENDING, tenant=tenant)
               if r["tenant"] is not None and r["id"] is not None]  # fmt: skip
    for i in range(0, len(pending), SESSIONS_PER_TX):
        session.execute_write(compute, pending[i : i + SESSIONS_PER_TX])
    return len(pending)
