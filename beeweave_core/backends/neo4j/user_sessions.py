"""Which sessions a user took part in, as ``UserSession`` nodes a read can seek.

Every assembly with a user id asks for the user's recent conversations
(``recent_user_sessions``, cross-session recall).  The SQLite store answers with a
loose scan of its ``(tenant, user_id, session_id)`` index, one seek per session of the
user; Cypher has no loose scan, so asking the events means reading every event of the
user, and asking the ``Session`` nodes means a seek per session of the tenant.  Here a
``(:UserSession {tenant, user_id, session_id})`` node per pair answers with one seek per
session of the user:

* an append MERGEs the pairs of its batch in the statement that moves the sessions'
  ``last_seq`` (:data:`MERGE_PAIRS`, no extra round trip), only for users the
  ``Session`` node (locked by the append anyway) does not list in ``user_ids`` yet;
* a purge computes the pairs of the sessions it touched from their remaining events
  (:data:`CYPHER_COMPUTE`), so a purged user's id does not stay behind;
* a database an older BeeWeave wrote gets them once, from its events
  (:func:`backfill`, run by ``setup()``).

A pair only says where to look: the read still seeks an event of the user in the
session, in the reader's scopes, before it lists the session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Part of the append's per-session update (``s`` locked, ``x``: one of its sessions,
#: with the distinct ``users`` of the batch's events there).
MERGE_PAIRS = """
WITH s, x, [u IN coalesce(x.users, []) WHERE NOT u IN coalesce(s.user_ids, [])] AS new
FOREACH (u IN new | MERGE (:UserSession {tenant: $tenant, user_id: u, session_id: x.id}))
FOREACH (_ IN CASE WHEN size(new) > 0 THEN [1] ELSE [] END |
  SET s.user_ids = coalesce(s.user_ids, []) + new)
"""
#: The pairs of some sessions (``$sessions``: tenant, id) from their stored events;
#: the sessions are locked by the purge that calls it.
CYPHER_COMPUTE = """
UNWIND $sessions AS x
OPTIONAL MATCH (s:Session {tenant: x.tenant, id: x.id})
CALL (x) {
  MATCH (p:UserSession {tenant: x.tenant, session_id: x.id})
  DELETE p
}
CALL (x, s) {
  OPTIONAL MATCH (e:Event {tenant: x.tenant, session_id: x.id})
  WHERE e.seq IS NOT NULL AND e.user_id IS NOT NULL
  WITH x, s, collect(DISTINCT e.user_id) AS users
  FOREACH (u IN users | MERGE (:UserSession {tenant: x.tenant, user_id: u, session_id: x.id}))
  FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END | SET s.user_ids = users)
}
"""
#: The database-wide mark of the upgrade (see session_scopes: same node label).
UPGRADE = "user_sessions"
#: Pairs of every tenant from its events (one pass over every event, once per database),
#: 2,000 pairs per transaction; ``Session.user_ids`` is not set: an append MERGEs again.
CYPHER_BACKFILL = """
MATCH (e:Event)
WHERE e.user_id IS NOT NULL AND e.session_id IS NOT NULL AND e.seq IS NOT NULL
WITH DISTINCT e.tenant AS t, e.user_id AS u, e.session_id AS sid
CALL (t, u, sid) {
  MERGE (:UserSession {tenant: t, user_id: u, session_id: sid})
} IN TRANSACTIONS OF 2000 ROWS
"""


def users_by_session(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The distinct user ids of an append's event rows (``_row`` maps), per session."""
    out: dict[str, dict[str, None]] = {}
    for r in rows:
        user = r["props"].get("user_id")
        if user is not None:
            out.setdefault(r["props"]["session_id"], {})[user] = None
    return {sid: list(users) for sid, users in out.items()}


def compute(tx: Any, sessions: Iterable[tuple[str, str]]) -> None:
    """Compute the pairs of ``sessions`` ((tenant, id)) from their remaining events."""
    params = [{"tenant": t, "id": s} for t, s in sessions]
    if params:
        tx.run(CYPHER_COMPUTE, sessions=params).consume()


def backfill(session: Any, upgraded: str, mark: str) -> bool:
    """Once per database: the pairs of every stored event (an interrupted run is
    resumed by the next open: MERGE keeps what is there).  ``upgraded``/``mark``: the
    statements asking for and setting the upgrade mark.  Whether it ran."""
    if session.run(upgraded, name=UPGRADE).single()["done"]:
        return False
    session.run(CYPHER_BACKFILL).consume()
    session.run(mark, name=UPGRADE).consume()
    return True
