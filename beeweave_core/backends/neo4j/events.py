"""The production home of the event graph: Neo4j (server, cluster or Aura).

Events are ``(:Event:<Type>)`` nodes, the session order is a materialised ``NEXT``
chain, causal and reference links are typed relationships, and big values are
``(:Artifact)`` nodes (the model is spelt out in :mod:`.neo4j_cypher`).

Writes are one managed write transaction per ``append`` (``execute_write``, so the
driver retries deadlocks and leader changes), batched with ``UNWIND``.  The
session's ``seq`` comes from a ``(:Session)`` node locked inside that transaction:
writers to one session queue on the lock, so the order never forks and never has
gaps, and a uniqueness constraint on (tenant, session_id, seq) makes a fork
impossible even for a writer that does not take the lock.  Under that lock the
store looks up which ids are already stored (redeliveries: counted, not
rewritten) and ``CREATE``s the rest, which costs less than ``MERGE`` per event; the
uniqueness constraint on (tenant, id) catches the one race the lock cannot (the
same id sent to two sessions at once), and the append is retried, finding it
stored.  Edges and placeholders use ``MERGE``.  Reads are managed read transactions
(routed to readers on a cluster); every session shares the driver's bookmark
manager (:mod:`beeweave_core.backends.neo4j.tx`), so a read always sees the writes made
before it, also on a cluster.

Needs Neo4j 5.26 LTS or newer (dynamic labels and ``ANY SHORTEST``); community
edition is enough.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from beeweave_core import tombstones
from beeweave_core.backends.neo4j import events_cypher as q
from beeweave_core.backends.neo4j import parts as append_parts
from beeweave_core.backends.neo4j import session_scopes, user_sessions
from beeweave_core.backends.neo4j import terms as event_terms
from beeweave_core.backends.neo4j import tx as neo4j_tx
from beeweave_core.backends.neo4j.auth import AuthSpec, driver_auth
from beeweave_core.errors import shown
from beeweave_core.events import (
    TYPE_LABELS,
    AppendResult,
    Edge,
    EdgeType,
    Event,
    EventType,
    SessionStats,
    Status,
)
from beeweave_core.fallback import cause
from beeweave_core.payloads import dumps
from beeweave_core.scopes import Readable, narrow, refuse_artifact
from beeweave_core.store import (
    BaseEventStore,
    Prepared,
    StoreError,
    TokenCount,
    default_token_count,
)
from beeweave_core.text import lucene
from beeweave_core.text.lexical import CONTEXT_CHARS
from beeweave_core.text.lucene import Turn

#: Events per write transaction; a bigger ``append`` is split (each chunk atomic).
DEFAULT_WRITE_BATCH = 2_000
#: Seconds to wait for a server before saying it is unreachable (``connect_timeout=``).
DEFAULT_CONNECT_TIMEOUT = 5.0
#: ``tokens`` of an event whose content has not been counted yet (see _count_tokens).
TOKENS_UNCOUNTED = -1

#: A scope of at most this many sessions is narrowed inside the full-text index
#: (one Lucene clause each, far below its 1024-clause limit); a larger one is
#: filtered after the match, with the candidate count raised until k are found.
LUCENE_SESSIONS = 256


def _scalar(value: Any) -> Any:
    """A meta value as a Neo4j property (maps/lists become their JSON text)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return dumps(value)


def _to_event(tenant: str, m: dict[str, Any]) -> Event:
    return Event.model_construct(
        id=m["id"],
        tenant=tenant,
        session_id=m["session_id"],
        seq=m["seq"],
        type=EventType(m["type"]),
        role=m["role"],
        content=m["content"] if m["content"] is not None else "",
        payload=json.loads(m["payload"]),
        ts=m["ts"],
        parents=tuple(json.loads(m["parents"])),
        links={EdgeType(k): tuple(v) for k, v in json.loads(m["links"]).items()},
        meta=json.loads(m["meta"]),
        source=json.loads(m["source"]),
        status=Status(m["status"]),
        status_reason=m["status_reason"],
    )


def _artifact_refs(payload: dict[str, Any]) -> list[str]:
    """SHA-256s of the artifacts an event's payload points to."""
    refs = (payload.get("$artifact"), payload.get("$payload_artifact"))
    return [r["sha256"] for r in refs if isinstance(r, dict) and "sha256" in r]


def _found(tx: Any, tenant: str, ids: list[str]) -> dict[str, bool]:
    """Which of ``ids`` exist, each as stored (True) or a placeholder (False)."""
    rows = tx.run(q.CYPHER_FIND_IDS, tenant=tenant, ids=ids).single()["found"]
    return {x["id"]: x["stored"] for x in rows}


def _edge_types(types: Iterable[EdgeType | str]) -> list[str]:
    """Relationship types as fixed enum values (never user text)."""
    return [EdgeType(t).value for t in types]


def _run(tx: Any, query: str, params: dict[str, Any]) -> Any:
    """One statement as a transaction function (returns its summary)."""
    return tx.run(query, params).consume()


def _merge_edges(tx: Any, tenant: str, edges: Sequence[Edge]) -> int:
    """MERGE typed edges (one statement per type); returns how many were new."""
    by_type: dict[EdgeType, list[dict[str, str]]] = {}
    for e in edges:
        meta = dumps(e.meta) if e.meta else "{}"
        by_type.setdefault(e.type, []).append({"src": e.src, "dst": e.dst, "meta": meta})
    created = 0
    for etype, rows in by_type.items():
        summary = tx.run(q.CYPHER_MERGE_EDGES[etype], tenant=tenant, edges=rows).consume()
        created += summary.counters.relationships_created
    return created


#: Event properties often null, which a row leaves out (``seq`` is set later).
_OPTIONAL_PROPS = ("role", "user_id", "agent_id", "scope", "status_reason")

#: Driver settings BeeWeave sets unless given (seconds); pass your own to override.
DRIVER_TIMEOUTS = {
    "connection_acquisition_timeout": 5.0,
    "max_transaction_retry_time": 5.0,
}


def quiet_driver_log() -> None:
    """Keep the driver's log off stderr unless the host configured logging.

    With no handler anywhere, Python prints a library's warnings itself, so an
    unreachable server printed driver lines ("Unable to retrieve routing information",
    "Transaction failed and will be retried") beside BeeWeave's own one-line report.  A
    ``NullHandler`` on the driver's logger stops that; records still reach the host's
    handlers through propagation.
    """
    driver_log = logging.getLogger("neo4j")
    if not any(isinstance(h, logging.NullHandler) for h in driver_log.handlers):
        driver_log.addHandler(logging.NullHandler())


class Neo4jEventStore(BaseEventStore):
    """Event graph in Neo4j; one object per tenant, sharing one driver.

    ``url`` is any Neo4j URI (``bolt://``, ``neo4j://`` for routing, ``+s``/``+ssc``
    for TLS, Aura).  Pass ``driver=`` to reuse a driver you own (it is then not
    closed by :meth:`close`).  Other BeeWeave parts reuse :attr:`driver` and
    :attr:`database` (checkpoints, the vector index).
    """

    #: An append is a transaction of four or five round trips and a commit (~10 ms on
    #: a small server) whatever its size: the capture bus writes at most four a second
    #: in the background, so a chatty agent's own calls rarely wait behind one.
    write_interval: float = 0.25

    def __init__(
        self,
        url: str | None = None,
        *,
        tenant: str = "default",
        auth: AuthSpec = None,
        database: str | None = None,
        driver: Any = None,
        token_count: TokenCount | None = None,
        write_batch: int = DEFAULT_WRITE_BATCH,
        setup: bool = True,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        scopes: Readable = None,
        **driver_kw: Any,
    ) -> None:
        if not isinstance(tenant, str) or not tenant:
            raise ValueError("tenant must be a non-empty string")
        self.scopes = narrow(None, scopes)
        if driver is None and not url:
            raise ValueError("Neo4jEventStore needs a url (bolt://…, neo4j://…) or a driver")
        self.tenant = tenant
        self.url = url
        self.database = database
        self.write_batch = int(write_batch)
        self._token_count = token_count or default_token_count
        if driver is not None:
            self.driver = driver
            self._owner = False
        else:
            import neo4j

            quiet_driver_log()
            # bounded waits (driver defaults: 30 s retry, 60 s pool): a server that does not
            # answer is reported in seconds, and the capture bus keeps spooling meanwhile
            driver_kw.setdefault("connection_timeout", connect_timeout)
            for option, seconds in DRIVER_TIMEOUTS.items():
                driver_kw.setdefault(option, seconds)
            self.driver = neo4j.GraphDatabase.driver(url, auth=driver_auth(auth), **driver_kw)
            self._owner = True
        try:
            if setup:
                self._check_reachable(connect_timeout)
                self.setup()
        except BaseException:
            self.close()
            raise

    def _check_reachable(self, timeout: float) -> None:
        """Fail in about ``timeout`` seconds with one line when no server answers.

        Without this the first query would sit in the driver's retry loop for ~30 s
        per attempt, and a CLI user would wait a minute for a wrong port.
        """
        import neo4j.exceptions as nx

        try:
            self.driver.verify_connectivity()
        except nx.AuthError as exc:
            raise StoreError(
                f"Neo4j at {shown(self.url)} refused the credentials ({cause(exc)}): check "
                "auth= / --auth / NEO4J_AUTH (user:password)"
            ) from None
        except (nx.ServiceUnavailable, OSError) as exc:
            reason = " ".join(str(exc).split())[:120] or type(exc).__name__
            raise StoreError(
                f"Neo4j at {shown(self.url)} is not reachable (waited up to {timeout:g} s): "
                f"{reason}"
            ) from None

    def for_tenant(self, tenant: str) -> Neo4jEventStore:
        """A view scoped to another tenant on the same driver (not closed by the view)."""
        return Neo4jEventStore(
            self.url,
            tenant=tenant,
            database=self.database,
            driver=self.driver,
            token_count=self._token_count,
            write_batch=self.write_batch,
            setup=False,
            scopes=self.scopes,
        )

    def for_scopes(self, scopes: Readable) -> Neo4jEventStore:
        """A view of the same tenant that reads and writes only ``scopes`` (never wider)."""
        view = self.for_tenant(self.tenant)
        view.scopes = narrow(self.scopes, scopes)
        return view

    def _scopes_of(self, ids: list[str]) -> dict[str, str | None]:
        rows = self._read(q.CYPHER_GET_SCOPES_OF_IDS, ids=ids)
        return {r["id"]: r["scope"] for r in rows}

    def _session_scopes(self, session_id: str) -> set[str | None]:
        # kept on the Session node (see session_scopes.py); from the events otherwise
        found = session_scopes.kept(self._read(session_scopes.CYPHER_READ, session_id=session_id))
        if found is not None:
            return found
        rows = self._read(q.CYPHER_GET_SCOPES_OF_SESSION, session_id=session_id)
        return {r["scope"] for r in rows}

    def close(self) -> None:
        if self._owner:
            self.driver.close()

    # ------------------------------------------------------------- plumbing
    def _read(self, query: str, **params: Any) -> list[Any]:
        scopes = None if self.scopes is None else sorted(self.scopes)
        return neo4j_tx.run(
            self.driver,
            self.database,
            query,
            {"tenant": self.tenant, "scopes": scopes, **params},
            read=True,
        )

    def _write(self, work: Any, *args: Any) -> Any:
        """Run ``work(tx, *args)`` in a managed write transaction (retried on
        transient errors, so ``work`` must not keep state between attempts)."""
        with neo4j_tx.session(self.driver, self.database) as session:
            return session.execute_write(work, *args)

    def setup(self) -> None:
        """Create constraints and indexes if missing; safe to call any number of times."""
        (rec,) = self._read(q.CYPHER_GET_SERVER_VERSION)
        version = tuple(int(x) for x in re.findall(r"\d+", rec["version"])[:2])
        if version < q.MIN_SERVER_VERSION:
            raise StoreError(
                f"Neo4j {rec['version']} is too old: BeeWeave needs "
                f"{'.'.join(map(str, q.MIN_SERVER_VERSION))} or newer (dynamic labels, "
                "ANY SHORTEST paths)"
            )
        import neo4j.exceptions as nx

        if not self._drop_outdated_text_index():
            # events an older version stored have no terms: give them theirs before
            # the index is built, so it holds every event from the start
            with neo4j_tx.session(self.driver, self.database) as session:
                event_terms.backfill(session)
        with neo4j_tx.session(self.driver, self.database) as session:
            session_scopes.backfill(session)  # sessions an older BeeWeave wrote
            user_sessions.backfill(
                session, session_scopes.CYPHER_UPGRADED, session_scopes.CYPHER_MARK_UPGRADED
            )
        for statement in q.SCHEMA_STATEMENTS:
            try:
                self.driver.execute_query(statement, database_=self.database)
            except nx.ClientError as exc:  # another process created it a moment ago
                if not (exc.code or "").endswith("AlreadyExists"):
                    raise
        for name in q.AWAITED_INDEXES:
            self.driver.execute_query(
                q.CYPHER_AWAIT_INDEX, {"name": name, "seconds": 300}, database_=self.database
            )

    def _drop_outdated_text_index(self) -> bool:
        """Drop an older BeeWeave's indexes and a full-text one made with other settings
        (a synchronous one, another analyzer); setup then builds it anew, once.
        Whether the current index is there (and kept).

        ``CREATE … IF NOT EXISTS`` alone would keep the old index whatever its
        options: a database created before would never get the new settings.
        """
        for r in self._read(q.CYPHER_GET_INDEXES_NAMED, names=list(q.OBSOLETE_INDEXES)):
            statement = q.CYPHER_DROP_INDEX.format(name=r["name"])
            self.driver.execute_query(statement, database_=self.database)
        kept = True
        for name, props, analyzer in q.FULLTEXT_INDEXES:
            rows = self._read(q.CYPHER_GET_FULLTEXT_INDEX, name=name)
            if not rows:
                kept = False
                continue
            config = rows[0]["config"] or {}
            same = (
                rows[0]["labels"] == ["Event"]
                and rows[0]["properties"] == list(props)
                and all(config.get(k) == v for k, v in q.fulltext_config(analyzer).items())
            )
            if not same:
                statement = q.CYPHER_DROP_INDEX.format(name=name)
                self.driver.execute_query(statement, database_=self.database)
                kept = False
        return kept

    # --------------------------------------------------------------- writes
    def _append(self, prepared: list[Prepared], *, keep_seq: bool = False) -> AppendResult:
        import neo4j.exceptions as nx

        result = AppendResult()
        # an import (keep_seq) is all or nothing: one transaction, however large
        step = max(1, len(prepared)) if keep_seq else max(1, self.write_batch)
        for i in range(0, len(prepared), step):
            chunk = prepared[i : i + step]
            for attempt in range(3):
                try:
                    part = self._write(self._append_tx, chunk, keep_seq)
                    break
                except nx.ConstraintError as exc:
                    # import: a stored seq is taken.  append: another session's
                    # writer stored one of these ids first; the retry counts it as
                    # a duplicate (seq is never the cause: it is allocated under lock)
                    if keep_seq or attempt == 2:
                        raise ValueError(
                            f"events conflict with stored ones: {exc.message}"
                        ) from exc
            result.inserted += part.inserted
            result.duplicates += part.duplicates
            result.ids += part.ids
            result.purged += part.purged
        return result

    def _append_tx(self, tx: Any, prepared: list[Prepared], keep_seq: bool) -> AppendResult:
        t = self.tenant
        dead = self._buried(tx, prepared)
        if dead:
            prepared = [p for p in prepared if p.event.id not in dead]
            if not prepared:
                return AppendResult(purged=sorted(dead))
        sids = sorted({p.event.session_id for p in prepared})
        ids = [p.event.id for p in prepared]
        parts = append_parts.split(prepared, keep_seq)
        # an import's terms follow its stored order: recomputed once it is stored (below)
        build = partial(self._build, with_terms=not keep_seq)
        pending = tx.run(
            q.CYPHER_BEGIN_APPEND, tenant=t, session_ids=sids, context_chars=CONTEXT_CHARS
        )
        # the rows (but seq and predecessor) and terms need no stored data: the first
        # part's are built while the server takes the session locks
        built = build(parts[0])
        begun = pending.single()["sessions"]
        placing = append_parts.Placement.begin(begun, _found(tx, t, ids), prepared, keep_seq)
        self._merge_artifacts(tx, prepared)
        creating: tuple[Any, list[dict[str, Any]]] | None = None
        for i, part in enumerate(parts):
            if creating is not None:  # the part before: its element ids are needed now
                placing.created(creating[1], creating[0].single(strict=True)["made"])
            params = placing.place(part, *built)
            last_part = i == len(parts) - 1
            sessions = placing.sessions() if last_part else []  # set by the last statement
            creating = None
            if params["rows"]:
                # returns once the server has the statement, which it runs while the
                # next part is built here (see parts.py)
                pending = tx.run(q.CYPHER_CREATE_EVENTS, tenant=t, sessions=sessions, **params)
                creating = (pending, params["rows"])
            elif last_part and placing.result.ids:
                tx.run(q.CYPHER_SET_LAST_SEQ, tenant=t, sessions=sessions).consume()
            if not last_part:
                built = build(parts[i + 1])
        if creating is not None:
            creating[0].consume()
        result = placing.result
        if result.ids:
            self._finish(tx, placing)
        if keep_seq and result.ids:
            tx.run(q.CYPHER_CREATE_NEXT, tenant=t, ids=result.ids).consume()
            event_terms.refresh(tx, [(t, sid) for sid in sids])
        result.inserted = len(result.ids)
        result.purged = sorted(dead)
        return result

    def _buried(self, tx: Any, prepared: list[Prepared]) -> set[str]:
        """Ids among ``prepared`` that a purge erased, read in the append's transaction."""
        events = [p.event for p in prepared]
        found = [
            tombstones.Tombstone(r["kind"], r["value"], r["at"])
            for r in tx.run(
                q.CYPHER_TOMBSTONES_OF, tenant=self.tenant, values=tombstones.keys(events)
            )
        ]
        return tombstones.buried(events, found)

    def _merge_artifacts(self, tx: Any, prepared: list[Prepared]) -> None:
        """The bodies the events' previews point to, each once (before the events)."""
        artifacts: dict[str, dict[str, Any]] = {}
        for p in prepared:
            for sha, body in p.artifacts.items():
                artifacts.setdefault(sha, {"sha256": sha, "chars": len(body), "body": body})
        if artifacts:
            tx.run(
                q.CYPHER_MERGE_ARTIFACTS, tenant=self.tenant, artifacts=list(artifacts.values())
            ).consume()

    def _build(
        self, part: list[Prepared], with_terms: bool
    ) -> tuple[list[dict[str, Any]], dict[str, Turn] | None]:
        """A part's rows and (``with_terms``) each event's tokens, by id: all the
        client work of an append that needs nothing from the server."""
        rows = [self._row(p) for p in part]
        if not with_terms:
            return rows, None
        turns = lucene.turn_tokens([p.event.content or "" for p in part])
        return rows, dict(zip((p.event.id for p in part), turns, strict=True))

    def _finish(self, tx: Any, placing: append_parts.Placement) -> None:
        """What follows the parts: placeholders filled in (after every new event, as
        their predecessor or an edge target may be one), edges to events of a later
        part, and the artifact links."""
        t = self.tenant
        if placing.placeholders:
            tx.run(q.CYPHER_FILL_PLACEHOLDERS, tenant=t, rows=placing.placeholders).consume()
        if placing.late:
            _merge_edges(tx, t, placing.late)
        refs = [
            {"id": r["props"]["id"], "shas": r["artifacts"]}
            for r in placing.placed
            if r["artifacts"]
        ]
        if refs:
            tx.run(q.CYPHER_LINK_ARTIFACTS, tenant=t, rows=refs).consume()

    def _row(self, p: Prepared) -> dict[str, Any]:
        """An event's ``props`` and ``label`` as CYPHER_CREATE_EVENTS takes them, with
        its ``edges`` and ``prev`` (NEXT predecessor) for placing it (``parts.py``) or
        filling its placeholder in; ``seq`` and ``prev`` are set once its session is
        locked."""
        ev = p.event
        links = {k.value: list(v) for k, v in ev.links.items()}
        targets: dict[str, dict[str, None]] = {}  # each target once per type, in order
        for etype, dst in ev.edge_targets():
            targets.setdefault(etype.value, {})[dst] = None
        row = {
            "label": TYPE_LABELS[ev.type],
            "prev": None,
            "edges": {k: list(v) for k, v in targets.items()},
            "artifacts": _artifact_refs(ev.payload),
            "props": {
                "tenant": self.tenant,
                "id": ev.id,
                "session_id": ev.session_id,
                "seq": None,
                "type": ev.type.value,
                "role": ev.role,
                "content": ev.content,
                "payload": p.payload_json,
                "ts": float(ev.ts),
                "parents": json.dumps(list(ev.parents)),
                "links": json.dumps(links) if links else "{}",
                "meta": p.meta_json,
                "source": p.source_json,
                "user_id": _scalar(ev.meta.get("user_id")),
                "agent_id": _scalar(ev.meta.get("agent_id")),
                "scope": ev.scope,
                "tokens": TOKENS_UNCOUNTED,
                "status": ev.status.value,
                "status_reason": ev.status_reason,
            },
        }
        for key in _OPTIONAL_PROPS:  # a null property is no property: not sent at all
            if row["props"][key] is None:
                del row["props"][key]
        return row

    def link(self, edges: Sequence[Edge]) -> int:
        """Add edges (REFERS_TO found later, SUMMARIZES, …); existing ones are kept."""
        if any(e.type == EdgeType.NEXT for e in edges):
            raise ValueError("NEXT edges follow the session order and cannot be set")
        if not edges:
            return 0
        self._linked(edges)
        return self._write(_merge_edges, self.tenant, list(edges))

    def _set_status(self, ids: Sequence[str], status: Status, reason: str) -> int:
        self._status_changed()
        if not isinstance(reason, str):
            raise ValueError("reason must be a string")
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        self._refuse_foreign(ids)

        def work(tx: Any) -> int:
            rec = tx.run(
                q.CYPHER_SET_STATUS,
                tenant=self.tenant,
                ids=ids,
                status=status.value,
                reason=reason,
            ).single()
            return rec["n"] if rec else 0

        return self._write(work)

    def soft_delete(self, ids: Sequence[str], reason: str) -> int:
        """Hide events from every read (kept in the graph; ``include_inactive`` shows them)."""
        return self._set_status(ids, Status.DELETED, reason)

    def invalidate(self, ids: Sequence[str], reason: str, *, by: str | None = None) -> int:
        """Mark events as no longer true; ``by`` records a SUPERSEDES edge from the new one."""
        n = self._set_status(ids, Status.INVALIDATED, reason)
        if by:
            self.link([Edge(src=by, dst=i, type=EdgeType.SUPERSEDES) for i in ids])
        return n

    def purge(
        self,
        *,
        session_id: str | None = None,
        ids: Sequence[str] | None = None,
        user_id: str | None = None,
        tombstone: bool = True,
    ) -> list[str]:
        """Delete for good (GDPR-style): events, their relationships, artifacts and
        placeholders nothing points to any more, and emptied sessions; and leave a
        tombstone in the same transaction, so a copy still pending anywhere is refused
        when it arrives (see :mod:`beeweave_core.tombstones`).  ``tombstone=False``
        (an import rolled back, retention that archived first) lets them in again.
        Returns the ids deleted; a user's events are read again inside the transaction,
        so one stored since the scope check goes too."""
        self._begin_purge(session_id, ids, user_id)
        wanted = list(dict.fromkeys(ids or []))
        if ids is not None and not wanted:
            return []
        if session_id is not None:
            self._refuse_foreign_session(session_id)
        if user_id is not None:
            wanted = [r["id"] for r in self._read(q.CYPHER_GET_USER_EVENT_IDS, user_id=user_id)]
        self._refuse_foreign(wanted)
        marks = tombstones.of_purge(session_id=session_id, ids=ids or (), user_id=user_id)

        def work(tx: Any) -> list[str]:
            t = self.tenant
            if tombstone:
                tx.run(
                    q.CYPHER_ADD_TOMBSTONES, tenant=t, rows=[m._asdict() for m in marks]
                ).consume()
            targets, sids = self._purge_targets(tx, session_id, wanted, user_id)
            tx.run(q.CYPHER_LOCK_EXISTING_SESSIONS, tenant=t, session_ids=sids).consume()
            gone, shas, placeholders = [], set(), set()
            for r in tx.run(q.CYPHER_PURGE_EVENTS, tenant=t, ids=targets):
                if r["stored"]:
                    gone.append(r["id"])
                shas.update(r["shas"])
                placeholders.update(r["placeholders"])
            tx.run(q.CYPHER_DELETE_ORPHAN_ARTIFACTS, tenant=t, shas=sorted(shas)).consume()
            tx.run(
                q.CYPHER_DELETE_ORPHAN_PLACEHOLDERS, tenant=t, ids=sorted(placeholders)
            ).consume()
            tx.run(q.CYPHER_RESET_SESSIONS, tenant=t, session_ids=sids).consume()
            session_scopes.compute(tx, [(t, sid) for sid in sids])
            user_sessions.compute(tx, [(t, sid) for sid in sids])
            if session_id is None:  # a purged turn leaves the terms of the one after it
                event_terms.refresh(tx, [(t, sid) for sid in sids])
            return gone

        return self._write(work)

    def _purge_targets(
        self, tx: Any, session_id: str | None, wanted: list[str], user_id: str | None
    ) -> tuple[list[str], list[str]]:
        """The ids a purge deletes and their sessions, read in its transaction."""
        t = self.tenant
        if session_id is not None:
            found = tx.run(q.CYPHER_GET_SESSION_EVENT_IDS, tenant=t, session_id=session_id)
            return [r["id"] for r in found], [session_id]
        targets = wanted
        if user_id is not None:
            found = tx.run(q.CYPHER_GET_USER_EVENT_IDS, tenant=t, user_id=user_id)
            targets = list(dict.fromkeys([*wanted, *(r["id"] for r in found)]))
        sids = tx.run(q.CYPHER_GET_SESSIONS_OF_IDS, tenant=t, ids=targets)
        return targets, sorted(r["sid"] for r in sids)

    def _tombstones(self) -> list[tombstones.Tombstone]:
        return [
            tombstones.Tombstone(r["kind"], r["value"], r["at"])
            for r in self._read(q.CYPHER_ALL_TOMBSTONES)
        ]

    def _lift_tombstone(self, kind: str, value: str) -> bool:
        def work(tx: Any) -> int:
            return int(
                tx.run(
                    q.CYPHER_LIFT_TOMBSTONE, tenant=self.tenant, kind=kind, value=value
                ).single()["n"]
            )

        return self._write(work) > 0

    def purge_tenant(self) -> None:
        """Remove every node of this tenant (events, sessions, artifacts, placeholders)."""
        with neo4j_tx.session(self.driver, self.database) as session:
            for statement in q.CYPHER_PURGE_TENANT.values():
                session.run(statement, tenant=self.tenant).consume()

    # ---------------------------------------------------------------- reads
    def get(self, ids: Sequence[str], *, include_inactive: bool = False) -> list[Event]:
        """Events by id, in the order asked; unknown ids are left out, ids of another
        scope are refused (ScopeError)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        found = {
            ev.id: ev
            for ev in (
                _to_event(self.tenant, r["event"])
                for r in self._read(q.CYPHER_GET_EVENTS, ids=ids, all=include_inactive)
            )
        }
        if self.scopes is not None and len(found) < len(ids):
            self._refuse_foreign([i for i in ids if i not in found])
        return [found[i] for i in ids if i in found]

    def timeline(
        self,
        session_id: str,
        *,
        last: int | None = None,
        seq_from: int | None = None,
        seq_to: int | None = None,
        since: float | None = None,
        until: float | None = None,
        types: Iterable[EventType] | None = None,
        include_inactive: bool = False,
    ) -> list[Event]:
        """A session in order; ``last=N`` gives the latest N (still oldest first)."""
        params: dict[str, Any] = {
            "session_id": session_id,
            "seq_from": seq_from,
            "seq_to": seq_to,
            "since": since,
            "until": until,
            "all": include_inactive,
            "types": None if types is None else [EventType(t).value for t in types],
        }
        if last is not None:
            if int(last) <= 0:
                return []
            rows = self._read(q.CYPHER_GET_TIMELINE_LAST, last=int(last), **params)[::-1]
        else:
            rows = self._read(q.CYPHER_GET_TIMELINE, **params)
        return [_to_event(self.tenant, r["event"]) for r in rows]

    def _around(
        self, events: Sequence[Event], types: list[str], depth: int, neighbours: int
    ) -> dict[str, list[tuple[Event, int, bool]]]:
        """:meth:`around` in one round trip (a recall's graph path read its seeds one
        walk at a time: ~4 ms each, most of a call here)."""
        out: dict[str, list[tuple[Event, int, bool]]] = {ev.id: [] for ev in events}
        near = neighbours > 0
        if not events or not (types or near):
            return out
        seeds = [
            {"id": ev.id, "lo": max(0, ev.seq - neighbours), "hi": ev.seq + neighbours}
            if near and ev.seq >= 0
            else {"id": ev.id, "lo": 1, "hi": 0}
            for ev in events
        ]
        query = q.bounded(q.around_query(bool(types), near), max(depth, 1))
        rows = self._read(query, seeds=seeds, types=types, all=False)
        ways: dict[tuple[str, int], list[tuple[Event, int]]] = {}
        for r in rows:
            ways.setdefault((r["seed"], r["way"]), []).append(
                (_to_event(self.tenant, r["event"]), r["dist"])
            )
        for sid, found in out.items():
            for way in (0, 1):
                walked = sorted(ways.get((sid, way), []), key=lambda p: (p[1], p[0].seq))
                found += [(e, d, False) for e, d in walked]
            beside = sorted(ways.get((sid, 2), []), key=lambda p: p[0].seq)
            found += [(e, d, True) for e, d in beside]
        return out

    def _walk(
        self, event_id: str, depth: int, types: list[str], include_inactive: bool, forward: bool
    ) -> list[tuple[Event, int]]:
        template = q.CYPHER_GET_ANCESTORS if forward else q.CYPHER_GET_DESCENDANTS
        rows = self._read(
            q.bounded(template, depth), id=event_id, types=types, all=include_inactive
        )
        pairs = [(_to_event(self.tenant, r["event"]), r["depth"]) for r in rows]
        return sorted(pairs, key=lambda p: (p[1], p[0].seq))

    def edges(
        self,
        *,
        event_id: str | None = None,
        session_id: str | None = None,
        types: Iterable[EdgeType] | None = None,
        direction: str = "out",
    ) -> list[Edge]:
        """Edges of one event (``direction`` out/in/both) or of a whole session."""
        if (event_id is None) == (session_id is None):
            raise ValueError("edges() takes exactly one of event_id= or session_id=")
        if direction not in ("out", "in", "both"):
            raise ValueError("direction must be 'out', 'in' or 'both'")
        wanted = _edge_types(EdgeType if types is None else types)
        if not wanted:
            return []
        if session_id is not None:
            rows = self._read(q.CYPHER_GET_SESSION_EDGES, session_id=session_id, types=wanted)
        else:
            rows = []
            if direction in ("out", "both"):
                rows += self._read(q.CYPHER_GET_EDGES_OUT, id=event_id, types=wanted)
            if direction in ("in", "both"):
                rows += self._read(q.CYPHER_GET_EDGES_IN, id=event_id, types=wanted)
        out = [
            Edge(
                src=r["src"],
                dst=r["dst"],
                type=EdgeType(r["type"]),
                meta=json.loads(r["meta"]) if r["meta"] else {},
            )
            for r in rows
        ]
        return self._visible_edges(out, event_id)

    def _count_tokens(self, session_ids: list[str] | None) -> None:
        """Fill in exact token counts that ``append`` left for later.

        Counting costs ~70 µs per KB of text, as much as the whole write, so (as in
        the SQLite store) the write path leaves it to the first read that needs it.
        """
        while True:
            if session_ids is None:
                rows = self._read(q.CYPHER_GET_UNCOUNTED_ALL, limit=2_000)
            else:
                rows = self._read(
                    q.CYPHER_GET_UNCOUNTED_OF_SESSIONS, session_ids=session_ids, limit=2_000
                )
            if not rows:
                return
            counts = self._token_count([r["content"] or "" for r in rows])
            done = [{"id": r["id"], "tokens": n} for r, n in zip(rows, counts, strict=True)]
            self._write(_run, q.CYPHER_SET_TOKENS, {"tenant": self.tenant, "rows": done})

    def session_ids_starting(self, prefix: str) -> list[str]:
        """Sessions whose id starts with ``prefix``, any scope: what a purge of store
        items under a namespace looks for (the purge refuses another scope's)."""
        return [r["id"] for r in self._read(q.CYPHER_SESSION_IDS_STARTING, prefix=prefix)]

    def user_session_ids(self, user_id: str) -> list[str]:
        """The sessions ``user_id`` took part in: a few seeks per session of the user
        (user_sessions.py); a scoped view's, where it may read one of the user's events."""
        return self._user_sessions(user_id, None)

    def recent_user_sessions(self, user_id: str, limit: int) -> list[tuple[str, int]]:
        """The user's ``limit`` conversations with the newest last event, newest first, as
        (session id, last seq): a few seeks per session of the user (user_sessions.py);
        a scoped view lists only sessions where the user has an event it may read."""
        rows = self._read(q.CYPHER_RECENT_USER_SESSIONS, user_id=user_id)
        return self._newest_conversations(
            ((str(r["sid"]), r["last_seq"], r["ts"]) for r in rows), limit
        )

    def _user_sessions(self, user_id: str, within: list[str] | None) -> list[str]:
        """Sessions ``user_id`` took part in (any status), narrowed to ``within``."""
        mine = [r["sid"] for r in self._read(q.CYPHER_GET_USER_SESSIONS, user_id=user_id)]
        return mine if within is None else [s for s in within if s in mine]

    def _session_stats(
        self, session_ids: list[str] | None, *, user_id: str | None = None
    ) -> list[SessionStats]:
        if user_id is not None:
            session_ids = self._user_sessions(user_id, session_ids)
        self._count_tokens(session_ids)
        if session_ids is None:
            rows = self._read(q.CYPHER_GET_ALL_SESSION_STATS)
        else:
            rows = self._read(q.CYPHER_GET_SESSION_STATS, session_ids=session_ids)
        stats = [
            SessionStats(
                session_id=r["sid"],
                events=sum(n for _, n in r["counts"]),
                counts={t: n for t, n in r["counts"]},
                first_ts=r["first"],
                last_ts=r["last"],
                last_seq=r["last_seq"],
                tokens=r["tokens"] or 0,
                user_ids=sorted({str(u) for u in r["user_ids"] if u is not None}),
            )
            for r in rows
        ]
        return sorted(stats, key=lambda s: s.last_ts or 0.0, reverse=True)

    def get_artifact(self, sha256: str) -> str | None:
        """The full text behind a preview (``payload["$artifact"]["sha256"]``)."""
        rows = self._read(q.CYPHER_GET_ARTIFACT, sha256=sha256)
        if rows and not rows[0]["visible"]:
            refuse_artifact(sha256, self.scopes)
        return rows[0]["body"] if rows else None

    def search_text(
        self,
        query: str,
        *,
        k: int = 10,
        session_id: str | None = None,
        user_id: str | None = None,
        types: Iterable[EventType] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[tuple[Event, float]]:
        """Active events matching ``query``'s words (Chinese too), best BM25 first.

        ``user_id`` means the sessions that user took part in (as ``sessions()``).
        Any text is safe: it becomes quoted Lucene phrases and is sent as a
        parameter.  The index holds, and is asked, the SQLite store's tokens (its
        segmentation, stemming and stop words; an event's previous turn at half
        weight), so both stores rank alike (see ``text.lucene``).
        """
        words = lucene.match_query(query)
        if not words or k <= 0:
            return []
        type_values = None if types is None else [EventType(t).value for t in types]
        if type_values == []:
            return []
        session_ids = None if session_id is None else [session_id]
        if user_id is not None:
            session_ids = self._user_sessions(user_id, session_ids)
            if not session_ids:
                return []
        search = f"+tenant:{lucene.phrase(self.tenant)}^0 "
        if session_ids is not None and len(session_ids) <= LUCENE_SESSIONS:
            # the index narrows to the scope's sessions (Lucene intersects postings)
            either = " OR ".join(lucene.phrase(sid) for sid in session_ids)
            search += f"+session_id:({either})^0 "
        search += f"+terms:({words})"
        params = {
            "index": q.FULLTEXT_INDEX,
            "search": search,
            "k": int(k),
            "session_ids": session_ids,
            "types": type_values,
            "since": since,
            "until": until,
        }
        limit = max(4 * int(k), 50)
        while True:
            rows = self._read(q.CYPHER_SEARCH_TEXT, limit=limit, **params)
            hits = [(r["event"], r["score"]) for r in rows if r["event"] is not None]
            if len(hits) >= k or not rows or rows[0]["raw"] < limit:
                return [(_to_event(self.tenant, e), float(s)) for e, s in hits]
            limit *= 4
