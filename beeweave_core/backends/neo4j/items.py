"""The item index as ``:LgStoreItem`` nodes in Neo4j (the event store's database and driver)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from beeweave_core.backends.neo4j import items_cypher as q
from beeweave_core.backends.neo4j import tx as neo4j_tx
from beeweave_core.items import NS_SEP, ItemRow, decode_value, encode_value, ns_from_path

_NO_LIMIT = 2**62


def _row(rec: Mapping[str, Any]) -> ItemRow:
    return ItemRow(
        ns_from_path(rec["path"]),
        rec["key"],
        decode_value(rec["value"]),
        rec["event_id"],
        rec["created_at"],
        rec["updated_at"],
        rec.get("expires_at"),
        rec.get("ttl_minutes"),
        rec.get("scope"),
    )


def _scopes(scopes: frozenset[str] | None) -> list[str] | None:
    return None if scopes is None else sorted(scopes)


class Neo4jItemIndex(neo4j_tx.TenantNodes):
    """Current-version pointers of a tenant's store items, as Neo4j nodes."""

    schema = q.SCHEMA_STATEMENTS
    purge = (q.CYPHER_PURGE_TENANT,)

    def get(self, path: str, key: str, *, now: float) -> ItemRow | None:
        recs = self._run(q.CYPHER_GET_ITEM, read=True, path=path, key=key, now=now)
        return _row(recs[0]["row"]) if recs else None

    def upsert(self, row: ItemRow) -> None:
        self._run(
            q.CYPHER_UPSERT_ITEM,
            path=row.path,
            key=row.key,
            value=encode_value(row.value),
            event_id=row.event_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
            expires_at=row.expires_at,
            ttl_minutes=row.ttl_minutes,
            scope=row.scope,
        )

    def remove(self, path: str, key: str) -> None:
        self._run(q.CYPHER_DELETE_ITEM, path=path, key=key)

    def touch(self, path: str, key: str, expires_at: float) -> None:
        self._run(q.CYPHER_TOUCH_ITEM, path=path, key=key, expires_at=expires_at)

    def scan(
        self,
        prefix: str | None,
        *,
        now: float,
        limit: int | None = None,
        scopes: frozenset[str] | None = None,
    ) -> Iterator[ItemRow]:
        recs = self._run(
            q.CYPHER_SCAN,
            read=True,
            prefix=prefix,
            prefix_sep=None if prefix is None else prefix + NS_SEP,
            now=now,
            limit=_NO_LIMIT if limit is None else limit,
            scopes=_scopes(scopes),
        )
        for r in recs:
            yield _row(r["row"])

    def paths(self, *, now: float, scopes: frozenset[str] | None = None) -> list[str]:
        recs = self._run(q.CYPHER_PATHS, read=True, now=now, scopes=_scopes(scopes))
        return [r["path"] for r in recs]

    def expired(self, *, now: float, scopes: frozenset[str] | None = None) -> list[ItemRow]:
        recs = self._run(q.CYPHER_EXPIRED, read=True, now=now, scopes=_scopes(scopes))
        return [_row(r["row"]) for r in recs]
