"""Every Cypher statement of the Neo4j store, as named, parameterised constants.

Kept apart from the store logic (the ``langchain-neo4j`` checkpoint convention) so a
reviewer can read the whole graph model and every query in one place.  User data
only ever travels as parameters.  Three things are not parameters, and none of them
comes from user input:

* event-type labels (``:Event:ToolResult``) are set with Cypher's dynamic
  ``SET e:$(label)`` from values of the fixed :data:`beeweave_core.events.TYPE_LABELS`
  map; reads filter relationship types with ``[:$any($types)]`` from the
  :class:`EdgeType` enum.  Writes spell each relationship type out: one statement
  (or ``FOREACH``) per :class:`EdgeType`, generated below from the enum, because
  ``MERGE`` of a dynamic type scans every relationship of the database;
* the hop bound of a variable-length walk (Cypher does not accept a parameter
  there): :func:`bounded` writes a validated ``int`` in place of ``{MAX_HOPS}``;
* schema statements (names, analyzer) are fixed text.

Graph model (Neo4j 5.26 LTS or newer, community edition is enough)::

    (:Event:<TypeLabel> {tenant, id, session_id, seq, type, role, content, payload,
                         ts, parents, links, meta, source, user_id, agent_id, scope,
                         tokens, status, status_reason, terms})
    (:Event)-[:NEXT]->(:Event)              session order, materialised at write
    (:Event)-[:CAUSED_BY|REFERS_TO|SUMMARIZES|DERIVED_FROM|SUPERSEDES {meta}]->(:Event)
    (:Event)-[:HAS_ARTIFACT]->(:Artifact {tenant, sha256, chars, body})
    (:Session {tenant, id, last_seq, context_terms, scopes, user_ids})  seq allocator,
                                            locked by each writer; tokens of its last
                                            content; what session_scopes.py and
                                            user_sessions.py keep
    (:UserSession {tenant, user_id, session_id})  a user took part in a session

``payload``, ``meta``, ``source``, ``parents`` and ``links`` hold canonical JSON
text (Neo4j properties cannot be maps).  An edge may point at an event that is not
stored (yet): its target is a *placeholder* ``(:Event {tenant, id})`` without
``seq``; storing the event later fills the same node in.  Reads skip placeholders.
"""

from __future__ import annotations

from beeweave_core.backends.neo4j import session_scopes, user_sessions
from beeweave_core.events import EdgeType

#: The full-text index ranks the tokens the SQLite store's FTS5 index holds (see
#: :mod:`beeweave_core.text.lucene`): each event's ``terms`` property is its own
#: tokens, twice, and its previous turn's, once, already segmented (jieba for
#: Chinese), lower-cased and stemmed by BeeWeave, so Lucene only splits on spaces.
#: Searched with the same stemmed query terms, an event ranks as on SQLite.  (Two
#: fields, own tokens once and the previous turn's, weighted 2:1 in the query, would
#: store and index a third less text, but Lucene's per-field length norms rank them
#: further from FTS5's: LoCoMo's lexical recall@10 fell from 0.738 to 0.709.)
FULLTEXT_INDEX = "beeweave_event_terms"
FULLTEXT_ANALYZER = "whitespace"
#: Properties in the full-text index: terms are searched; tenant and session_id are
#: there only so a query can be narrowed inside Lucene (see CYPHER_SEARCH_TEXT).
FULLTEXT_PROPERTIES = ("terms", "tenant", "session_id")
#: Every full-text index on events: (name, properties, analyzer).
FULLTEXT_INDEXES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (FULLTEXT_INDEX, FULLTEXT_PROPERTIES, FULLTEXT_ANALYZER),
)
#: Indexes of older BeeWeave versions, which ``setup()`` drops as no read uses them
#: any more (and each costs every write an update): full-text ones of Lucene's CJK
#: and English analyzers over ``content``, (tenant, ts) (time windows are read
#: within a session, by its (tenant, session_id, seq) index, or filter other hits)
#: and (tenant, user_id) (its reads seek (tenant, user_id, session_id)).
OBSOLETE_INDEXES = (
    "beeweave_event_text",
    "beeweave_event_text_en",
    "beeweave_event_ts",
    "beeweave_event_user",
)


def fulltext_config(analyzer: str) -> dict[str, str | bool]:
    """The ``indexConfig`` every BeeWeave full-text index is made with.

    *Eventually consistent*: a commit hands its Lucene updates to a background
    thread instead of analysing ~1 KB of text per event itself (about 40% of the
    server's time per written event).  Readers keep read-your-writes by waiting for
    that thread first (CYPHER_SEARCH_TEXT), which costs nothing once it has caught
    up.  ``setup()`` rebuilds an index created with other settings.
    """
    return {"fulltext.analyzer": analyzer, "fulltext.eventually_consistent": True}


#: Smallest server that has dynamic labels/types (``$(...)``, ``$any(...)``) and
#: ``ANY SHORTEST`` path selection.
MIN_SERVER_VERSION = (5, 26)


# ------------------------------------------------------------------ schema
def _cypher_literal(value: str | bool) -> str:
    """A fixed option value (never user input) as Cypher text."""
    return ("true" if value else "false") if isinstance(value, bool) else f"'{value}'"


CYPHER_GET_SERVER_VERSION = (
    "CALL dbms.components() YIELD name, versions, edition "
    "WHERE name = 'Neo4j Kernel' RETURN versions[0] AS version, edition"
)

SCHEMA_STATEMENTS: tuple[str, ...] = (
    # one event per (tenant, id): a redelivery can never become a second node
    "CREATE CONSTRAINT beeweave_event_id IF NOT EXISTS "
    "FOR (e:Event) REQUIRE (e.tenant, e.id) IS UNIQUE",
    # one event per session position: two writers can never fork a session
    # (placeholders have no seq and are not covered); also the timeline index
    "CREATE CONSTRAINT beeweave_event_seq IF NOT EXISTS "
    "FOR (e:Event) REQUIRE (e.tenant, e.session_id, e.seq) IS UNIQUE",
    "CREATE CONSTRAINT beeweave_session_id IF NOT EXISTS "
    "FOR (s:Session) REQUIRE (s.tenant, s.id) IS UNIQUE",
    "CREATE CONSTRAINT beeweave_artifact_sha IF NOT EXISTS "
    "FOR (a:Artifact) REQUIRE (a.tenant, a.sha256) IS UNIQUE",
    # which sessions a user took part in (user_sessions.py): by user, and by session
    # for a purge
    "CREATE CONSTRAINT beeweave_user_session IF NOT EXISTS "
    "FOR (p:UserSession) REQUIRE (p.tenant, p.user_id, p.session_id) IS UNIQUE",
    "CREATE INDEX beeweave_user_session_by_session IF NOT EXISTS "
    "FOR (p:UserSession) ON (p.tenant, p.session_id)",
    # whether a user has an event in a session, one seek (_USER_SESSIONS)
    "CREATE INDEX beeweave_event_user_session IF NOT EXISTS "
    "FOR (e:Event) ON (e.tenant, e.user_id, e.session_id)",
    "CREATE INDEX beeweave_event_scope IF NOT EXISTS FOR (e:Event) ON (e.tenant, e.scope)",
    # what a purge erased (beeweave_core/tombstones.py), looked up by value per append
    "CREATE CONSTRAINT beeweave_tombstone IF NOT EXISTS "
    "FOR (x:Tombstone) REQUIRE (x.tenant, x.value, x.kind) IS UNIQUE",
    *(
        f"CREATE FULLTEXT INDEX {name} IF NOT EXISTS FOR (e:Event) "
        f"ON EACH [{', '.join('e.' + p for p in props)}] OPTIONS {{indexConfig: {{"
        + ", ".join(f"`{k}`: {_cypher_literal(v)}" for k, v in fulltext_config(analyzer).items())
        + "}}"
        for name, props, analyzer in FULLTEXT_INDEXES
    ),
)
#: Which of ``$names`` are indexes of the database.
CYPHER_GET_INDEXES_NAMED = "SHOW INDEXES YIELD name WHERE name IN $names RETURN name"
#: A full-text index as it exists (none: no row), to compare with the wanted one.
CYPHER_GET_FULLTEXT_INDEX = """
SHOW FULLTEXT INDEXES YIELD name, labelsOrTypes, properties, options
WHERE name = $name
RETURN labelsOrTypes AS labels, properties, options.indexConfig AS config
"""
#: Index names are fixed text (never user input); a parameter is not accepted here.
CYPHER_DROP_INDEX = "DROP INDEX {name} IF EXISTS"
#: Indexes that populate in the background after creation; ``setup()`` waits for
#: these (and only these: another component's index may take its time).
AWAITED_INDEXES = ("beeweave_event_user_session", FULLTEXT_INDEX)
CYPHER_AWAIT_INDEX = "CALL db.awaitIndex($name, $seconds)"

# ------------------------------------------------------------------ projections
#: The stored event as a map (``e`` bound); the store turns it into an ``Event``.
EVENT_MAP = (
    "e {.id, .session_id, .seq, .type, .role, .content, .payload, .ts, .parents, "
    ".links, .meta, .source, .status, .status_reason}"
)
#: The reader's scopes (``$scopes`` null: every scope; see scopes.py): unscoped events
#: and those of a readable scope, for node ``e``.
_IN_SCOPES = "($scopes IS NULL OR e.scope IS NULL OR e.scope IN $scopes)"
#: A stored (not placeholder) event that reads show: ``$all`` lets hidden ones through.
_VISIBLE = f"e.seq IS NOT NULL AND ($all OR e.status = 'active') AND {_IN_SCOPES}"

# ------------------------------------------------------------------ writes
#: Prefix of the statements every append sends: plan them once per server and keep
#: the plan.  Neo4j replans a cached statement when the label counts it was planned
#: with drift (a store growing from empty, a big purge), and planning the append's
#: CREATE takes about 0.3 s: each round of replans stalled one append by 0.5–0.9 s.
#: Their lookups are unique-constraint seeks, element-id seeks and hinted range
#: seeks, the same plan at any count (``test_query_plans`` checks them).
KEEP_PLAN = "CYPHER replan=skip\n"
#: Start of every append: lock each session the batch writes to (sorted ids, so
#: writers never deadlock), creating it on first use, and read ``last_seq``, the id
#: of the event there (the new events' NEXT predecessor) and ``context_terms`` (the
#: first new event's previous turn, see ``terms``) only once the lock is held.  A
#: session an older BeeWeave wrote has no ``context_terms`` yet: the start of its
#: last content is looked up instead (once: this append stores the session's context).
CYPHER_BEGIN_APPEND = (
    KEEP_PLAN
    + """
UNWIND $session_ids AS sid
MERGE (s:Session {tenant: $tenant, id: sid})
ON CREATE SET s.last_seq = -1, s.context_terms = ''
SET s._lock = true
REMOVE s._lock
WITH sid, s
OPTIONAL MATCH (t:Event {tenant: $tenant, session_id: sid, seq: s.last_seq})
OPTIONAL CALL (sid, s) {
  // an empty seq range unless needed (a filter on s alone is applied after the seek)
  WITH sid, CASE WHEN s.context_terms IS NULL THEN s.last_seq ELSE -1 END AS upto
  MATCH (p:Event {tenant: $tenant, session_id: sid})
  USING INDEX SEEK p:Event(tenant, session_id, seq)
  WHERE p.seq <= upto AND p.content <> ''
  RETURN left(p.content, $context_chars) AS before ORDER BY p.seq DESC LIMIT 1
}
RETURN collect({sid: sid, last_seq: s.last_seq, tail: t.id, context: s.context_terms,
                before: before}) AS sessions
"""
)
#: Then, still under the locks, which of the batch's ids exist: stored events
#: (redeliveries) or placeholders (to fill in).  A statement of its own: one that
#: writes (the MERGE above) would seek each id with a lock on its index entry.
CYPHER_FIND_IDS = (
    KEEP_PLAN
    + """
UNWIND $ids AS id
MATCH (e:Event {tenant: $tenant, id: id})
RETURN collect({id: e.id, stored: e.seq IS NOT NULL}) AS found
"""
)
#: A session's new ``last_seq``, its scopes (see ``session_scopes``) and, after an
#: append (not an import: ``terms`` recomputes its sessions), its ``context_terms``.
_SET_LAST_SEQ = f"""
UNWIND $sessions AS x
MATCH (s:Session {{tenant: $tenant, id: x.id}})
{session_scopes.EXTEND}
SET s.last_seq = x.last_seq, s.context_terms = coalesce(x.context, s.context_terms)
{user_sessions.MERGE_PAIRS}"""
CYPHER_SET_LAST_SEQ = KEEP_PLAN + _SET_LAST_SEQ
CYPHER_MERGE_ARTIFACTS = """
UNWIND $artifacts AS a
MERGE (x:Artifact {tenant: $tenant, sha256: a.sha256})
ON CREATE SET x.chars = a.chars, x.body = a.body
ON MATCH SET x.chars = coalesce(x.chars, a.chars), x.body = coalesce(x.body, a.body)
"""


def _edge_foreach(verb: str) -> str:
    """One FOREACH per edge type (static types: see CYPHER_MERGE_EDGES); a target
    not stored yet becomes a placeholder.  ``r.edges`` maps type → target ids."""
    return "\n".join(
        f"FOREACH (d IN coalesce(r.edges.{t.value}, []) | "
        f"MERGE (b:Event {{tenant: $tenant, id: d}}) {verb} (e)-[:{t.value}]->(b))"
        for t in EdgeType
        if t is not EdgeType.NEXT
    )


def _per_edge_type(subquery: str) -> str:
    """``subquery`` once per edge type (``TYPE`` replaced: a written type, see
    CYPHER_MERGE_EDGES), each an own ``CALL`` that runs once per statement."""
    return "\n".join(
        "CALL (made) { " + subquery.replace("TYPE", t.value) + " }"
        for t in EdgeType
        if t is not EdgeType.NEXT
    )


#: New events (``r.props`` holds tenant and id too) with their type label, their
#: typed edges, the NEXT edge from their predecessor, and the sessions' new
#: ``last_seq`` — one round trip.  ``CREATE``, not ``MERGE``: the store checked under
#: the session lock that the ids are new (the (tenant, id) constraint refuses a
#: concurrent writer of the same id in another session), and a new node has no
#: edges yet.  ``made`` holds every new node before any edge is drawn.  A big append
#: is written in parts (see ``parts.py``), one statement each.  Edges come as lists
#: per type of [position in ``made``, target] pairs, the target reached by its
#: position when it is in the same part (``$near``), by element id when an earlier
#: part of the append created it (``$far``), by id otherwise (``$seek``: a stored
#: event, or a placeholder made for a target not stored yet); predecessors likewise
#: as [predecessor, position] (``$next_near``, ``$next_far``, ``$next_seek``).  Only
#: the edges there are cost work: nothing runs per event for the types it lacks.
#: Returns the new nodes' element ids, in order, for the parts after.
CYPHER_CREATE_EVENTS = (
    KEEP_PLAN
    + f"""
CALL () {{
UNWIND $rows AS r
CREATE (e:Event)
SET e = r.props, e:$(r.label)
WITH collect(e) AS made
{
        _per_edge_type(
            "UNWIND coalesce($near.TYPE, []) AS x "
            "WITH made[x[0]] AS e, made[x[1]] AS b CREATE (e)-[:TYPE]->(b)"
        )
    }
{
        _per_edge_type(
            "UNWIND coalesce($far.TYPE, []) AS x MATCH (b) WHERE elementId(b) = x[1] "
            "WITH made[x[0]] AS e, b CREATE (e)-[:TYPE]->(b)"
        )
    }
{
        _per_edge_type(
            "UNWIND coalesce($seek.TYPE, []) AS x WITH made[x[0]] AS e, x[1] AS d "
            "MERGE (b:Event {tenant: $tenant, id: d}) CREATE (e)-[:TYPE]->(b)"
        )
    }
CALL (made) {{ UNWIND $next_near AS x WITH made[x[0]] AS p, made[x[1]] AS e
  CREATE (p)-[:NEXT]->(e) }}
CALL (made) {{ UNWIND $next_far AS x MATCH (p) WHERE elementId(p) = x[0]
  WITH p, made[x[1]] AS e CREATE (p)-[:NEXT]->(e) }}
CALL (made) {{ UNWIND $next_seek AS x MATCH (p:Event {{tenant: $tenant, id: x[0]}})
  WITH p, made[x[1]] AS e CREATE (p)-[:NEXT]->(e) }}
RETURN [e IN made | elementId(e)] AS made
}}
CALL () {{{_SET_LAST_SEQ}}}
RETURN made
"""
)
#: Fill in placeholders (ids some edge pointed at before the event arrived); they
#: may have edges already, so MERGE.
CYPHER_FILL_PLACEHOLDERS = f"""
UNWIND $rows AS r
MATCH (e:Event {{tenant: $tenant, id: r.props.id}})
SET e += r.props, e:$(r.label)
{_edge_foreach("MERGE")}
WITH e, r WHERE r.prev IS NOT NULL
MATCH (p:Event {{tenant: $tenant, id: r.prev}})
MERGE (p)-[:NEXT]->(e)
"""
CYPHER_LINK_ARTIFACTS = """
UNWIND $rows AS r
MATCH (e:Event {tenant: $tenant, id: r.id})
UNWIND r.shas AS sha
MATCH (a:Artifact {tenant: $tenant, sha256: sha})
MERGE (e)-[:HAS_ARTIFACT]->(a)
"""
#: Typed edges, one statement per type: Neo4j 5.26 plans ``MERGE`` of a dynamic
#: type ``[:$(t)]`` as a scan of every relationship in the database, a static type
#: as an expand between the two nodes.  A missing end becomes a placeholder;
#: ``relationships_created`` of the summary counts the new edges.
CYPHER_MERGE_EDGES = {
    t: f"""
UNWIND $edges AS r
MERGE (a:Event {{tenant: $tenant, id: r.src}})
MERGE (b:Event {{tenant: $tenant, id: r.dst}})
MERGE (a)-[x:{t.value}]->(b)
ON CREATE SET x.meta = r.meta
"""
    for t in EdgeType
    if t is not EdgeType.NEXT
}
#: Import keeps stored seqs, which may leave or fill holes: NEXT from the event at
#: seq-1 and to the one at seq+1, found by the (tenant, session_id, seq) index.
CYPHER_CREATE_NEXT = """
UNWIND $ids AS id
MATCH (e:Event {tenant: $tenant, id: id})
CALL (e) {
  MATCH (p:Event {tenant: $tenant, session_id: e.session_id, seq: e.seq - 1})
  MERGE (p)-[:NEXT]->(e)
}
CALL (e) {
  MATCH (n:Event {tenant: $tenant, session_id: e.session_id, seq: e.seq + 1})
  MERGE (e)-[:NEXT]->(n)
}
"""
CYPHER_SET_STATUS = """
UNWIND $ids AS id
MATCH (e:Event {tenant: $tenant, id: id})
WHERE e.seq IS NOT NULL AND e.status = 'active'
SET e.status = $status, e.status_reason = $reason
RETURN count(e) AS n
"""

# ------------------------------------------------------------------ purge
CYPHER_SESSION_IDS_STARTING = """
MATCH (s:Session {tenant: $tenant}) WHERE s.id STARTS WITH $prefix
RETURN s.id AS id
"""
CYPHER_GET_SESSION_EVENT_IDS = """
MATCH (e:Event {tenant: $tenant, session_id: $session_id})
WHERE e.seq IS NOT NULL
RETURN e.id AS id
"""
CYPHER_GET_SESSIONS_OF_IDS = """
UNWIND $ids AS id
MATCH (e:Event {tenant: $tenant, id: id})
WHERE e.session_id IS NOT NULL
RETURN DISTINCT e.session_id AS sid
"""
CYPHER_LOCK_EXISTING_SESSIONS = """
UNWIND $session_ids AS sid
MATCH (s:Session {tenant: $tenant, id: sid})
SET s._lock = true
REMOVE s._lock
"""
#: Delete events with their relationships; report what may be left orphaned.
CYPHER_PURGE_EVENTS = """
UNWIND $ids AS id
MATCH (e:Event {tenant: $tenant, id: id})
WITH e, id, e.seq IS NOT NULL AS stored,
     [(e)-[:HAS_ARTIFACT]->(a) | a.sha256] AS shas,
     [(e)--(m:Event) WHERE m.seq IS NULL | m.id] AS placeholders
// vector chunks of a purged event carry its text: they go with it
CALL (e) { OPTIONAL MATCH (c:BeeweaveChunk)-[:CHUNK_OF]->(e) DETACH DELETE c }
DETACH DELETE e
RETURN id, stored, shas, placeholders
"""
CYPHER_DELETE_ORPHAN_ARTIFACTS = """
UNWIND $shas AS sha
MATCH (a:Artifact {tenant: $tenant, sha256: sha})
WHERE NOT EXISTS { (a)<-[:HAS_ARTIFACT]-() }
DELETE a
"""
CYPHER_DELETE_ORPHAN_PLACEHOLDERS = """
UNWIND $ids AS id
MATCH (e:Event {tenant: $tenant, id: id})
WHERE e.seq IS NULL AND NOT EXISTS { (e)--() }
DELETE e
"""
#: After a purge the next seq follows the highest one left (as SQLite's MAX(seq));
#: a session with no events left loses its node.
CYPHER_RESET_SESSIONS = """
UNWIND $session_ids AS sid
MATCH (s:Session {tenant: $tenant, id: sid})
CALL (sid) {
  OPTIONAL MATCH (e:Event {tenant: $tenant, session_id: sid})
  WHERE e.seq IS NOT NULL
  RETURN max(e.seq) AS top
}
CALL (s, top) {
  WITH s, top WHERE top IS NULL
  DELETE s
}
CALL (s, top) {
  WITH s, top WHERE top IS NOT NULL
  SET s.last_seq = top
}
"""
#: Everything of one tenant, in batches (runs as an auto-commit transaction); the
#: ``IS NOT NULL`` lets each label's (tenant, key) uniqueness index find the nodes.
CYPHER_PURGE_TENANT = {
    label: f"""
MATCH (n:{label} {{tenant: $tenant}})
WHERE n.{key} IS NOT NULL
CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS
"""
    for label, key in (
        ("Event", "id"),
        ("Session", "id"),
        ("Artifact", "sha256"),
        ("UserSession", "session_id"),
        ("Tombstone", "value"),
        # what the Neo4j vector index keeps per tenant (beeweave_core/index/neo4j_vector.py)
        ("BeeweaveChunk", "id"),
        ("BeeweaveIndexState", "identity"),
    )
}

# ------------------------------------------------------------------ reads
CYPHER_GET_EVENTS = f"""
UNWIND $ids AS id
MATCH (e:Event {{tenant: $tenant, id: id}})
WHERE {_VISIBLE}
RETURN {EVENT_MAP} AS event
"""
_TIMELINE = f"""
MATCH (e:Event {{tenant: $tenant, session_id: $session_id}})
WHERE {_VISIBLE}
  AND ($seq_from IS NULL OR e.seq >= $seq_from)
  AND ($seq_to IS NULL OR e.seq <= $seq_to)
  AND ($since IS NULL OR e.ts >= $since)
  AND ($until IS NULL OR e.ts <= $until)
  AND ($types IS NULL OR e.type IN $types)
RETURN {EVENT_MAP} AS event
"""
CYPHER_GET_TIMELINE = _TIMELINE + "ORDER BY e.seq"
#: The latest ``$last`` (newest first; the store reverses them).
CYPHER_GET_TIMELINE_LAST = _TIMELINE + "ORDER BY e.seq DESC LIMIT $last"

#: Nearest distance to every event reachable along ``$types`` within ``{MAX_HOPS}``
#: hops.  ``ANY SHORTEST`` is a breadth-first search, so a dense DAG does not
#: explode into all its paths; the ``CALL`` keeps the planner expanding from ``s``
#: (without it, a near-empty database gets a plan that scans every node as a
#: possible end).  Hidden events are walked through, not returned.
CYPHER_GET_ANCESTORS = f"""
MATCH (s:Event {{tenant: $tenant, id: $id}})
CALL (s) {{
  MATCH p = ANY SHORTEST (s)-[:$any($types)]->{{1,{{MAX_HOPS}}}}(e)
  RETURN e, length(p) AS depth
}}
WITH e, depth
WHERE {_VISIBLE}
RETURN {EVENT_MAP} AS event, depth
"""
CYPHER_GET_DESCENDANTS = f"""
MATCH (s:Event {{tenant: $tenant, id: $id}})
CALL (s) {{
  MATCH p = ANY SHORTEST (s)<-[:$any($types)]-{{1,{{MAX_HOPS}}}}(e)
  RETURN e, length(p) AS depth
}}
WITH e, depth
WHERE {_VISIBLE}
RETURN {EVENT_MAP} AS event, depth
"""

#: The branches of ``around``: per seed (``$seeds``: id, lo, hi), its causes and
#: effects (as the two walks above) and its session's events from ``lo`` to ``hi``;
#: :func:`around_query` joins the branches a call needs.
_AROUND_UP = """
  MATCH p = ANY SHORTEST (s)-[:$any($types)]->{1,{MAX_HOPS}}(e)
  RETURN e, length(p) AS dist, 0 AS way"""
_AROUND_DOWN = """
  MATCH p = ANY SHORTEST (s)<-[:$any($types)]-{1,{MAX_HOPS}}(e)
  RETURN e, length(p) AS dist, 1 AS way"""
_AROUND_NEAR = """
  MATCH (e:Event {tenant: $tenant, session_id: s.session_id})
  WHERE e.seq >= seed.lo AND e.seq <= seed.hi
  RETURN e, abs(e.seq - s.seq) AS dist, 2 AS way"""


def around_query(walk: bool, near: bool) -> str:
    """One statement for every seed's walks (``walk``) and neighbours (``near``)."""
    branches = ([_AROUND_UP, _AROUND_DOWN] if walk else []) + ([_AROUND_NEAR] if near else [])
    body = "\n  UNION ALL".join(branches)
    return f"""
UNWIND $seeds AS seed
MATCH (s:Event {{tenant: $tenant, id: seed.id}})
CALL (s, seed) {{{body}
}}
WITH seed, e, dist, way
WHERE {_VISIBLE}
RETURN seed.id AS seed, {EVENT_MAP} AS event, dist, way
"""


#: ``USING INDEX SEEK``: on a fresh database (no statistics yet), or one that held
#: many events and lost them, the planner serves the ORDER BY from a scan of a whole
#: index instead of seeking the one id (or session).
_EDGE_ROW = "a.id AS src, type(r) AS type, b.id AS dst, r.meta AS meta ORDER BY src, type, dst"
CYPHER_GET_EDGES_OUT = f"""
MATCH (a:Event {{tenant: $tenant, id: $id}})-[r:$any($types)]->(b:Event)
USING INDEX SEEK a:Event(tenant, id)
RETURN {_EDGE_ROW}
"""
CYPHER_GET_EDGES_IN = f"""
MATCH (a:Event)-[r:$any($types)]->(b:Event {{tenant: $tenant, id: $id}})
USING INDEX SEEK b:Event(tenant, id)
RETURN {_EDGE_ROW}
"""
CYPHER_GET_SESSION_EDGES = f"""
MATCH (a:Event {{tenant: $tenant, session_id: $session_id}})-[r:$any($types)]->(b:Event)
USING INDEX SEEK a:Event(tenant, session_id, seq)
WHERE a.seq IS NOT NULL
RETURN {_EDGE_ROW}
"""

_STATS_TAIL = """
WITH e.session_id AS sid, e.type AS type, count(*) AS n, min(e.ts) AS first,
     max(e.ts) AS last, max(e.seq) AS top, sum(e.tokens) AS tokens,
     collect(DISTINCT e.user_id) AS users
WITH sid, collect([type, n]) AS counts, min(first) AS first, max(last) AS last,
     max(top) AS last_seq, sum(tokens) AS tokens, collect(users) AS users
RETURN sid, counts, first, last, last_seq, tokens,
       reduce(acc = [], u IN users | acc + u) AS user_ids
"""
CYPHER_GET_ALL_SESSION_STATS = (
    f"""
MATCH (e:Event {{tenant: $tenant}})
WHERE e.session_id IS NOT NULL AND e.seq IS NOT NULL AND e.status = 'active'
  AND {_IN_SCOPES}
"""
    + _STATS_TAIL
)
CYPHER_GET_SESSION_STATS = (
    f"""
UNWIND $session_ids AS sid
MATCH (e:Event {{tenant: $tenant, session_id: sid}})
WHERE e.seq IS NOT NULL AND e.status = 'active' AND {_IN_SCOPES}
"""
    + _STATS_TAIL
)
#: The sessions a user took part in, ``p`` bound for each: the user's UserSession
#: pairs (user_sessions.py), each confirmed by a seek for an event of the user the
#: reader may see; never a walk over the user's events, nor the tenant's sessions
#: (``USING INDEX SEEK``: a fresh database's planner would scan an index instead).
_USER_SESSIONS = f"""
MATCH (p:UserSession {{tenant: $tenant, user_id: $user_id}})
USING INDEX SEEK p:UserSession(tenant, user_id, session_id)
WHERE p.session_id IS NOT NULL
CALL (p) {{
  MATCH (e:Event {{tenant: $tenant, user_id: $user_id, session_id: p.session_id}})
  USING INDEX SEEK e:Event(tenant, user_id, session_id)
  WHERE e.seq IS NOT NULL AND {_IN_SCOPES}
  RETURN e.id AS one LIMIT 1
}}
"""
#: Sessions a user took part in (any status, like SQLite's ``sessions(user_id=)``).
CYPHER_GET_USER_SESSIONS = _USER_SESSIONS + "RETURN p.session_id AS sid\n"
#: The same with each session's last seq and its time (two more seeks per session).
CYPHER_RECENT_USER_SESSIONS = (
    _USER_SESSIONS
    + """MATCH (s:Session {tenant: $tenant, id: p.session_id})
USING INDEX SEEK s:Session(tenant, id)
WHERE s.last_seq >= 0
MATCH (e:Event {tenant: $tenant, session_id: s.id, seq: s.last_seq})
USING INDEX SEEK e:Event(tenant, session_id, seq)
RETURN s.id AS sid, s.last_seq AS last_seq, e.ts AS ts
"""
)
#: The scope of stored events, whatever the reader may see (to refuse, not to show).
CYPHER_GET_SCOPES_OF_IDS = """
UNWIND $ids AS id
MATCH (e:Event {tenant: $tenant, id: id})
WHERE e.seq IS NOT NULL
RETURN e.id AS id, e.scope AS scope
"""
CYPHER_GET_SCOPES_OF_SESSION = """
MATCH (e:Event {tenant: $tenant, session_id: $session_id})
WHERE e.seq IS NOT NULL
RETURN DISTINCT e.scope AS scope
"""
#: Token counts are left for later by writes (``tokens = -1``) and filled in by
#: the first read that needs them (counting costs as much as the whole write).
CYPHER_GET_UNCOUNTED_ALL = """
MATCH (e:Event {tenant: $tenant})
WHERE e.id IS NOT NULL AND e.tokens < 0
RETURN e.id AS id, e.content AS content
LIMIT $limit
"""
CYPHER_GET_UNCOUNTED_OF_SESSIONS = """
UNWIND $session_ids AS sid
MATCH (e:Event {tenant: $tenant, session_id: sid})
WHERE e.seq IS NOT NULL AND e.tokens < 0
RETURN e.id AS id, e.content AS content
LIMIT $limit
"""
CYPHER_SET_TOKENS = """
UNWIND $rows AS r
MATCH (e:Event {tenant: $tenant, id: r.id})
SET e.tokens = r.tokens
"""
CYPHER_GET_ARTIFACT = """
MATCH (a:Artifact {tenant: $tenant, sha256: $sha256})
RETURN a.body AS body, $scopes IS NULL OR EXISTS {
    MATCH (e:Event)-[:HAS_ARTIFACT]->(a) WHERE e.scope IS NULL OR e.scope IN $scopes
} AS visible
"""

#: BM25 hits from the full-text index, filtered exactly in Cypher.  ``$search``
#: narrows to the tenant inside Lucene (zero-weight clause) and field-qualifies the
#: stemmed query terms to ``terms``; ``raw`` (hits before filtering) tells the
#: store whether a larger ``$limit`` could find more.  The first line waits until
#: the (eventually consistent) index holds every write committed before.
CYPHER_SEARCH_TEXT = f"""
CALL db.index.fulltext.awaitEventuallyConsistentIndexRefresh()
CALL db.index.fulltext.queryNodes($index, $search, {{limit: $limit}}) YIELD node, score
WITH collect({{e: node, s: score}}) AS hits
WITH size(hits) AS raw, [h IN hits WHERE h.s > 0 AND h.e.tenant = $tenant
     AND h.e.seq IS NOT NULL AND h.e.status = 'active'
     AND ($scopes IS NULL OR h.e.scope IS NULL OR h.e.scope IN $scopes)
     AND ($session_ids IS NULL OR h.e.session_id IN $session_ids)
     AND ($types IS NULL OR h.e.type IN $types)
     AND ($since IS NULL OR h.e.ts >= $since)
     AND ($until IS NULL OR h.e.ts <= $until)] AS kept
UNWIND (CASE WHEN size(kept) = 0 THEN [null] ELSE kept END) AS h
WITH raw, h.e AS e, h.s AS score ORDER BY score DESC LIMIT $k
RETURN raw, {EVENT_MAP} AS event, score
"""
#: The content of every stored event of some sessions, in order (``terms`` of a
#: whole session: after an import, a purge of single events, an upgrade).
CYPHER_GET_SESSION_TEXTS = """
UNWIND $sessions AS s
MATCH (e:Event {tenant: s.tenant, session_id: s.id})
WHERE e.seq IS NOT NULL
RETURN s.tenant AS tenant, s.id AS sid, e.id AS id, e.content AS content
ORDER BY tenant, sid, e.seq
"""
#: Events' ``terms`` and their sessions' ``context_terms`` (rows of any tenant).
CYPHER_SET_TERMS = """
CALL () {
  UNWIND $rows AS r
  MATCH (e:Event {tenant: r.tenant, id: r.id})
  SET e.terms = r.terms
}
CALL () {
  UNWIND $sessions AS x
  MATCH (s:Session {tenant: x.tenant, id: x.id})
  SET s.context_terms = x.context
}
"""
#: Sessions (of any tenant) with events an older BeeWeave stored without ``terms``;
#: read once, when ``setup()`` creates the full-text index.
CYPHER_GET_SESSIONS_WITHOUT_TERMS = """
MATCH (e:Event)
WHERE e.seq IS NOT NULL AND e.terms IS NULL
RETURN DISTINCT e.tenant AS tenant, e.session_id AS id
"""


def bounded(template: str, max_hops: int) -> str:
    """``template`` with its ``{MAX_HOPS}`` bound set to a validated int.

    Cypher takes no parameter in a quantifier (``{1,$n}`` is a syntax error), so the
    bound is written into the text; only an ``int`` checked here can get there.
    """
    if isinstance(max_hops, bool) or not isinstance(max_hops, int) or max_hops < 1:
        raise ValueError(f"max_hops must be a positive int, got {max_hops!r}")
    return template.replace("{MAX_HOPS}", str(max_hops))


#: The tombstones filed under any of ``$values`` (ids, sessions, users of a batch).
CYPHER_TOMBSTONES_OF = """
MATCH (x:Tombstone {tenant: $tenant}) WHERE x.value IN $values
RETURN x.kind AS kind, x.value AS value, x.at AS at
"""
CYPHER_ALL_TOMBSTONES = """
MATCH (x:Tombstone {tenant: $tenant}) WHERE x.value IS NOT NULL
RETURN x.kind AS kind, x.value AS value, x.at AS at
"""
CYPHER_LIFT_TOMBSTONE = """
MATCH (x:Tombstone {tenant: $tenant, value: $value, kind: $kind})
DELETE x
RETURN count(*) AS n
"""
#: A purge's tombstones; a second purge of the same record moves its date forward.
CYPHER_ADD_TOMBSTONES = """
UNWIND $rows AS r
MERGE (x:Tombstone {tenant: $tenant, value: r.value, kind: r.kind})
SET x.at = CASE WHEN x.at IS NULL OR x.at < r.at THEN r.at ELSE x.at END
"""
CYPHER_GET_USER_EVENT_IDS = "MATCH (e:Event {tenant: $tenant, user_id: $user_id}) RETURN e.id AS id"
