"""Every Cypher statement of the Neo4j item index, as named, parameterised constants.

Graph model::

    (:LgStoreItem {tenant, path, key, value, event_id, created_at, updated_at,
                   expires_at, ttl_minutes})

one node per live item of LangGraph's ``BaseStore``, pointing (by ``event_id``) at the
item's current ``:Event:Memory``; ``path`` is the namespace joined with ``\\x1f``.
"""

from __future__ import annotations

SCHEMA_STATEMENTS: tuple[str, ...] = (
    "CREATE CONSTRAINT beeweave_lg_store_item IF NOT EXISTS FOR (i:LgStoreItem) "
    "REQUIRE (i.tenant, i.path, i.key) IS UNIQUE",
    "CREATE INDEX beeweave_lg_store_item_expiry IF NOT EXISTS FOR (i:LgStoreItem) "
    "ON (i.tenant, i.expires_at)",
)

ITEM_MAP = (
    "i {.path, .key, .value, .event_id, .created_at, .updated_at, .expires_at, .ttl_minutes, "
    ".scope}"
)
#: The reader's scopes (``$scopes`` null: every scope): unscoped items or one of them.
_IN_SCOPES = "($scopes IS NULL OR i.scope IS NULL OR i.scope IN $scopes)"
_LIVE = "(i.expires_at IS NULL OR i.expires_at > $now)"

CYPHER_GET_ITEM = f"""
MATCH (i:LgStoreItem {{tenant: $tenant, path: $path, key: $key}})
WHERE {_LIVE}
RETURN {ITEM_MAP} AS row
"""
CYPHER_UPSERT_ITEM = """
MERGE (i:LgStoreItem {tenant: $tenant, path: $path, key: $key})
SET i.value = $value, i.event_id = $event_id, i.created_at = $created_at,
    i.updated_at = $updated_at, i.expires_at = $expires_at, i.ttl_minutes = $ttl_minutes,
    i.scope = $scope
"""
CYPHER_DELETE_ITEM = """
MATCH (i:LgStoreItem {tenant: $tenant, path: $path, key: $key})
DELETE i
"""
CYPHER_TOUCH_ITEM = """
MATCH (i:LgStoreItem {tenant: $tenant, path: $path, key: $key})
SET i.expires_at = $expires_at
"""
#: Live items under a namespace prefix (``$prefix`` null: all), newest update first.
CYPHER_SCAN = f"""
MATCH (i:LgStoreItem {{tenant: $tenant}})
WHERE ($prefix IS NULL OR i.path = $prefix OR i.path STARTS WITH $prefix_sep) AND {_LIVE}
  AND {_IN_SCOPES}
RETURN {ITEM_MAP} AS row
ORDER BY i.created_at, i.path, i.key
LIMIT $limit
"""
CYPHER_PATHS = f"""
MATCH (i:LgStoreItem {{tenant: $tenant}})
WHERE {_LIVE} AND {_IN_SCOPES}
RETURN DISTINCT i.path AS path
"""
CYPHER_EXPIRED = f"""
MATCH (i:LgStoreItem {{tenant: $tenant}})
WHERE i.expires_at IS NOT NULL AND i.expires_at <= $now AND {_IN_SCOPES}
RETURN {ITEM_MAP} AS row
"""
CYPHER_PURGE_TENANT = """
MATCH (i:LgStoreItem {tenant: $tenant})
CALL (i) { DELETE i } IN TRANSACTIONS OF 5000 ROWS
"""
