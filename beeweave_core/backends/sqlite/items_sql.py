"""Every SQL statement of the SQLite item index, as named constants.

One row per live item of LangGraph's ``BaseStore``: a pointer to the item's current
memory event, with the value inline for fast reads.  ``path`` is the namespace with
labels joined by ``\\x1f``, so "every namespace under P" is the index range
``path = P OR path ∈ [P + '\\x1f', P + '\\x20')``.
"""

SCHEMA_KEY = "item_schema_version"
SCHEMA_VERSION = 2

MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS lg_store_items (
                tenant TEXT NOT NULL,
                path TEXT NOT NULL,
                key TEXT NOT NULL,
                value TEXT NOT NULL,
                event_id TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                expires_at REAL,
                ttl_minutes REAL,
                UNIQUE (tenant, path, key)
            )""",
            "CREATE INDEX IF NOT EXISTS lg_store_items_updated ON lg_store_items "
            "(tenant, updated_at)",
            "CREATE INDEX IF NOT EXISTS lg_store_items_expiry ON lg_store_items "
            "(tenant, expires_at) WHERE expires_at IS NOT NULL",
        ],
    ),
    # the item's scope (see scopes.py): scans filter on it
    (2, ["ALTER TABLE lg_store_items ADD COLUMN scope TEXT"]),
]

COLUMNS = "path, key, value, event_id, created_at, updated_at, expires_at, ttl_minutes, scope"
#: Live = not expired (``?`` = now).
_LIVE = " AND (expires_at IS NULL OR expires_at > ?)"

GET_ITEM = f"SELECT {COLUMNS} FROM lg_store_items WHERE tenant = ? AND path = ? AND key = ?" + _LIVE
UPSERT_ITEM = (
    "INSERT OR REPLACE INTO lg_store_items (tenant, path, key, value, event_id, created_at, "
    "updated_at, expires_at, ttl_minutes, scope) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_ITEM = "DELETE FROM lg_store_items WHERE tenant = ? AND path = ? AND key = ?"
TOUCH_ITEM = "UPDATE lg_store_items SET expires_at = ? WHERE tenant = ? AND path = ? AND key = ?"

SCAN_ALL = f"SELECT {COLUMNS} FROM lg_store_items WHERE tenant = ?" + _LIVE
SCAN_PREFIX = (
    f"SELECT {COLUMNS} FROM lg_store_items WHERE tenant = ? "
    "AND (path = ? OR (path >= ? AND path < ?))" + _LIVE
)
SCAN_ORDER = " ORDER BY created_at, path, key LIMIT ?"

PATHS = "SELECT DISTINCT path FROM lg_store_items WHERE tenant = ?" + _LIVE
EXPIRED = (
    f"SELECT {COLUMNS} FROM lg_store_items "
    "WHERE tenant = ? AND expires_at IS NOT NULL AND expires_at <= ?"
)
