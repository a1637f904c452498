"""The item index in the embedded SQLite file (same file as the events)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from beeweave_core.backends.sqlite import items_sql as q
from beeweave_core.backends.sqlite.db import SideTables, in_scopes
from beeweave_core.items import NS_SEP, ItemRow, decode_value, encode_value, ns_from_path

_NO_LIMIT = -1


def _row(rec: Sequence[Any]) -> ItemRow:
    path, key, value, eid, created, updated, expires, ttl, scope = rec
    return ItemRow(
        ns_from_path(path), key, decode_value(value), eid, created, updated, expires, ttl, scope
    )


class SQLiteItemIndex(SideTables):
    """Current-version pointers of a tenant's store items, in a SQLite table."""

    sql = q

    def get(self, path: str, key: str, *, now: float) -> ItemRow | None:
        recs = self._read(q.GET_ITEM, (self.tenant, path, key, now))
        return _row(recs[0]) if recs else None

    def upsert(self, row: ItemRow) -> None:
        self._write(
            q.UPSERT_ITEM,
            (
                self.tenant,
                row.path,
                row.key,
                encode_value(row.value),
                row.event_id,
                row.created_at,
                row.updated_at,
                row.expires_at,
                row.ttl_minutes,
                row.scope,
            ),
        )

    def remove(self, path: str, key: str) -> None:
        self._write(q.DELETE_ITEM, (self.tenant, path, key))

    def touch(self, path: str, key: str, expires_at: float) -> None:
        self._write(q.TOUCH_ITEM, (expires_at, self.tenant, path, key))

    def scan(
        self,
        prefix: str | None,
        *,
        now: float,
        limit: int | None = None,
        scopes: frozenset[str] | None = None,
    ) -> Iterator[ItemRow]:
        """Live items under ``prefix`` (None: all), in insertion order (as InMemoryStore)."""
        if prefix is None:
            sql, params = q.SCAN_ALL, [self.tenant, now]
        else:
            sql = q.SCAN_PREFIX
            params = [self.tenant, prefix, prefix + NS_SEP, prefix + chr(ord(NS_SEP) + 1), now]
        clause, values = in_scopes(scopes)
        limit = _NO_LIMIT if limit is None else limit
        for rec in self._read(sql + clause + q.SCAN_ORDER, (*params, *values, limit)):
            yield _row(rec)

    def paths(self, *, now: float, scopes: frozenset[str] | None = None) -> list[str]:
        clause, values = in_scopes(scopes)
        return [r[0] for r in self._read(q.PATHS + clause, (self.tenant, now, *values))]

    def expired(self, *, now: float, scopes: frozenset[str] | None = None) -> list[ItemRow]:
        clause, values = in_scopes(scopes)
        return [_row(r) for r in self._read(q.EXPIRED + clause, (self.tenant, now, *values))]
