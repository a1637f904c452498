"""Which scopes a session's events carry, kept on its ``Session`` node.

``scopes_in(session)`` runs on every assembly (the audit record names the scopes it
read).  Asked of the events, it reads every node of the session; the SQLite store
answers from an index (a loose scan of ``(tenant, session_id, scope)``).  Here the
``Session`` node, which every append locks and updates anyway, keeps the answer:

* ``scopes``: the named scopes (a list of strings), ``unscoped``: whether any event
  has none;
* ``scopes_seq``: the session's ``last_seq`` they were computed for.

They hold only while ``scopes_seq = last_seq``: an append of this BeeWeave extends
them in the statement that moves ``last_seq`` (:data:`EXTEND`, no extra round trip), a
purge recomputes them; a writer that does not know them (an older BeeWeave on the same
database) moves ``last_seq`` alone, and the read then falls back to the events until
:func:`backfill` (run once per database by ``setup()``, a few sessions per
transaction, so an interrupted upgrade resumes where it stopped) or a later purge
computes them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Sessions whose scopes are computed per write transaction during an upgrade.
SESSIONS_PER_TX = 200

#: Part of the append's ``last_seq`` update (``x``: one of its sessions, with the
#: batch's ``scopes`` and ``unscoped``; ``s.last_seq`` still the one before the batch):
#: extends the scopes by the batch's when they held (or the session is new), clears
#: them when they did not (a union with a partial answer would look whole).
EXTEND = """
WITH s, x, s.last_seq = -1 OR s.scopes_seq = s.last_seq AS held
SET s.scopes = CASE WHEN held THEN reduce(acc = coalesce(s.scopes, []),
                 v IN coalesce(x.scopes, []) | CASE WHEN v IN acc THEN acc ELSE acc + v END) END,
    s.unscoped = CASE WHEN held THEN coalesce(s.unscoped, false) OR coalesce(x.unscoped, false) END,
    s.scopes_seq = CASE WHEN held THEN x.last_seq END
WITH s, x
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


def sessions_param(
    last: Mapping[str, int], rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The append's ``$sessions``: each session's new ``last_seq`` and the scopes of the
    events the batch stores there (``rows``: its ``_row`` maps)."""
    named: dict[str, set[str]] = {sid: set() for sid in last}
    unscoped: set[str] = set()
    for r in rows:
        sid, scope = r["props"]["session_id"], r["props"].get("scope")
        if scope is None:
            unscoped.add(sid)
        else:
            named[sid].add(scope)
    return [
        {"id": sid, "last_seq": n, "scopes": sorted(named[sid]), "unscoped": sid in unscoped}
        for sid, n in last.items()
    ]


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
    pending = [
        (r["tenant"], r["id"])
        for r in session.run(CYPHER_PENDING, tenant=tenant)
        if r["tenant"] is not None and r["id"] is not None
    ]
    for i in range(0, len(pending), SESSIONS_PER_TX):
        session.execute_write(compute, pending[i : i + SESSIONS_PER_TX])
    return len(pending)
