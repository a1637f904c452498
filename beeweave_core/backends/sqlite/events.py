"""The embedded default: the whole event graph in one SQLite file.

Zero setup, one file, WAL mode so readers never wait for the writer.  The session
order (``seq``) is allocated inside the write transaction, so several threads or
processes appending to one session never fork or leave gaps.  NEXT edges are not
stored: they are implied by consecutive ``seq`` and derived on read.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from beeweave_core import tombstones
from beeweave_core.backends.sqlite import events_sql as q
from beeweave_core.backends.sqlite import wide_search as ws
from beeweave_core.backends.sqlite.db import SharedConnection, SideTables, in_scopes, marks
from beeweave_core.events import (
    AppendResult,
    Edge,
    EdgeType,
    Event,
    EventType,
    SessionStats,
    Status,
)
from beeweave_core.payloads import dumps
from beeweave_core.scopes import Readable, narrow, refuse_artifact
from beeweave_core.store import BaseEventStore, Prepared, TokenCount, default_token_count
from beeweave_core.text.lexical import fts_query, fts_text, query_terms

#: Decoded events kept by row (an event is immutable: the same row decodes to the same
#: value, and the newest turns are read by call after call).  A row that changed in any
#: column (a status change, an id written again after a purge) is decoded again.
_DECODED_MAX = 50_000
_decoded: dict[tuple[str, str], tuple[tuple[Any, ...], Event]] = {}


def _row_to_event(tenant: str, row: Sequence[Any]) -> Event:
    key = (tenant, row[0])
    hit = _decoded.get(key)
    if hit is not None and hit[0] == row:
        return hit[1]
    ev = _decode(tenant, row)
    if len(_decoded) >= _DECODED_MAX:
        _decoded.clear()
    _decoded[key] = (tuple(row), ev)
    return ev


def _decode(tenant: str, row: Sequence[Any]) -> Event:
    (eid, sid, seq, etype, role, content, payload, ts, parents, links, meta, source, st, sr) = row
    return Event.model_construct(
        id=eid,
        tenant=tenant,
        session_id=sid,
        seq=seq,
        type=EventType(etype),
        role=role,
        content=content,
        payload=json.loads(payload),
        ts=ts,
        parents=tuple(json.loads(parents)),
        links={EdgeType(k): tuple(v) for k, v in json.loads(links).items()},
        meta=json.loads(meta),
        source=json.loads(source),
        status=Status(st),
        status_reason=sr,
    )


def _json_list(values: Sequence[str]) -> str:
    return json.dumps(list(values)) if values else "[]"


def _json_links(links: dict[EdgeType, tuple[str, ...]]) -> str:
    return json.dumps({k.value: list(v) for k, v in links.items()}) if links else "{}"


class SQLiteEventStore(SideTables, BaseEventStore):
    """Event graph in a SQLite file (``:memory:`` works too, for one process).

    Use :meth:`from_conn_string` as a context manager, or construct and ``close()``.
    One connection is shared behind a lock; the store is safe to use from many
    threads, and several processes may open the same file.
    """

    sql = q

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tenant: str = "default",
        token_count: TokenCount | None = None,
        busy_timeout: float = 30.0,
        connection: SharedConnection | None = None,
        scopes: Readable = None,
    ) -> None:
        self._token_count = token_count or default_token_count
        self.scopes = narrow(None, scopes)
        super().__init__(path, tenant=tenant, busy_timeout=busy_timeout, connection=connection)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA foreign_keys=OFF")
        # The full-text index segments text in Python (Chinese has no spaces to split on).
        conn.create_function(q.FTS_TEXT_FUNCTION, 1, fts_text, deterministic=True)

    def for_tenant(self, tenant: str) -> SQLiteEventStore:
        """A view of the same file scoped to another tenant (shares the connection)."""
        return SQLiteEventStore(
            self.path,
            tenant=tenant,
            token_count=self._token_count,
            connection=self.connection,
            scopes=self.scopes,
        )

    def for_scopes(self, scopes: Readable) -> SQLiteEventStore:
        """A view of the same tenant that reads and writes only ``scopes`` (never wider)."""
        view = self.for_tenant(self.tenant)
        view.scopes = narrow(self.scopes, scopes)
        return view

    def _scopes_of(self, ids: list[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            sql = q.SCOPES_OF_IDS.format(ids=marks(len(chunk)))
            out.update(self._read(sql, (self.tenant, *chunk)))
        return out

    def _session_scopes(self, session_id: str) -> set[str | None]:
        return {r[0] for r in self._read(q.SCOPES_OF_SESSION, (self.tenant, session_id))}

    # --------------------------------------------------------------- writes
    def _append(self, prepared: list[Prepared], *, keep_seq: bool = False) -> AppendResult:
        result = AppendResult()
        with self._tx() as c:
            dead = self._buried(c, prepared)
            if dead:
                result.purged = sorted(dead)
                prepared = [p for p in prepared if p.event.id not in dead]
            existing: set[str] = set()
            ids = [p.event.id for p in prepared]
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                sql = q.EXISTING_IDS.format(ids=marks(len(chunk)))
                existing.update(r[0] for r in c.execute(sql, (self.tenant, *chunk)))
            next_seq: dict[str, int] = {}
            rows, edge_rows, artifact_rows = [], [], []
            for p in prepared:
                ev = p.event
                artifact_rows += [(self.tenant, sha, len(b), b) for sha, b in p.artifacts.items()]
                if ev.id in existing:
                    result.duplicates += 1
                    continue
                if keep_seq:
                    seq = ev.seq
                else:
                    if ev.session_id not in next_seq:
                        next_seq[ev.session_id] = (
                            c.execute(q.MAX_SEQ, (self.tenant, ev.session_id)).fetchone()[0] + 1
                        )
                    seq = next_seq[ev.session_id]
                    next_seq[ev.session_id] = seq + 1
                rows.append(
                    (
                        self.tenant, ev.id, ev.session_id, seq, ev.type.value, ev.role,
                        ev.content, p.payload_json, ev.ts, _json_list(ev.parents),
                        _json_links(ev.links), p.meta_json, p.source_json,
                        ev.meta.get("user_id"), ev.meta.get("agent_id"), q.TOKENS_UNCOUNTED,
                        ev.status.value, ev.status_reason, ev.scope,
                    )
                )  # fmt: skip
                edge_rows.extend(
                    (self.tenant, e.src, e.type.value, e.dst, "{}") for e in ev.edges()
                )
                result.ids.append(ev.id)
            try:
                c.executemany(q.INSERT_EVENT, rows)
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"import conflicts with stored events: {exc}") from exc
            c.executemany(q.INSERT_EDGE, edge_rows)
            c.executemany(q.INSERT_ARTIFACT, artifact_rows)
        result.inserted = len(rows)
        return result

    def link(self, edges: Sequence[Edge]) -> int:
        """Add edges (REFERS_TO found later, SUMMARIZES, …); existing ones are kept."""
        rows = []
        for e in edges:
            if e.type == EdgeType.NEXT:
                raise ValueError("NEXT edges follow the session order and cannot be set")
            rows.append((self.tenant, e.src, e.type.value, e.dst, dumps(e.meta)))
        self._linked(edges)
        with self._tx() as c:
            before = c.total_changes
            c.executemany(q.INSERT_EDGE, rows)
            return c.total_changes - before

    def _set_status(self, ids: Sequence[str], status: Status, reason: str) -> int:
        self._status_changed()
        if not isinstance(reason, str):
            raise ValueError("reason must be a string")
        if not ids:
            return 0
        self._refuse_foreign(ids)
        with self._tx() as c:
            sql = q.SET_STATUS.format(ids=marks(len(ids)))
            return c.execute(sql, (status.value, reason, self.tenant, *ids)).rowcount

    def soft_delete(self, ids: Sequence[str], reason: str) -> int:
        """Hide events from every read (kept on disk; ``include_inactive`` shows them)."""
        return self._set_status(list(ids), Status.DELETED, reason)

    def invalidate(self, ids: Sequence[str], reason: str, *, by: str | None = None) -> int:
        """Mark events as no longer true; ``by`` records a SUPERSEDES edge from the new one."""
        n = self._set_status(list(ids), Status.INVALIDATED, reason)
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
        """Delete for good (GDPR-style): events, their edges, artifacts no one points to;
        and leave a tombstone in the same transaction, so a copy still pending anywhere
        is refused when it arrives (see :mod:`beeweave_core.tombstones`).
        ``tombstone=False`` (an import rolled back, retention that archived first) lets
        the same events in again later.  Returns the ids deleted (what the vector index
        must drop: an event stored while the purge ran is among them if it went too)."""
        self._begin_purge(session_id, ids, user_id)
        if session_id is not None:
            self._refuse_foreign_session(session_id)
        elif ids is not None:
            ids = list(dict.fromkeys(ids))
            self._refuse_foreign(ids)
            if not ids:
                return []
        else:
            self._refuse_foreign(
                [r[0] for r in self._read(q.USER_EVENT_IDS, (self.tenant, user_id))]
            )
        t = self.tenant
        with self._tx() as c:
            if session_id is not None:
                c.execute(q.PURGE_SESSION_EDGES, (t, t, session_id, t, session_id))
                gone = c.execute(q.PURGE_SESSION, (t, session_id)).fetchall()
            elif user_id is not None:
                c.execute(q.PURGE_USER_EDGES, (t, t, user_id, t, user_id))
                gone = c.execute(q.PURGE_USER, (t, user_id)).fetchall()
            else:
                m = marks(len(ids or []))
                c.execute(q.PURGE_IDS_EDGES.format(ids=m), (t, *ids, *ids))
                gone = c.execute(q.PURGE_IDS.format(ids=m), (t, *ids)).fetchall()
            c.execute(q.PURGE_ORPHAN_ARTIFACTS, (t,))
            if tombstone:
                stones = tombstones.of_purge(session_id=session_id, ids=ids or (), user_id=user_id)
                c.executemany(q.ADD_TOMBSTONE, [(t, *m) for m in stones])
        if gone:
            self._forget_scopes()
            self._scrub()
        return [r[0] for r in gone]

    def _tombstones(self) -> list[tombstones.Tombstone]:
        return [tombstones.Tombstone(*r) for r in self._read(q.ALL_TOMBSTONES, (self.tenant,))]

    def _lift_tombstone(self, kind: str, value: str) -> bool:
        with self._tx() as c:
            return c.execute(q.LIFT_TOMBSTONE, (self.tenant, kind, value)).rowcount > 0

    def _buried(self, c: sqlite3.Connection, prepared: list[Prepared]) -> set[str]:
        """Ids among ``prepared`` that a purge erased (read inside the append's
        transaction, so a purge committing meanwhile is either seen or waited for)."""
        t = self.tenant
        if c.execute(q.HAS_TOMBSTONES, (t,)).fetchone() is None:
            return set()
        events = [p.event for p in prepared]
        values = tombstones.keys(events)
        found = []
        for i in range(0, len(values), 500):
            chunk = values[i : i + 500]
            sql = q.TOMBSTONES_OF.format(ids=marks(len(chunk)))
            found += [tombstones.Tombstone(*r) for r in c.execute(sql, (t, *chunk))]
        return tombstones.buried(events, found)

    def _scrub(self) -> None:
        """Leave no copy of purged text in the file.

        FTS5 keeps a deleted row's terms in its segments until they are merged, and
        the WAL keeps old page images until a checkpoint; ``optimize`` merges every
        segment (its cost grows with the index, and a purge is rare) and a truncating
        checkpoint empties the WAL once no reader holds it (else the next one does).
        """
        with self._tx() as c:
            c.execute(q.FTS_OPTIMIZE)
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # ---------------------------------------------------------------- reads
    def get(self, ids: Sequence[str], *, include_inactive: bool = False) -> list[Event]:
        """Events by id, in the order asked; unknown ids are left out, ids of another
        scope are refused (ScopeError)."""
        ids = list(ids)
        found = self._fetch(ids, include_inactive)
        if self.scopes is not None and len(found) < len(set(ids)):
            self._refuse_foreign([i for i in ids if i not in found])
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def _fetch(self, ids: list[str], include_inactive: bool) -> dict[str, Event]:
        """The events among ``ids`` this view may see."""
        found: dict[str, Event] = {}
        clause, values = in_scopes(self.scopes)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            sql = q.GET_EVENTS.format(ids=marks(len(chunk))) + clause
            for row in self._read(sql, (self.tenant, *chunk, *values)):
                ev = _row_to_event(self.tenant, row)
                if include_inactive or ev.status == Status.ACTIVE:
                    found[ev.id] = ev
        return found

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
        sql, params = q.TIMELINE, [self.tenant, session_id]
        for clause, value in (
            (" AND seq >= ?", seq_from),
            (" AND seq <= ?", seq_to),
            (" AND ts >= ?", since),
            (" AND ts <= ?", until),
        ):
            if value is not None:
                sql += clause
                params.append(value)
        if types is not None:
            tv = [EventType(t).value for t in types]
            sql += f" AND type IN ({marks(len(tv))})"
            params.extend(tv)
        if not include_inactive:
            sql += " AND status = 'active'"
        clause, values = in_scopes(self.scopes)
        sql += clause
        params.extend(values)
        if last is not None:
            sql += " ORDER BY seq DESC LIMIT ?"
            params.append(int(last))
            rows = self._read(sql, params)[::-1]
        else:
            rows = self._read(sql + " ORDER BY seq", params)
        return [_row_to_event(self.tenant, r) for r in rows]

    def _walk(
        self, event_id: str, depth: int, types: list[str], include_inactive: bool, forward: bool
    ) -> list[tuple[Event, int]]:
        sql = _walk_sql(q.WALK, forward, len(types))
        rows = self._read(sql, (event_id, self.tenant, depth, *types))
        dist = dict(rows)
        events = self._fetch(list(dist), include_inactive).values()
        return sorted(((e, dist[e.id]) for e in events), key=lambda p: (p[1], p[0].seq))

    def _around(
        self, events: Sequence[Event], types: list[str], depth: int, neighbours: int
    ) -> dict[str, list[tuple[Event, int, bool]]]:
        """:meth:`around` in one walk per direction and one read of what they reach for
        all of ``events`` (a read per walk cost a recall ~1 ms on a settled session)."""
        walked = self._walk_many([ev.id for ev in events], types, depth) if types else {}
        fetched = self._fetch(sorted({i for reached in walked.values() for i in reached}), False)
        out: dict[str, list[tuple[Event, int, bool]]] = {}
        for ev in events:
            found: list[tuple[Event, int, bool]] = []
            for forward in (True, False):
                reached = walked.get((ev.id, forward), {})
                hops = sorted(
                    ((fetched[i], d) for i, d in reached.items() if i in fetched),
                    key=lambda p: (p[1], p[0].seq),
                )
                found += [(o, d, False) for o, d in hops]
            out[ev.id] = found + self._near(ev, neighbours)
        return out

    def _walk_many(
        self, seeds: list[str], types: list[str], depth: int
    ) -> dict[tuple[str, bool], dict[str, int]]:
        """Per (seed, forward): the events within ``depth`` hops and their distance."""
        walked: dict[tuple[str, bool], dict[str, int]] = {}
        ids = json.dumps(list(dict.fromkeys(seeds)))
        for forward in (True, False):
            sql = _walk_sql(q.WALK_MANY, forward, len(types))
            for seed, eid, dist in self._read(sql, (ids, self.tenant, depth, *types)):
                walked.setdefault((seed, forward), {})[eid] = dist
        return walked

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
        wanted = {EdgeType(t) for t in types} if types is not None else set(EdgeType)
        rows: list[tuple[Any, ...]] = []
        next_pairs: list[tuple[str, str]] = []
        if session_id is not None:
            rows = self._read(q.EDGES_OF_SESSION, (self.tenant, session_id))
            if EdgeType.NEXT in wanted:
                next_pairs = self._read(q.NEXT_OF_SESSION, (self.tenant, session_id))  # type: ignore[assignment]
        else:
            for d, sql, side in (
                ("out", q.EDGES_OF_EVENT_OUT, "a"),
                ("in", q.EDGES_OF_EVENT_IN, "b"),
            ):
                if direction in (d, "both"):
                    rows += self._read(sql, (self.tenant, event_id))
                    if EdgeType.NEXT in wanted:
                        next_pairs += self._read(
                            q.NEXT_OF_EVENT.format(side=side), (self.tenant, event_id)
                        )  # type: ignore[arg-type]
        out = [
            Edge(src=s, dst=d, type=EdgeType(t), meta=json.loads(m))
            for s, t, d, m in rows
            if EdgeType(t) in wanted
        ]
        out += [Edge(src=a, dst=b, type=EdgeType.NEXT) for a, b in next_pairs]
        return self._visible_edges(out, event_id)

    def session_ids_starting(self, prefix: str) -> list[str]:
        """Sessions whose id starts with ``prefix`` (non-empty), any scope: what a purge
        of store items under a namespace looks for (the purge refuses another scope's)."""
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return [r[0] for r in self._read(q.SESSION_IDS_BETWEEN, (self.tenant, prefix, upper))]

    def user_session_ids(self, user_id: str) -> list[str]:
        """The sessions ``user_id`` took part in: a loose scan of the (tenant, user_id,
        session_id) index, one seek per session (plus one per session for a scoped
        view: the user has an event it may read there)."""
        return [r[0] for r in self._user_sessions_read(q.USER_SESSION_IDS, user_id)]

    def recent_user_sessions(self, user_id: str, limit: int) -> list[tuple[str, int]]:
        """The user's ``limit`` conversations with the newest last event, newest first, as
        (session id, last seq): the sessions as :meth:`user_session_ids` finds them,
        and one seek for each one's last event."""
        rows = self._user_sessions_read(q.RECENT_USER_SESSIONS, user_id)
        return self._newest_conversations(((r[0], r[1], r[2]) for r in rows), limit)

    def _user_sessions_read(self, sql: str, user_id: str) -> list[Any]:
        scopes = sorted(self.scopes) if self.scopes is not None else []
        scoped = (
            ""
            if self.scopes is None
            else q.USER_IN_SCOPES.format(
                scopes=", ".join(f"?{i}" for i in range(3, 3 + len(scopes)))
            )
        )
        return self._read(sql.format(scoped=scoped), (self.tenant, user_id, *scopes))

    def recent_session_ids(self, limit: int) -> list[str]:
        """The ``limit`` sessions with the newest active events, newest first: the ts
        index walked backwards in pages, so the cost is that of those sessions' latest
        events, not of the tenant (``sessions()`` would group and count every event)."""
        found: dict[str, None] = {}
        key: tuple[float, int] = (1e308, 1 << 62)  # above any time and rowid
        clause, values = in_scopes(self.scopes)
        sql = q.RECENT_SESSION_ROWS.format(where=clause)
        while len(found) < limit:
            rows = self._read(sql, (self.tenant, key[0], key[0], key[1], *values, 1000))
            for sid, _ts, _rowid in rows:
                found.setdefault(sid)
                if len(found) >= limit:
                    break
            if len(rows) < 1000:
                break
            key = (rows[-1][1], rows[-1][2])
        return list(found)

    def _count_tokens(self, scope: tuple[str, str, list[Any]]) -> None:
        """Fill in exact token counts left for later by ``append`` (in ``scope`` only).

        Counting costs ~40 µs per KB of text, as much as the whole write, so the
        write path leaves it to the first read that needs it.
        """
        indexed, where, params = scope
        sql = q.UNCOUNTED_TOKENS.format(indexed=indexed, where=where)
        while True:
            rows = self._read(sql, [self.tenant, *params])
            if not rows:
                return
            counts = self._token_count([r[1] for r in rows])
            with self._tx() as c:
                c.executemany(
                    q.SET_TOKENS,
                    [(n, self.tenant, r[0]) for r, n in zip(rows, counts, strict=True)],
                )

    def _stats_scope(
        self, session_ids: list[str] | None, user_id: str | None
    ) -> tuple[str, str, list[Any]]:
        """(index hint, filter clauses, values) for the sessions a stats read names."""
        where, params = "", []
        if session_ids is not None:
            where += f" AND session_id IN ({marks(len(session_ids))})"
            params += session_ids
        if user_id is not None:
            where += q.IN_USER_SESSIONS
            params += [self.tenant, user_id] * 2
        indexed = "INDEXED BY events_session_seq" if where else ""
        clause, values = in_scopes(self.scopes)
        return indexed, where + clause, params + values

    def _session_stats(
        self, session_ids: list[str] | None, *, user_id: str | None = None
    ) -> list[SessionStats]:
        scope = self._stats_scope(session_ids, user_id)
        self._count_tokens(scope)
        indexed, where, params = scope
        sql = q.SESSION_STATS.format(indexed=indexed, where=where)
        acc: dict[str, dict[str, Any]] = {}
        for sid, etype, n, first, last, mseq, tok, users in self._read(sql, [self.tenant, *params]):
            s = acc.setdefault(
                sid, {"counts": {}, "first": first, "last": last, "seq": mseq, "tok": 0, "u": set()}
            )
            s["counts"][etype] = n
            s["first"], s["last"] = min(s["first"], first), max(s["last"], last)
            s["seq"], s["tok"] = max(s["seq"], mseq), s["tok"] + (tok or 0)
            s["u"].update(u for u in (users or "").split(",") if u)
        stats = [
            SessionStats(
                session_id=sid,
                events=sum(s["counts"].values()),
                counts=s["counts"],
                first_ts=s["first"],
                last_ts=s["last"],
                last_seq=s["seq"],
                tokens=s["tok"],
                user_ids=sorted(s["u"]),
            )
            for sid, s in acc.items()
        ]
        return sorted(stats, key=lambda s: s.last_ts or 0.0, reverse=True)

    def get_artifact(self, sha256: str) -> str | None:
        """The full text behind a preview (``payload["$artifact"]["sha256"]``)."""
        if self.scopes is None:
            rows = self._read(q.GET_ARTIFACT, (self.tenant, sha256))
            return rows[0][0] if rows else None
        clause, scopes = in_scopes(self.scopes)
        sql = q.GET_ARTIFACT_SCOPED.format(in_scopes=clause)
        rows = self._read(sql, (self.tenant, sha256, *scopes, self.tenant, sha256))
        if rows and not rows[0][1]:
            refuse_artifact(sha256, self.scopes)
        return rows[0][0] if rows else None

    def sync_text_index(
        self, batch: int = 5_000, *, go_on: Callable[[], bool] | None = None
    ) -> int:
        """Add events stored since the last call to the full-text index; returns how many
        (``go_on`` is asked before each batch: a background caller gives way there, a
        caller with a deadline stops there when it returns False).

        Segmenting and indexing text costs about twice the event write itself, so
        ``append`` leaves it to this call: ``search_text`` makes it first (lexical
        search always sees every stored event), and the vector indexer's thread
        makes it after each stored batch, so a search rarely has anything to do.
        """
        done = 0
        while self._read(q.FTS_PENDING, ())[0][0]:
            if go_on is not None and not go_on():
                break
            with self._tx() as c:
                n = c.execute(q.FTS_CATCH_UP, (batch,)).rowcount
            done += max(n, 0)
            if n <= 0:
                break
        return done

    def _text_pending(self, types: Iterable[EventType]) -> bool:
        """Whether events of ``types`` wait for the text index: a search need not index
        the rows it cannot return (an assembly's audit records, stored after each read,
        would otherwise cost the next read a write transaction); they are indexed with
        the next rows it can, or in the background."""
        tv = sorted({EventType(t).value for t in types})
        return bool(tv) and bool(
            self._read(q.FTS_PENDING_OF.format(types=marks(len(tv))), tv)[0][0]
        )

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
        """Active events matching ``query``'s words, numbers or codes, best BM25 first.

        ``user_id`` means the sessions that user took part in (as ``sessions()``).
        Any text is safe: it is turned into quoted FTS terms, never passed as syntax.
        The cost follows the scope, not the store: a small scope (a session, a
        user) is read through its index and ranked on its own; a large one (the
        tenant) is ranked by ``wide_search``: BM25 with the whole index's statistics
        over a pool of rows holding the query's rarest terms together (however old)
        and short, bounded by the query, not by the store.
        """
        match = fts_query(query)
        if match is None or k <= 0:
            return []
        if types is None or self._text_pending(types):  # (the sync checks for any row)
            self.sync_text_index()  # only what was stored since the last sync (see there)
        where, params = _scope_where(self.tenant, session_id, user_id, types, since, until)
        if where is None:
            return []
        clause, values = in_scopes(self.scopes)  # the view's scopes, inside the query
        where, params = where + clause, params + values
        if session_id is None and user_id is None:
            return self._rank_wide(query, int(k), 0, where, params)
        # a temporary table holds the scope's sessions' events of those types (a rare
        # type, as notes are, is a small scope ranked whole); times filter the search
        base, base_params = _scope_where(self.tenant, session_id, user_id, types, None, None)
        key = (str(base) + clause, (*base_params, *values))
        with self._lock:
            ranked = self._rank_scope(key, match, int(k), (where, params))
        if isinstance(ranked, list):
            return ranked
        return self._rank_wide(query, int(k), ranked, where, params)

    def _scope_mark(self) -> int:
        """Commits by other connections: while it stays, what changed in the file since
        a scope table was filled is what this connection appended, or events taken out
        of reads (the search filters on status; a purge empties the tables)."""
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def _forget_scopes(self) -> None:
        """Empty the scope tables: what they hold of a purged event must go with it."""
        with self._lock:
            for table in q.SCOPE_TABLES:
                if self.connection.temp_keys.pop(table, None) is not None:
                    self._conn.execute(q.SCOPE_FTS_CLEAR.format(table=table))

    def _rank_scope(
        self,
        key: tuple[str, tuple[Any, ...]],
        match: str,
        k: int,
        within: tuple[str, list[Any]],
    ) -> list[tuple[Event, float]] | int:
        """BM25 among the scope's own events (a temporary FTS table of them); when the
        scope is too large to rank on its own, the lowest rowid of its newest
        ``LEXICAL_WINDOW`` events instead, where a wide search stops (lock held).

        The table is kept after the search.  The next search of the same scope, with
        only this store's appends in between, adds the events stored since (a range of
        the table's key) instead of reading the scope again; another process's commit
        fills it anew, and so does a scope that needs the table (the least recently used
        of :data:`~events_sql.SCOPE_TABLES`).  A scope found too large is remembered as
        such until then.
        """
        where, params = key
        c = self._conn
        mark = self._scope_mark()
        table, held = self._scope_table(key)
        if held is not None and held[:2] == (key, mark):
            _key, _mark, top, count, low = held
            if count > q.SMALL_SCOPE:
                return low  # (the newest events the wide search reads anyway)
            sql = q.SCOPE_ROWIDS_AFTER.format(where=where)
            new = [r[0] for r in c.execute(sql, (top, self.tenant, *params))]
            if new:
                self._fill_scope(table, new)
                top, count = new[-1], count + len(new)
        else:
            sql = q.SCOPE_ROWIDS.format(where=where)
            rowids = [r[0] for r in c.execute(sql, (self.tenant, *params, q.LEXICAL_WINDOW))]
            c.execute(q.SCOPE_FTS_CREATE.format(table=table))
            c.execute(q.SCOPE_FTS_CLEAR.format(table=table))
            top, count = (rowids[0] if rowids else 0), len(rowids)
            low = rowids[-1] if rowids else 0
            if count <= q.SMALL_SCOPE:
                self._fill_scope(table, rowids)
        self.connection.temp_keys[table] = (key, mark, top, count, low)
        if count > q.SMALL_SCOPE:
            return low
        sql = q.SCOPE_FTS_SEARCH.format(table=table, where=within[0])
        rows = c.execute(sql, (match, *within[1], k)).fetchall()
        return [(_row_to_event(self.tenant, r[:-1]), float(r[-1])) for r in rows]

    def _scope_table(self, key: tuple[str, tuple[Any, ...]]) -> tuple[str, ScopeHeld | None]:
        """The temporary table that holds ``key``'s scope, else the least recently used
        one (its content then replaced), and what it holds."""
        keys = self.connection.temp_keys
        order = cast(list[str], keys.setdefault("scope_order", list(q.SCOPE_TABLES)))
        table = next((t for t in order if _held(keys.get(t), key)), order[-1])
        order.remove(table)
        order.insert(0, table)
        held = keys.get(table)
        return table, held if isinstance(held, tuple) else None

    def _fill_scope(self, table: str, rowids: list[int]) -> None:
        c = self._conn
        c.execute(q.SCOPE_FTS_CREATE.format(table=table))
        for i in range(0, len(rowids), 500):
            chunk = rowids[i : i + 500]
            c.execute(q.SCOPE_FTS_FILL.format(table=table, rowids=marks(len(chunk))), chunk)

    def _rank_wide(
        self, query: str, k: int, low: int, where: str, params: list[Any]
    ) -> list[tuple[Event, float]]:
        """BM25 over a bounded pool of rows above ``low`` (see ``wide_search``), in scope.

        The reads grow (x4, up to ``LEXICAL_WINDOW`` rows per term; the pool to 4 x
        ``WIDE_POOL``; see ``Bounds.grown``) only while the scope filter leaves fewer than ``k`` and some term
        had more rows than were read (another tenant's rows, an old time window).
        """
        phrases = query_terms(query)[: q.WIDE_MAX_TERMS]
        bounds = ws.Bounds.default()
        with self._lock:
            c = self._conn
            totals = ws.IndexTotals.read(c)
            while True:
                rowids, probes = ws.gather(c, phrases, totals, low, bounds, k)
                rows = []
                for i in range(0, len(rowids), 500):
                    chunk = rowids[i : i + 500]
                    sql = q.POOL_TEXT.format(rowids=marks(len(chunk)), where=where)
                    rows += c.execute(sql, (*chunk, self.tenant, *params)).fetchall()
                more = any(not p.complete for p in probes) and bounds.probe < q.LEXICAL_WINDOW
                if len(rows) >= k or not more:
                    break
                bounds = bounds.grown()
            idf = [totals.idf(p.df(totals)) for p in probes]
            ranked = ws.score(c, rows, ws.phrase_stems(c, phrases), idf, totals)[:k]
            if not ranked:
                return []
            sql = q.EVENTS_BY_ROWID.format(rowids=marks(len(ranked)))
            found = {r[0]: r[1:] for r in c.execute(sql, [r for r, _ in ranked])}
        return [(_row_to_event(self.tenant, found[r]), s) for r, s in ranked if r in found]


#: What a scope table holds: (scope key, store mark, newest rowid, events, oldest rowid).
ScopeHeld = tuple[tuple[str, tuple[Any, ...]], int, int, int, int]


def _held(held: object, key: tuple[str, tuple[Any, ...]]) -> bool:
    return isinstance(held, tuple) and held[0] == key


def _walk_sql(template: str, forward: bool, n_types: int) -> str:
    """A walk statement (``WALK``, ``WALK_MANY``) along edges out of (``forward``) or
    into each event, over ``n_types`` edge types."""
    return template.format(
        dir_to="dst" if forward else "src",
        dir_from="src" if forward else "dst",
        types=marks(n_types),
    )


def _scope_where(
    tenant: str,
    session_id: str | None,
    user_id: str | None,
    types: Iterable[EventType] | None,
    since: float | None,
    until: float | None,
) -> tuple[str | None, list[Any]]:
    """Filter clauses on ``events`` (fixed text) and their values; ``None``: nothing fits."""
    where, params = "", []
    if session_id is not None:
        where += " AND session_id = ?"
        params.append(session_id)
    if user_id is not None:
        where += q.IN_USER_SESSIONS
        params += [tenant, user_id] * 2
    if types is not None:
        tv = [EventType(t).value for t in types]
        if not tv:
            return None, []
        where += f" AND type IN ({marks(len(tv))})"
        params.extend(tv)
    if since is not None:
        where += " AND ts >= ?"
        params.append(since)
    if until is not None:
        where += " AND ts <= ?"
        params.append(until)
    return where, params
