"""Every Cypher statement of the Neo4j checkpoint store, as named, parameterised constants.

The ``langchain-neo4j`` convention (``CYPHER_CREATE_…``, ``CYPHER_GET_…``), one module
shared by the store's sync path and, through it, the async one.  Nothing but
parameters ever carries user data.

Graph model (Neo4j 5.26+, community edition is enough), beside the event graph.  The
labels are ``Lg…`` (like the SQLite ``lg_`` tables), not ``langchain-neo4j``'s
``:Checkpoint``: its ``Neo4jSaver`` makes ``checkpoint_id`` unique across *all*
``:Checkpoint`` nodes and matches them without a tenant, so sharing the label would
break tenants, ``copy_thread`` and a ``Neo4jSaver`` running in the same database::

    (:LgCheckpoint {tenant, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
                  type, checkpoint, metadata, md_pairs, metadata_type, metadata_blob,
                  channel_versions, cv_keys, run_id, created_at})
    (:LgCheckpoint)-[:PREVIOUS]->(:LgCheckpoint)         parent in the same thread/namespace
    (:LgCheckpointBlob {tenant, thread_id, checkpoint_ns, key, channel, version, type, blob})
    (:LgCheckpointWrite {tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
                       task_path, channel, type, value})
    (:LgCheckpointBranch {tenant, thread_id, checkpoint_ns, name, head, fork_point,
                        active, created_at})

``checkpoint``/``blob``/``value`` are the serde's bytes; ``metadata`` is canonical JSON
text and ``md_pairs`` its ``path<US>json`` pairs, which is what ``list`` filters on
(Neo4j cannot look inside a JSON string).  A channel value is stored once per
``(channel, version)`` (``key``); ``cv_keys`` lists the keys a checkpoint reads.
"""

from __future__ import annotations

SCHEMA_STATEMENTS: tuple[str, ...] = (
    "CREATE CONSTRAINT beeweave_lg_checkpoint_id IF NOT EXISTS FOR (c:LgCheckpoint) "
    "REQUIRE (c.tenant, c.thread_id, c.checkpoint_ns, c.checkpoint_id) IS UNIQUE",
    "CREATE CONSTRAINT beeweave_lg_checkpoint_blob IF NOT EXISTS FOR (b:LgCheckpointBlob) "
    "REQUIRE (b.tenant, b.thread_id, b.checkpoint_ns, b.key) IS UNIQUE",
    "CREATE CONSTRAINT beeweave_lg_checkpoint_write IF NOT EXISTS FOR (w:LgCheckpointWrite) "
    "REQUIRE (w.tenant, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx) "
    "IS UNIQUE",
    "CREATE CONSTRAINT beeweave_lg_checkpoint_branch IF NOT EXISTS FOR (b:LgCheckpointBranch) "
    "REQUIRE (b.tenant, b.thread_id, b.checkpoint_ns, b.name) IS UNIQUE",
    # thread-wide housekeeping (delete/copy/prune) and listing across namespaces
    "CREATE INDEX beeweave_lg_checkpoint_thread IF NOT EXISTS FOR (c:LgCheckpoint) "
    "ON (c.tenant, c.thread_id)",
    "CREATE INDEX beeweave_lg_checkpoint_blob_thread IF NOT EXISTS FOR (b:LgCheckpointBlob) "
    "ON (b.tenant, b.thread_id)",
    "CREATE INDEX beeweave_lg_checkpoint_write_thread IF NOT EXISTS FOR (w:LgCheckpointWrite) "
    "ON (w.tenant, w.thread_id)",
    "CREATE INDEX beeweave_lg_checkpoint_run IF NOT EXISTS FOR (c:LgCheckpoint) ON (c.tenant, c.run_id)",
    # a thread's scope: only scoped checkpoints are in this index (it needs all three)
    "CREATE INDEX beeweave_lg_checkpoint_scope IF NOT EXISTS FOR (c:LgCheckpoint) "
    "ON (c.tenant, c.thread_id, c.scope)",
)

#: The scope a thread's checkpoints carry (see beeweave_core.checkpoint_scopes).
_THREAD_SCOPE = """COLLECT {
    MATCH (o:LgCheckpoint {tenant: $tenant, thread_id: $thread_id})
    USING INDEX SEEK o:LgCheckpoint(tenant, thread_id, scope)
    WHERE o.scope IS NOT NULL
    RETURN o.scope LIMIT 1
}"""
CYPHER_THREAD_SCOPE = f"RETURN head({_THREAD_SCOPE}) AS scope"

# ------------------------------------------------------------------ writes
#: One round trip per step: the checkpoint (with its thread's scope, else the put's),
#: its PREVIOUS link, the new channel blobs, and the active branch's head.
CYPHER_PUT_CHECKPOINT = (
    f"WITH coalesce(head({_THREAD_SCOPE}), $scope) AS scope"
    + """
MERGE (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                     checkpoint_id: $checkpoint_id})
SET c.parent_checkpoint_id = $parent_checkpoint_id, c.type = $type, c.checkpoint = $checkpoint,
    c.metadata = $metadata, c.md_pairs = $md_pairs, c.metadata_type = $metadata_type,
    c.metadata_blob = $metadata_blob, c.channel_versions = $channel_versions,
    c.cv_keys = $cv_keys, c.run_id = $run_id, c.created_at = $created_at, c.scope = scope
WITH c
CALL (c) {
    MATCH (p:LgCheckpoint {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                         checkpoint_id: $parent_checkpoint_id})
    USING INDEX SEEK p:LgCheckpoint(tenant, thread_id, checkpoint_ns, checkpoint_id)
    MERGE (c)-[:PREVIOUS]->(p)
}
CALL (c) {
    UNWIND $blobs AS b
    MERGE (x:LgCheckpointBlob {tenant: $tenant, thread_id: $thread_id,
                             checkpoint_ns: $checkpoint_ns, key: b.key})
    SET x.channel = b.channel, x.version = b.version, x.type = b.type, x.blob = b.blob
}
CALL (c) {
    MATCH (br:LgCheckpointBranch {tenant: $tenant, thread_id: $thread_id,
                                checkpoint_ns: $checkpoint_ns, active: true})
    USING INDEX SEEK br:LgCheckpointBranch(tenant, thread_id, checkpoint_ns, name)
    WHERE br.name IS NOT NULL
    SET br.head = c.checkpoint_id
}
RETURN c.checkpoint_id AS checkpoint_id
"""
)

#: A task's writes as new nodes: what almost every call is (a task's writes are new
#: unless it runs again); the unique constraint refuses the statement when one is
#: stored already, and the store then sends :data:`CYPHER_PUT_WRITES`.  ``CREATE``
#: costs the server less than ``MERGE`` (no lock-and-look before the insert).
CYPHER_CREATE_WRITES = """
UNWIND $writes AS w
CREATE (x:LgCheckpointWrite {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                           checkpoint_id: $checkpoint_id, task_id: w.task_id, idx: w.idx,
                           task_path: w.task_path, channel: w.channel, type: w.type,
                           value: w.value})
"""
#: :data:`CYPHER_CREATE_WRITES` for one write (a graph's last node: most calls) from
#: flat parameters: unwinding a one-item list costs the server ~15 µs more, 2% of
#: the whole call.
CYPHER_CREATE_WRITE = """
CREATE (x:LgCheckpointWrite {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                           checkpoint_id: $checkpoint_id, task_id: $task_id, idx: $idx,
                           task_path: $task_path, channel: $channel, type: $type, value: $value})
"""
#: Regular writes are kept once per (task, idx); special ones (idx < 0) are replaced.
CYPHER_PUT_WRITES = """
UNWIND $writes AS w
MERGE (x:LgCheckpointWrite {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                          checkpoint_id: $checkpoint_id, task_id: w.task_id, idx: w.idx})
ON CREATE SET x.task_path = w.task_path, x.channel = w.channel, x.type = w.type, x.value = w.value
ON MATCH SET x += CASE WHEN w.idx < 0
    THEN {task_path: w.task_path, channel: w.channel, type: w.type, value: w.value}
    ELSE {} END
"""

# ------------------------------------------------------------------- reads
#: A checkpoint with its channel blobs and pending writes (``c`` bound).
CHECKPOINT_MAP = """c {
    .thread_id, .checkpoint_ns, .checkpoint_id, .parent_checkpoint_id, .type, .checkpoint,
    .metadata, .metadata_type, .metadata_blob, .channel_versions, .scope,
    values: COLLECT {
        MATCH (b:LgCheckpointBlob {tenant: c.tenant, thread_id: c.thread_id,
                                 checkpoint_ns: c.checkpoint_ns})
        USING INDEX SEEK b:LgCheckpointBlob(tenant, thread_id, checkpoint_ns, key)
        WHERE b.key IN c.cv_keys AND b.type <> 'empty'
        RETURN b {.channel, .type, .blob}
    },
    writes: COLLECT {
        MATCH (w:LgCheckpointWrite {tenant: c.tenant, thread_id: c.thread_id,
                                  checkpoint_ns: c.checkpoint_ns, checkpoint_id: c.checkpoint_id})
        USING INDEX SEEK w:LgCheckpointWrite(tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        WHERE w.task_id IS NOT NULL AND w.idx IS NOT NULL
        RETURN w {.task_id, .task_path, .idx, .channel, .type, .value}
    }
}"""

CYPHER_GET_CHECKPOINT = f"""
MATCH (c:LgCheckpoint {{tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                      checkpoint_id: $checkpoint_id}})
USING INDEX SEEK c:LgCheckpoint(tenant, thread_id, checkpoint_ns, checkpoint_id)
RETURN {CHECKPOINT_MAP} AS row
"""

#: The active branch's head when the thread has branches (and it still exists), else
#: the newest checkpoint — what ``get_tuple`` returns without a ``checkpoint_id``.
CYPHER_GET_LATEST_CHECKPOINT = f"""
OPTIONAL MATCH (br:LgCheckpointBranch {{tenant: $tenant, thread_id: $thread_id,
                                      checkpoint_ns: $checkpoint_ns, active: true}})
    USING INDEX SEEK br:LgCheckpointBranch(tenant, thread_id, checkpoint_ns, name)
    WHERE br.name IS NOT NULL
OPTIONAL MATCH (h:LgCheckpoint {{tenant: $tenant, thread_id: $thread_id,
                               checkpoint_ns: $checkpoint_ns, checkpoint_id: br.head}})
    USING INDEX SEEK h:LgCheckpoint(tenant, thread_id, checkpoint_ns, checkpoint_id)
CALL (h) {{
    OPTIONAL MATCH (n:LgCheckpoint {{tenant: $tenant, thread_id: $thread_id,
                                   checkpoint_ns: $checkpoint_ns}})
        USING INDEX SEEK n:LgCheckpoint(tenant, thread_id, checkpoint_ns, checkpoint_id)
        WHERE h IS NULL AND n.checkpoint_id IS NOT NULL
    WITH n ORDER BY n.tenant DESC, n.thread_id DESC, n.checkpoint_ns DESC,
                    n.checkpoint_id DESC LIMIT 1
    RETURN n AS newest
}}
WITH coalesce(h, newest) AS c
WHERE c IS NOT NULL
RETURN {CHECKPOINT_MAP} AS row
"""

#: ``list`` filters: a reader's scopes (null: every scope), metadata pairs that must be
#: present, keys that must be absent or null.
_META_FILTER = """
  AND ($readable IS NULL OR c.scope IS NULL OR c.scope IN $readable)
  AND all(p IN $must WHERE p IN c.md_pairs)
  AND all(k IN $null_keys WHERE (k + 'null') IN c.md_pairs
                                OR none(p IN c.md_pairs WHERE p STARTS WITH k))
"""
#: Across threads or namespaces: an optional ``before`` id and keyset paging over the
#: full order.
_LIST_WHERE = (
    """
WHERE ($checkpoint_ns IS NULL OR c.checkpoint_ns = $checkpoint_ns)
  AND ($checkpoint_id IS NULL OR c.checkpoint_id = $checkpoint_id)
  AND ($before IS NULL OR c.checkpoint_id < $before)"""
    + _META_FILTER
    + """  AND ($after_id IS NULL OR c.checkpoint_id < $after_id
       OR (c.checkpoint_id = $after_id AND (c.thread_id < $after_thread
           OR (c.thread_id = $after_thread AND c.checkpoint_ns < $after_ns))))
WITH c ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC LIMIT $limit
"""
)
CYPHER_LIST_THREAD = (
    "MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id})"
    + _LIST_WHERE
    + f"RETURN {CHECKPOINT_MAP} AS row"
)
CYPHER_LIST_ALL = (
    "MATCH (c:LgCheckpoint {tenant: $tenant})" + _LIST_WHERE + f"RETURN {CHECKPOINT_MAP} AS row"
)


def _list_namespace(bound: str) -> str:
    """``list`` inside one thread and namespace (what LangGraph asks for), newest first.

    The unique index hands the checkpoints over in id order, so a page reads its own
    rows (and the ones the metadata filter skips), not the whole thread.  Neo4j only
    takes an index's order when ORDER BY names every indexed property, hence the
    constant ones.  ``bound`` is ``IS NOT NULL`` or ``< $below`` (``before`` and the
    previous page's last id, whichever is lower), so each page seeks to its start.
    """
    return (
        "MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id, "
        "checkpoint_ns: $checkpoint_ns})\n"
        "USING INDEX SEEK c:LgCheckpoint(tenant, thread_id, checkpoint_ns, checkpoint_id)\n"
        f"WHERE c.checkpoint_id {bound}"
        + _META_FILTER
        + "WITH c ORDER BY c.tenant DESC, c.thread_id DESC, c.checkpoint_ns DESC,\n"
        "                 c.checkpoint_id DESC LIMIT $limit\n"
        f"RETURN {CHECKPOINT_MAP} AS row"
    )


CYPHER_LIST_NAMESPACE = _list_namespace("IS NOT NULL")
CYPHER_LIST_NAMESPACE_BELOW = _list_namespace("< $below")

# ----------------------------------------------------------- housekeeping
CYPHER_DELETE_THREAD = """
CALL () { MATCH (n:LgCheckpoint {tenant: $tenant, thread_id: $thread_id}) DETACH DELETE n }
CALL () { MATCH (n:LgCheckpointBlob {tenant: $tenant, thread_id: $thread_id}) DELETE n }
CALL () { MATCH (n:LgCheckpointWrite {tenant: $tenant, thread_id: $thread_id}) DELETE n }
CALL () { MATCH (n:LgCheckpointBranch {tenant: $tenant, thread_id: $thread_id}) DELETE n }
"""

#: Deletes the runs' checkpoints and their writes; returns the threads touched.
CYPHER_DELETE_FOR_RUNS = """
MATCH (c:LgCheckpoint {tenant: $tenant}) WHERE c.run_id IN $run_ids
WITH c, c.thread_id AS tid, c.checkpoint_ns AS ns, c.checkpoint_id AS cid
CALL (tid, ns, cid) {
    MATCH (w:LgCheckpointWrite {tenant: $tenant, thread_id: tid, checkpoint_ns: ns,
                              checkpoint_id: cid})
    DELETE w
}
DETACH DELETE c
RETURN collect(DISTINCT tid) AS threads
"""

#: Pruning's view of a thread: tree shape, metadata (DeltaChannel counters), blob keys.
CYPHER_THREAD_SKELETON = """
MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id})
RETURN c.checkpoint_ns AS ns, c.checkpoint_id AS id, c.parent_checkpoint_id AS parent,
       c.metadata AS metadata, c.cv_keys AS keys, c.created_at AS created
"""
CYPHER_THREAD_BLOBS = """
MATCH (b:LgCheckpointBlob {tenant: $tenant, thread_id: $thread_id})
RETURN b.checkpoint_ns AS ns, b.key AS key, b.type <> 'empty' AS stored
"""
CYPHER_DELETE_CHECKPOINTS = """
UNWIND $ids AS x
CALL (x) {
    MATCH (w:LgCheckpointWrite {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: x.ns,
                              checkpoint_id: x.id})
    DELETE w
}
CALL (x) {
    MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: x.ns,
                         checkpoint_id: x.id})
    DETACH DELETE c
}
"""
CYPHER_DELETE_BLOBS = """
UNWIND $keys AS x
MATCH (b:LgCheckpointBlob {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: x.ns,
                         key: x.key})
DELETE b
"""

#: Copies checkpoints (then their PREVIOUS links), blobs, writes and branches.
CYPHER_COPY_THREAD = """
CALL () {
    MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $source})
    MERGE (d:LgCheckpoint {tenant: $tenant, thread_id: $target, checkpoint_ns: c.checkpoint_ns,
                         checkpoint_id: c.checkpoint_id})
    ON CREATE SET d += c {.parent_checkpoint_id, .type, .checkpoint, .metadata, .md_pairs,
                          .metadata_type, .metadata_blob, .channel_versions, .cv_keys,
                          .run_id, .created_at, .scope}
}
CALL () {
    MATCH (d:LgCheckpoint {tenant: $tenant, thread_id: $target})
    MATCH (p:LgCheckpoint {tenant: $tenant, thread_id: $target, checkpoint_ns: d.checkpoint_ns,
                         checkpoint_id: d.parent_checkpoint_id})
    MERGE (d)-[:PREVIOUS]->(p)
}
CALL () {
    MATCH (b:LgCheckpointBlob {tenant: $tenant, thread_id: $source})
    MERGE (x:LgCheckpointBlob {tenant: $tenant, thread_id: $target, checkpoint_ns: b.checkpoint_ns,
                             key: b.key})
    ON CREATE SET x += b {.channel, .version, .type, .blob}
}
CALL () {
    MATCH (w:LgCheckpointWrite {tenant: $tenant, thread_id: $source})
    MERGE (x:LgCheckpointWrite {tenant: $tenant, thread_id: $target, checkpoint_ns: w.checkpoint_ns,
                              checkpoint_id: w.checkpoint_id, task_id: w.task_id, idx: w.idx})
    ON CREATE SET x += w {.task_path, .channel, .type, .value}
}
CALL () {
    MATCH (b:LgCheckpointBranch {tenant: $tenant, thread_id: $source})
    MERGE (x:LgCheckpointBranch {tenant: $tenant, thread_id: $target,
                               checkpoint_ns: b.checkpoint_ns, name: b.name})
    ON CREATE SET x += b {.head, .fork_point, .active, .created_at}
}
"""

# ----------------------------------------------------------------- branches
CYPHER_LIST_BRANCHES = """
MATCH (b:LgCheckpointBranch {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns})
RETURN b.name AS name, b.head AS head, b.fork_point AS fork_point, b.active AS active,
       b.created_at AS created_at
ORDER BY b.created_at, b.name
"""
CYPHER_CREATE_BRANCH = """
CREATE (b:LgCheckpointBranch {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                            name: $name, head: $head, fork_point: $fork_point, active: false,
                            created_at: $created_at})
"""
CYPHER_SET_ACTIVE_BRANCH = """
MATCH (b:LgCheckpointBranch {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns})
SET b.active = (b.name = $name)
"""
CYPHER_DELETE_BRANCH = """
MATCH (b:LgCheckpointBranch {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                           name: $name})
DELETE b
"""
CYPHER_CHECKPOINT_EXISTS = """
MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns,
                     checkpoint_id: $checkpoint_id})
RETURN count(c) > 0 AS found
"""
CYPHER_LATEST_ID = """
MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns})
RETURN max(c.checkpoint_id) AS latest, min(c.created_at) AS first_ts
"""
CYPHER_TREE = """
MATCH (c:LgCheckpoint {tenant: $tenant, thread_id: $thread_id, checkpoint_ns: $checkpoint_ns})
RETURN c.checkpoint_id AS id, c.parent_checkpoint_id AS parent
ORDER BY c.checkpoint_id
"""
#: Everything of a tenant, label by label, in batches (auto-commit transactions).
CHECKPOINT_LABELS = ("LgCheckpoint", "LgCheckpointBlob", "LgCheckpointWrite", "LgCheckpointBranch")
CYPHER_PURGE_TENANT = tuple(
    f"MATCH (n:{label} {{tenant: $tenant}}) "
    "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"
    for label in CHECKPOINT_LABELS
)
