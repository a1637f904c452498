"""Every SQL statement of the SQLite checkpoint store, as named constants.

The tables live in the same file as the event graph (``beeweave.db``) and carry a
``tenant`` column like every BeeWeave table.  They are prefixed ``lg_`` so a
``SqliteSaver`` pointed at the same file (tables ``checkpoints``/``writes``) cannot
collide with them.  All statements take parameters; the only text ever spliced in
is a run of ``?`` placeholders or one of the fixed WHERE fragments below.
"""

SCHEMA_KEY = "checkpoint_schema_version"
SCHEMA_VERSION = 2

#: (version, statements) applied in order by ``setup()``; never edit a released one.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS lg_checkpoints (
                tenant TEXT NOT NULL,
                thread_id TEXT NOT NULL,
                checkpoint_ns TEXT NOT NULL DEFAULT '',
                checkpoint_id TEXT NOT NULL,
                parent_checkpoint_id TEXT,
                type TEXT NOT NULL,
                checkpoint BLOB NOT NULL,
                metadata TEXT NOT NULL,
                metadata_type TEXT,
                metadata_blob BLOB,
                channel_versions TEXT NOT NULL,
                run_id TEXT,
                created_at REAL NOT NULL,
                UNIQUE (tenant, thread_id, checkpoint_ns, checkpoint_id)
            )""",
            "CREATE INDEX IF NOT EXISTS lg_checkpoints_run ON lg_checkpoints (tenant, run_id) "
            "WHERE run_id IS NOT NULL",
            """CREATE TABLE IF NOT EXISTS lg_checkpoint_blobs (
                tenant TEXT NOT NULL,
                thread_id TEXT NOT NULL,
                checkpoint_ns TEXT NOT NULL DEFAULT '',
                channel TEXT NOT NULL,
                version TEXT NOT NULL,
                type TEXT NOT NULL,
                blob BLOB,
                UNIQUE (tenant, thread_id, checkpoint_ns, channel, version)
            )""",
            """CREATE TABLE IF NOT EXISTS lg_checkpoint_writes (
                tenant TEXT NOT NULL,
                thread_id TEXT NOT NULL,
                checkpoint_ns TEXT NOT NULL DEFAULT '',
                checkpoint_id TEXT NOT NULL,
                task_id TEXT NOT NULL,
                idx INTEGER NOT NULL,
                task_path TEXT NOT NULL DEFAULT '',
                channel TEXT NOT NULL,
                type TEXT NOT NULL,
                value BLOB,
                UNIQUE (tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
            )""",
            """CREATE TABLE IF NOT EXISTS lg_checkpoint_branches (
                tenant TEXT NOT NULL,
                thread_id TEXT NOT NULL,
                checkpoint_ns TEXT NOT NULL DEFAULT '',
                name TEXT NOT NULL,
                head TEXT,
                fork_point TEXT,
                active INTEGER NOT NULL DEFAULT 0,
                created_at REAL NOT NULL,
                PRIMARY KEY (tenant, thread_id, checkpoint_ns, name)
            ) WITHOUT ROWID""",
        ],
    ),
    (
        2,
        [
            # a thread's business line (see beeweave_core.checkpoint_scopes)
            "ALTER TABLE lg_checkpoints ADD COLUMN scope TEXT",
            "CREATE INDEX IF NOT EXISTS lg_checkpoints_scope "
            "ON lg_checkpoints (tenant, thread_id, scope) WHERE scope IS NOT NULL",
        ],
    ),
]

# ------------------------------------------------------------------- writes
#: The scope a thread's checkpoints carry (the partial index answers it).
THREAD_SCOPE = (
    "SELECT scope FROM lg_checkpoints WHERE tenant = ?1 AND thread_id = ?2 "
    "AND scope IS NOT NULL LIMIT 1"
)
#: A checkpoint keeps its thread's scope; only a thread without one takes the put's.
UPSERT_CHECKPOINT = (
    "INSERT OR REPLACE INTO lg_checkpoints (tenant, thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata, metadata_type, metadata_blob, "
    "channel_versions, run_id, created_at, scope) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
    f"?10, ?11, ?12, ?13, COALESCE(({THREAD_SCOPE}), ?14))"
)
UPSERT_BLOB = (
    "INSERT OR REPLACE INTO lg_checkpoint_blobs (tenant, thread_id, checkpoint_ns, channel, "
    "version, type, blob) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
ADVANCE_ACTIVE_BRANCH = (
    "UPDATE lg_checkpoint_branches SET head = ? "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND active = 1"
)
#: Regular writes are kept once per (task, idx); special ones (idx < 0) are replaced.
_WRITE_COLUMNS = (
    "(tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, "
    "type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_WRITE = "INSERT OR IGNORE INTO lg_checkpoint_writes " + _WRITE_COLUMNS
REPLACE_WRITE = "INSERT OR REPLACE INTO lg_checkpoint_writes " + _WRITE_COLUMNS

# -------------------------------------------------------------------- reads
CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
    "metadata, metadata_type, metadata_blob, channel_versions, scope"
)
GET_CHECKPOINT = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoints "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
#: The active branch's head when a thread has branches (and it still exists), else the
#: newest checkpoint — what ``get_tuple`` returns without a ``checkpoint_id``.
GET_LATEST_CHECKPOINT = f"""
SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoints
WHERE tenant = ?1 AND thread_id = ?2 AND checkpoint_ns = ?3 AND checkpoint_id = COALESCE(
    (SELECT b.head FROM lg_checkpoint_branches b JOIN lg_checkpoints x
        ON x.tenant = b.tenant AND x.thread_id = b.thread_id
       AND x.checkpoint_ns = b.checkpoint_ns AND x.checkpoint_id = b.head
     WHERE b.tenant = ?1 AND b.thread_id = ?2 AND b.checkpoint_ns = ?3 AND b.active = 1),
    (SELECT MAX(checkpoint_id) FROM lg_checkpoints
     WHERE tenant = ?1 AND thread_id = ?2 AND checkpoint_ns = ?3))
"""
#: The blobs of one checkpoint's channel versions (``?5`` = its channel_versions JSON)
#: and its pending writes, in one round trip.  ``kind`` 0 = blob, 1 = write.
GET_VALUES_AND_WRITES = """
SELECT 0, b.channel, b.type, b.blob, NULL, NULL, NULL
FROM json_each(?5) v JOIN lg_checkpoint_blobs b
  ON b.tenant = ?1 AND b.thread_id = ?2 AND b.checkpoint_ns = ?3
 AND b.channel = v.key AND b.version = v.value
UNION ALL
SELECT 1, w.channel, w.type, w.value, w.task_id, w.task_path, w.idx
FROM lg_checkpoint_writes w
WHERE w.tenant = ?1 AND w.thread_id = ?2 AND w.checkpoint_ns = ?3 AND w.checkpoint_id = ?4
"""

#: ``list``: this head, then any of the fixed ``LIST_*`` fragments, then the order.
LIST_HEAD = f"SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoints WHERE tenant = ?"
LIST_THREAD = " AND thread_id = ?"
LIST_NS = " AND checkpoint_ns = ?"
LIST_ID = " AND checkpoint_id = ?"
LIST_BEFORE = " AND checkpoint_id < ?"
#: A metadata filter: the JSON path is a parameter too (keys are validated anyway).
LIST_META_EQ = " AND json_extract(metadata, ?) = ?"
LIST_META_NULL = " AND json_extract(metadata, ?) IS NULL"
#: Keyset paging over the full order, so equal ids in two threads are not skipped.
LIST_AFTER = " AND (checkpoint_id, thread_id, checkpoint_ns) < (?, ?, ?)"
LIST_ORDER = " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT ?"

# ----------------------------------------------------------- housekeeping
DELETE_THREAD = [
    "DELETE FROM lg_checkpoints WHERE tenant = ? AND thread_id = ?",
    "DELETE FROM lg_checkpoint_blobs WHERE tenant = ? AND thread_id = ?",
    "DELETE FROM lg_checkpoint_writes WHERE tenant = ? AND thread_id = ?",
    "DELETE FROM lg_checkpoint_branches WHERE tenant = ? AND thread_id = ?",
]
#: ``{ids}`` is a run of ``?`` placeholders (one per run id).
THREADS_OF_RUNS = (
    "SELECT DISTINCT thread_id FROM lg_checkpoints WHERE tenant = ? AND run_id IN ({ids})"
)
DELETE_WRITES_OF_RUNS = (
    "DELETE FROM lg_checkpoint_writes WHERE tenant = ? AND "
    "(thread_id, checkpoint_ns, checkpoint_id) IN (SELECT thread_id, checkpoint_ns, "
    "checkpoint_id FROM lg_checkpoints WHERE tenant = ? AND run_id IN ({ids}))"
)
DELETE_CHECKPOINTS_OF_RUNS = "DELETE FROM lg_checkpoints WHERE tenant = ? AND run_id IN ({ids})"
DELETE_CHECKPOINT = (
    "DELETE FROM lg_checkpoints "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
DELETE_WRITES_OF_CHECKPOINT = (
    "DELETE FROM lg_checkpoint_writes "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
#: Blobs no remaining checkpoint of the thread points at.
DELETE_ORPHAN_BLOBS = """
DELETE FROM lg_checkpoint_blobs
WHERE tenant = ?1 AND thread_id = ?2 AND NOT EXISTS (
    SELECT 1 FROM lg_checkpoints c, json_each(c.channel_versions) v
    WHERE c.tenant = ?1 AND c.thread_id = ?2
      AND c.checkpoint_ns = lg_checkpoint_blobs.checkpoint_ns
      AND v.key = lg_checkpoint_blobs.channel AND v.value = lg_checkpoint_blobs.version)
"""
PRUNE_SKELETON = (
    "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "json_extract(metadata, '$.counters_since_delta_snapshot'), channel_versions, created_at "
    "FROM lg_checkpoints WHERE tenant = ? AND thread_id = ?"
)
STORED_BLOBS = (
    "SELECT checkpoint_ns, channel, version FROM lg_checkpoint_blobs "
    "WHERE tenant = ? AND thread_id = ? AND type != 'empty'"
)
COPY_THREAD = [
    "INSERT OR IGNORE INTO lg_checkpoints (tenant, thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata, metadata_type, metadata_blob, "
    "channel_versions, run_id, created_at, scope) SELECT tenant, ?, checkpoint_ns, "
    "checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, metadata_type, "
    "metadata_blob, channel_versions, run_id, created_at, scope FROM lg_checkpoints "
    "WHERE tenant = ? AND thread_id = ?",
    "INSERT OR IGNORE INTO lg_checkpoint_blobs (tenant, thread_id, checkpoint_ns, channel, "
    "version, type, blob) SELECT tenant, ?, checkpoint_ns, channel, version, type, blob "
    "FROM lg_checkpoint_blobs WHERE tenant = ? AND thread_id = ?",
    "INSERT OR IGNORE INTO lg_checkpoint_writes (tenant, thread_id, checkpoint_ns, "
    "checkpoint_id, task_id, idx, task_path, channel, type, value) SELECT tenant, ?, "
    "checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, value "
    "FROM lg_checkpoint_writes WHERE tenant = ? AND thread_id = ?",
    "INSERT OR IGNORE INTO lg_checkpoint_branches (tenant, thread_id, checkpoint_ns, name, "
    "head, fork_point, active, created_at) SELECT tenant, ?, checkpoint_ns, name, head, "
    "fork_point, active, created_at FROM lg_checkpoint_branches "
    "WHERE tenant = ? AND thread_id = ?",
]

# ----------------------------------------------------------------- branches
LIST_BRANCHES = (
    "SELECT name, head, fork_point, active, created_at FROM lg_checkpoint_branches "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? ORDER BY created_at, name"
)
INSERT_BRANCH = (
    "INSERT INTO lg_checkpoint_branches (tenant, thread_id, checkpoint_ns, name, head, "
    "fork_point, active, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
SET_ACTIVE_BRANCH = (
    "UPDATE lg_checkpoint_branches SET active = (name = ?) "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ?"
)
DELETE_BRANCH = (
    "DELETE FROM lg_checkpoint_branches "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND name = ?"
)
CHECKPOINT_EXISTS = (
    "SELECT 1 FROM lg_checkpoints "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
LATEST_ID = (
    "SELECT MAX(checkpoint_id), MIN(created_at) FROM lg_checkpoints "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ?"
)
TREE = (
    "SELECT checkpoint_id, parent_checkpoint_id FROM lg_checkpoints "
    "WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id"
)
