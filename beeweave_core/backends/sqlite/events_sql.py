"""Every SQL statement of the SQLite store, as named constants.

Kept apart from the store logic (the ``langgraph-checkpoint-sqlite`` convention) so
a reviewer can read the whole schema and every query in one place.  All statements
take parameters; no user data is ever formatted into SQL text.
"""

#: Row of ``beeweave_meta`` holding this schema's version (see ``sqlite_db``).
SCHEMA_KEY = "schema_version"
SCHEMA_VERSION = 8

#: (version, statements) applied in order by ``setup()``; never edit a released one.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS events (
                rowid INTEGER PRIMARY KEY,
                tenant TEXT NOT NULL,
                id TEXT NOT NULL,
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                type TEXT NOT NULL,
                role TEXT,
                content TEXT NOT NULL,
                payload TEXT NOT NULL,
                ts REAL NOT NULL,
                parents TEXT NOT NULL,
                links TEXT NOT NULL,
                meta TEXT NOT NULL,
                source TEXT NOT NULL,
                user_id TEXT,
                agent_id TEXT,
                tokens INTEGER NOT NULL DEFAULT 0,
                status TEXT NOT NULL DEFAULT 'active',
                status_reason TEXT,
                UNIQUE (tenant, id)
            )""",
            "CREATE UNIQUE INDEX IF NOT EXISTS events_session_seq ON events (tenant, session_id, seq)",
            "CREATE INDEX IF NOT EXISTS events_ts ON events (tenant, ts)",
            "CREATE INDEX IF NOT EXISTS events_user ON events (tenant, user_id, ts)",
            """CREATE TABLE IF NOT EXISTS edges (
                tenant TEXT NOT NULL,
                src TEXT NOT NULL,
                type TEXT NOT NULL,
                dst TEXT NOT NULL,
                meta TEXT NOT NULL DEFAULT '{}',
                PRIMARY KEY (tenant, src, type, dst)
            ) WITHOUT ROWID""",
            "CREATE INDEX IF NOT EXISTS edges_dst ON edges (tenant, dst, type)",
            """CREATE TABLE IF NOT EXISTS artifacts (
                tenant TEXT NOT NULL,
                sha256 TEXT NOT NULL,
                chars INTEGER NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (tenant, sha256)
            ) WITHOUT ROWID""",
        ],
    ),
    (
        2,
        [
            "CREATE INDEX IF NOT EXISTS events_type ON events (tenant, type, ts)",
        ],
    ),
    (
        3,
        [
            # Full-text index over segmented text; rowid = events.rowid.  ``body`` is
            # the event's content, ``context`` the text of the event before it in its
            # session (what a reply answers), searched at half weight (SEARCH_TEXT).
            # Rows are added by FTS_CATCH_UP, off the write path (see search_text).
            "CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5("
            "body, context, tokenize = 'porter unicode61 remove_diacritics 2')",
            "CREATE TRIGGER IF NOT EXISTS events_fts_delete AFTER DELETE ON events BEGIN "
            "DELETE FROM events_fts WHERE rowid = old.rowid; END",
        ],
    ),
    (
        4,
        [
            # the event's scope (business line, ``meta["scope"]``): reads filter on it
            "ALTER TABLE events ADD COLUMN scope TEXT",
            "UPDATE events SET scope = json_extract(meta, '$.scope') "
            "WHERE json_extract(meta, '$.scope') IS NOT NULL",
            "CREATE INDEX IF NOT EXISTS events_scope ON events (tenant, scope, ts)",
        ],
    ),
    (
        5,
        [
            # the scopes one session holds, read per assembly (SCOPES_OF_SESSION): a
            # seek per distinct scope instead of a pass over the session's rows
            "CREATE INDEX IF NOT EXISTS events_session_scope ON events (tenant, session_id, scope)",
        ],
    ),
    (
        6,
        [
            # a user's sessions, one seek each (RECENT_USER_SESSIONS), read per assembly
            "CREATE INDEX IF NOT EXISTS events_user_session "
            "ON events (tenant, user_id, session_id)",
            # what (tenant, user_id, ts) served (a user's sessions) this one serves
            # better, and no read orders a user's events by time: one index less to
            # write per event
            "DROP INDEX IF EXISTS events_user",
        ],
    ),
    (
        7,
        [
            # what a purge erased (beeweave_core/tombstones.py): append refuses copies
            """CREATE TABLE IF NOT EXISTS tombstones (
                tenant TEXT NOT NULL,
                kind TEXT NOT NULL,
                value TEXT NOT NULL,
                at REAL NOT NULL,
                PRIMARY KEY (tenant, value, kind)
            )""",
        ],
    ),
    (
        8,
        [
            # the index holds every Chinese character beside jieba's words now
            # (text/segment.py): emptied, it is rebuilt by FTS_CATCH_UP from the events
            "DELETE FROM events_fts",
        ],
    ),
]

#: Python function that segments text for the FTS index (``lexical.fts_text``).
FTS_TEXT_FUNCTION = "beeweave_fts_text"

#: The full-text index trails the events table: rows above its highest rowid are
#: not indexed yet (rowids only grow; a purged top row leaves the index with it).
FTS_PENDING = (
    "SELECT (SELECT COALESCE(MAX(rowid), 0) FROM events) "
    "> (SELECT COALESCE(MAX(rowid), 0) FROM events_fts)"
)
#: Whether rows of some types (``{types}``: their placeholders) wait to be indexed.
FTS_PENDING_OF = (
    "SELECT EXISTS (SELECT 1 FROM events "
    "WHERE rowid > (SELECT COALESCE(MAX(rowid), 0) FROM events_fts) AND type IN ({types}))"
)
#: Index the next ``?`` pending rows, with the text of the active event before each
#: one (a hidden event's words must not make the next one findable).
#: Merge all FTS segments, dropping the terms of deleted rows (after a purge).
FTS_OPTIMIZE = "INSERT INTO events_fts (events_fts) VALUES ('optimize')"
FTS_CATCH_UP = """
INSERT INTO events_fts (rowid, body, context)
SELECT e.rowid, beeweave_fts_text(e.content), beeweave_fts_text(COALESCE((
    SELECT substr(p.content, 1, 2000) FROM events p
    WHERE p.tenant = e.tenant AND p.session_id = e.session_id AND p.seq < e.seq
      AND p.content != '' AND p.status = 'active' ORDER BY p.seq DESC LIMIT 1), ''))
FROM events e WHERE e.rowid > (SELECT COALESCE(MAX(rowid), 0) FROM events_fts)
ORDER BY e.rowid LIMIT ?
"""


EVENT_COLUMNS = (
    "id, session_id, seq, type, role, content, payload, ts, parents, links, meta, source, "
    "status, status_reason"
)

INSERT_EVENT = (
    "INSERT INTO events (tenant, id, session_id, seq, type, role, content, payload, ts, "
    "parents, links, meta, source, user_id, agent_id, tokens, status, status_reason, scope) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_EDGE = "INSERT OR IGNORE INTO edges (tenant, src, type, dst, meta) VALUES (?, ?, ?, ?, ?)"
INSERT_ARTIFACT = (
    "INSERT OR IGNORE INTO artifacts (tenant, sha256, chars, body) VALUES (?, ?, ?, ?)"
)
GET_ARTIFACT = "SELECT body FROM artifacts WHERE tenant = ? AND sha256 = ?"
#: For a scoped reader: the body, and whether an event it may read refers to it
#: (``{in_scopes}``: ``db.in_scopes``).
GET_ARTIFACT_SCOPED = (
    "SELECT body, EXISTS (SELECT 1 FROM events WHERE tenant = ? AND instr(payload, ?) > 0"
    "{in_scopes}) FROM artifacts WHERE tenant = ? AND sha256 = ?"
)
#: ``tokens`` of a row whose content has not been counted yet (see ``_count_tokens``).
TOKENS_UNCOUNTED = -1
#: ``{indexed}``/``{where}``: as SESSION_STATS (only the sessions asked about).
UNCOUNTED_TOKENS = (
    "SELECT id, content FROM events {indexed} WHERE tenant = ? AND tokens < 0 {where} LIMIT 2000"
)
SET_TOKENS = "UPDATE events SET tokens = ? WHERE tenant = ? AND id = ?"
MAX_SEQ = "SELECT COALESCE(MAX(seq), -1) FROM events WHERE tenant = ? AND session_id = ?"

#: The scope of stored events, whatever the view may read (to refuse, not to show).
SCOPES_OF_IDS = "SELECT id, scope FROM events WHERE tenant = ? AND id IN ({ids})"
#: The distinct scopes of one session (``?1`` tenant, ``?2`` session): a loose index
#: scan, one seek per scope past the one before, then whether any row is unscoped; the
#: cost follows the number of scopes, not of events.
SCOPES_OF_SESSION = """
WITH RECURSIVE named(scope) AS (
    SELECT (SELECT scope FROM events INDEXED BY events_session_scope
            WHERE tenant = ?1 AND session_id = ?2 AND scope IS NOT NULL
            ORDER BY scope LIMIT 1)
    UNION ALL
    SELECT (SELECT e.scope FROM events e INDEXED BY events_session_scope
            WHERE e.tenant = ?1 AND e.session_id = ?2 AND e.scope > named.scope
            ORDER BY e.scope LIMIT 1)
    FROM named WHERE named.scope IS NOT NULL
)
SELECT scope FROM named WHERE scope IS NOT NULL
UNION ALL
SELECT NULL WHERE EXISTS (SELECT 1 FROM events INDEXED BY events_session_scope
                          WHERE tenant = ?1 AND session_id = ?2 AND scope IS NULL)
"""

#: ``{ids}`` is replaced by a run of ``?`` placeholders, never by data.
EXISTING_IDS = "SELECT id FROM events WHERE tenant = ? AND id IN ({ids})"
GET_EVENTS = f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = ? AND id IN ({{ids}})"

#: ``INDEXED BY``: with a type or time filter the planner would otherwise walk the
#: type or time index over the whole tenant.
TIMELINE = (
    f"SELECT {EVENT_COLUMNS} FROM events INDEXED BY events_session_seq "
    "WHERE tenant = ? AND session_id = ?"
)

#: Recursive walk over typed edges, nearest first; ``{dir_*}`` pick the direction.
WALK = """
WITH RECURSIVE walk(id, depth) AS (
    SELECT ?, 0
    UNION
    SELECT e.{dir_to}, walk.depth + 1
    FROM walk JOIN edges e ON e.tenant = ? AND e.{dir_from} = walk.id
    WHERE walk.depth < ? AND e.type IN ({types})
)
SELECT id, MIN(depth) FROM walk WHERE depth > 0 GROUP BY id ORDER BY MIN(depth)
"""

#: :data:`WALK` from several events at once (``?1``: their ids as a JSON array), each
#: reached event with the seed it was reached from.
WALK_MANY = """
WITH RECURSIVE walk(seed, id, depth) AS (
    SELECT value, value, 0 FROM json_each(?)
    UNION
    SELECT walk.seed, e.{dir_to}, walk.depth + 1
    FROM walk JOIN edges e ON e.tenant = ? AND e.{dir_from} = walk.id
    WHERE walk.depth < ? AND e.type IN ({types})
)
SELECT seed, id, MIN(depth) FROM walk WHERE depth > 0 GROUP BY seed, id
"""

EDGES_OF_EVENT_OUT = "SELECT src, type, dst, meta FROM edges WHERE tenant = ? AND src = ?"
EDGES_OF_EVENT_IN = (
    "SELECT src, type, dst, meta FROM edges INDEXED BY edges_dst WHERE tenant = ? AND dst = ?"
)
#: From the session's events to their edges (``CROSS JOIN`` keeps that order: the
#: other way round walks every edge of the tenant).
EDGES_OF_SESSION = (
    "SELECT e.src, e.type, e.dst, e.meta FROM events v "
    "CROSS JOIN edges e ON e.tenant = v.tenant AND e.src = v.id "
    "WHERE v.tenant = ? AND v.session_id = ?"
)
NEXT_OF_SESSION = (
    "SELECT a.id, b.id FROM events a JOIN events b "
    "ON b.tenant = a.tenant AND b.session_id = a.session_id AND b.seq = a.seq + 1 "
    "WHERE a.tenant = ? AND a.session_id = ?"
)
NEXT_OF_EVENT = (
    "SELECT a.id, b.id FROM events a JOIN events b "
    "ON b.tenant = a.tenant AND b.session_id = a.session_id AND b.seq = a.seq + 1 "
    "WHERE a.tenant = ? AND {side}.id = ?"
)

#: A page of the tenant's active events, newest first, after a (ts, rowid) key: the
#: ts index walked backwards (``recent_session_ids`` stops once it has enough);
#: ``{where}``: the view's scope clause.
RECENT_SESSION_ROWS = (
    "SELECT session_id, ts, rowid FROM events INDEXED BY events_ts WHERE tenant = ? "
    "AND ts <= ? AND NOT (ts = ? AND rowid >= ?) AND status = 'active' {where} "
    "ORDER BY ts DESC, rowid DESC LIMIT ?"
)


def _user_sessions(tenant: str, user: str) -> str:
    """The sessions of a user as the CTE ``s(sid)`` (``tenant``/``user``: the marks of
    their values): a loose scan of the (tenant, user_id, session_id) index, one seek
    per session past the one before; the cost follows the user's sessions, not their
    events."""
    return f"""
WITH RECURSIVE s(sid) AS (
    SELECT (SELECT MIN(session_id) FROM events INDEXED BY events_user_session
            WHERE tenant = {tenant} AND user_id = {user})
    UNION ALL
    SELECT (SELECT MIN(session_id) FROM events INDEXED BY events_user_session
            WHERE tenant = {tenant} AND user_id = {user} AND session_id > s.sid)
    FROM s WHERE s.sid IS NOT NULL
)"""


_USER_SESSIONS = _user_sessions("?1", "?2")
#: ``AND session_id IN`` the sessions of a user (values: tenant, user, tenant, user),
#: for a filter inside a bigger statement: the same loose scan, by position.
IN_USER_SESSIONS = (
    " AND session_id IN (" + _user_sessions("?", "?") + "\nSELECT sid FROM s WHERE sid IS NOT NULL)"
)
#: The sessions a user took part in; ``{scoped}``: a scoped view's check that the user
#: has an event it may read there (:data:`USER_IN_SCOPES`), or nothing.
#: Sessions whose id is in [?2, ?3): a prefix, read off the (tenant, session_id, seq) index.
SESSION_IDS_BETWEEN = (
    "SELECT DISTINCT session_id FROM events INDEXED BY events_session_seq "
    "WHERE tenant = ? AND session_id >= ? AND session_id < ?"
)
USER_SESSION_IDS = (
    _USER_SESSIONS
    + """
SELECT sid FROM s WHERE s.sid IS NOT NULL{scoped}
"""
)
#: The same with each session's last seq and its time (one more seek per session).
RECENT_USER_SESSIONS = (
    _USER_SESSIONS
    + """, last(sid, seq) AS (
    SELECT sid, (SELECT MAX(seq) FROM events INDEXED BY events_session_seq
                 WHERE tenant = ?1 AND session_id = s.sid)
    FROM s WHERE s.sid IS NOT NULL{scoped}
)
SELECT last.sid, last.seq, e.ts FROM last
JOIN events e INDEXED BY events_session_seq
  ON e.tenant = ?1 AND e.session_id = last.sid AND e.seq = last.seq
"""
)
#: ``{scopes}``: numbered marks from ``?3`` on, one per scope the view reads.
USER_IN_SCOPES = """ AND EXISTS (
    SELECT 1 FROM events INDEXED BY events_user_session
    WHERE tenant = ?1 AND user_id = ?2 AND session_id = s.sid
      AND (scope IS NULL OR scope IN ({scopes})))"""

#: ``{indexed}``: ``INDEXED BY events_session_seq`` when sessions or a user are
#: named (the planner would otherwise walk the type index over the whole tenant).
SESSION_STATS = """
SELECT session_id, type, COUNT(*), MIN(ts), MAX(ts), MAX(seq), SUM(tokens),
       GROUP_CONCAT(DISTINCT user_id)
FROM events {indexed} WHERE tenant = ? AND status = 'active' {where}
GROUP BY session_id, type
"""

SET_STATUS = (
    "UPDATE events SET status = ?, status_reason = ? "
    "WHERE tenant = ? AND status = 'active' AND id IN ({ids})"
)
PURGE_SESSION_EDGES = (
    "DELETE FROM edges WHERE tenant = ? AND (src IN (SELECT id FROM events WHERE tenant = ? "
    "AND session_id = ?) OR dst IN (SELECT id FROM events WHERE tenant = ? AND session_id = ?))"
)
#: Whether the tenant has any tombstone (most never do: the append then reads no more).
HAS_TOMBSTONES = "SELECT 1 FROM tombstones WHERE tenant = ? LIMIT 1"
TOMBSTONES_OF = "SELECT kind, value, at FROM tombstones WHERE tenant = ? AND value IN ({ids})"
ALL_TOMBSTONES = "SELECT kind, value, at FROM tombstones WHERE tenant = ?"
LIFT_TOMBSTONE = "DELETE FROM tombstones WHERE tenant = ? AND kind = ? AND value = ?"
#: A second purge of the same record moves its date forward, never back.
ADD_TOMBSTONE = (
    "INSERT INTO tombstones (tenant, kind, value, at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (tenant, value, kind) DO UPDATE SET at = max(at, excluded.at)"
)
PURGE_USER_EDGES = (
    "DELETE FROM edges WHERE tenant = ? AND (src IN (SELECT id FROM events WHERE tenant = ? "
    "AND user_id = ?) OR dst IN (SELECT id FROM events WHERE tenant = ? AND user_id = ?))"
)
USER_EVENT_IDS = "SELECT id FROM events WHERE tenant = ? AND user_id = ?"
#: A purge's deletes return the ids they removed (the vectors to drop are exactly those).
PURGE_USER = "DELETE FROM events WHERE tenant = ? AND user_id = ? RETURNING id"
PURGE_SESSION = "DELETE FROM events WHERE tenant = ? AND session_id = ? RETURNING id"
PURGE_IDS_EDGES = "DELETE FROM edges WHERE tenant = ? AND (src IN ({ids}) OR dst IN ({ids}))"
PURGE_IDS = "DELETE FROM events WHERE tenant = ? AND id IN ({ids}) RETURNING id"
PURGE_ORPHAN_ARTIFACTS = (
    "DELETE FROM artifacts WHERE tenant = ? AND NOT EXISTS (SELECT 1 FROM events "
    "WHERE events.tenant = artifacts.tenant AND instr(events.payload, artifacts.sha256) > 0)"
)

#: Lexical search looks at most at this many of the newest events of its scope, so
#: a tenant-wide (or very large) search costs the same at 10k and at 10M events.
LEXICAL_WINDOW = 20_000
#: A scope of at most this many events is ranked on its own (SCOPE_FTS_*): the cost
#: is that of the scope, whatever the store holds.
SMALL_SCOPE = 4_000

#: Active events of the scope, newest first, through the index on the scope's
#: sessions (``{where}``: fixed clauses on session_id / user_id / type / ts, values
#: bound).  ``INDEXED BY``: with a type filter the planner would otherwise walk every
#: event of that type in the tenant (every memory of every user).
SCOPE_ROWIDS = """
SELECT rowid FROM events INDEXED BY events_session_seq WHERE tenant = ? AND status = 'active'
{where} ORDER BY rowid DESC LIMIT ?
"""
#: Per-connection, in-memory FTS tables (same tokenizer), each holding one scope's
#: indexed text while it is ranked; BM25 there weighs words by their rarity in the
#: scope.  Filled from the main index by rowid (no re-segmenting), refilled when the
#: scope or the database changed.  An assembly ranks its session and its user's
#: sessions, for turns and for notes, in turn: four tables (``{table}``: one of them).
SCOPE_TABLES = ("scope_fts_0", "scope_fts_1", "scope_fts_2", "scope_fts_3")
SCOPE_FTS_CREATE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table} USING fts5("
    "body, context, tokenize = 'porter unicode61 remove_diacritics 2')"
)
SCOPE_FTS_FILL = (
    "INSERT INTO temp.{table} (rowid, body, context) "
    "SELECT rowid, body, context FROM events_fts WHERE rowid IN ({rowids})"
)
SCOPE_FTS_CLEAR = "DELETE FROM temp.{table}"
SCOPE_FTS_SEARCH = f"""
SELECT {EVENT_COLUMNS}, -bm25({{table}}, 1.0, 0.5) AS score
FROM temp.{{table}} JOIN events ON events.rowid = {{table}}.rowid
WHERE {{table}} MATCH ? AND events.status = 'active' {{where}}
ORDER BY bm25({{table}}, 1.0, 0.5) LIMIT ?
"""
#: The scope's events stored after rowid ``?`` (a range of the table's own key: what
#: was appended since the temporary table was filled, read without walking the scope).
SCOPE_ROWIDS_AFTER = """
SELECT rowid FROM events NOT INDEXED WHERE rowid > ? AND tenant = ? AND status = 'active'
{where} ORDER BY rowid
"""
#: Wide search: rows read per query phrase (newest first, for its frequency), rows read
#: from conjunctions of the rarest phrases (with their lengths, to pick the pool), rows
#: of its phrases together a conjunction may walk (the newest ones; see ``_floor``),
#: rows scored at most, and phrases looked at (the first ones of a long query).
WIDE_PROBE = 400
WIDE_READ = 3_000
WIDE_WALK = 300_000
WIDE_POOL = 300
WIDE_MAX_TERMS = 12
#: Wide (tenant) search, bounded by the query (see ``wide_search``).  FTS5 keeps the
#: index's row count and token totals per column in its ``averages`` record (id 1),
#: each row's token counts in ``_docsize`` and its text in ``_content`` (by rowid).
FTS_AVERAGES = "SELECT block FROM events_fts_data WHERE id = 1"
#: Two subqueries: SQLite finds MIN or MAX alone in one index step, not both at once.
FTS_ROWID_RANGE = (
    "SELECT (SELECT MIN(id) FROM events_fts_docsize), (SELECT MAX(id) FROM events_fts_docsize)"
)
#: The newest ``?`` rows holding a phrase (or a conjunction) above a rowid, with their
#: token counts: a walk of the terms' doclists from their end and one primary-key
#: step per row, no ranking (``bm25()`` would first count every row holding each term).
PROBE = """
SELECT f.rowid, d.sz FROM events_fts AS f JOIN events_fts_docsize AS d ON d.id = f.rowid
WHERE events_fts MATCH ? AND f.rowid >= ? ORDER BY f.rowid DESC LIMIT ?
"""
#: An FTS5 match of ``{}`` in the event's own text only (column ``body``, not ``context``).
IN_BODY = "body : ({})"
#: The pooled rows that are in scope, with the indexed text and token counts.
#: ``NOT INDEXED``: by rowid only (with a long rowid list the planner would rather
#: walk the tenant's ts index).
POOL_TEXT = """
SELECT e.rowid, f.c0, f.c1, d.sz FROM events AS e NOT INDEXED
JOIN events_fts_content f ON f.id = e.rowid
JOIN events_fts_docsize d ON d.id = e.rowid
WHERE e.rowid IN ({rowids}) AND e.tenant = ? AND e.status = 'active' {where}
"""
EVENTS_BY_ROWID = (
    f"SELECT rowid, {EVENT_COLUMNS} FROM events NOT INDEXED WHERE rowid IN ({{rowids}})"
)
#: For benchmarks only (``wide_search.ranking_share``): FTS5's own BM25 over the whole
#: index, and its exact score of given rows: what the wide search is measured against.
EXHAUSTIVE = """
SELECT rowid, -rank FROM events_fts WHERE events_fts MATCH ? AND rank MATCH 'bm25(1.0, 0.5)'
ORDER BY rank LIMIT ?
"""
EXISTING_ROWIDS = "SELECT rowid FROM events WHERE tenant = ? AND id IN ({ids})"
EXACT_SCORES = """
SELECT rowid, -rank FROM events_fts WHERE events_fts MATCH ? AND rank MATCH 'bm25(1.0, 0.5)'
AND rowid IN ({rowids})
"""
#: A per-connection scratch table whose vocabulary gives SQLite's own stem of a word
#: (one row per word, emptied after each use).
STEM_CREATE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.beeweave_stem USING fts5("
    "w, tokenize = 'porter unicode61 remove_diacritics 2')"
)
STEM_VOCAB_CREATE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.beeweave_stem_v "
    "USING fts5vocab(temp, beeweave_stem, instance)"
)
STEM_INSERT = "INSERT INTO temp.beeweave_stem (rowid, w) VALUES (?, ?)"
STEM_READ = "SELECT term, doc, offset FROM temp.beeweave_stem_v"
STEM_CLEAR = "DELETE FROM temp.beeweave_stem"
