"""Plumbing for the tables that live in the event store's SQLite file beside the events.

Checkpoints and store items each keep their own connection to the file (WAL: their
writes never block the event bus's reads), their own lock, and their own schema
version in the shared ``beeweave_meta`` table; this base class holds that once.
A ``:memory:`` database exists per connection, so there the backend opens one
:class:`SharedConnection` and hands it to every table set.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from beeweave_core.errors import StoreClosed, StoreError
from beeweave_core.private import touch_private
from beeweave_core.scopes import Readable

CREATE_META = "CREATE TABLE IF NOT EXISTS beeweave_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
GET_VERSION = "SELECT value FROM beeweave_meta WHERE key = ?"
SET_VERSION = (
    "INSERT INTO beeweave_meta (key, value) VALUES (?, ?) "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
)


#: How much of the database file each connection maps into memory (read-only use):
#: 2 GB, SQLite's usual ceiling (``SQLITE_MAX_MMAP_SIZE``).  The newest rows sit at the
#: end of the file, so a small map would miss exactly the pages searches read.
MMAP_BYTES = 2 * 1024 * 1024 * 1024


def marks(n: int) -> str:
    """``n`` placeholders of an ``IN (…)`` list."""
    return ",".join("?" * n)


#: A scoped reader's filter: unscoped rows and rows of its scopes.
IN_SCOPES = " AND (scope IS NULL OR scope IN ({scopes}))"


def in_scopes(scopes: Readable) -> tuple[str, list[str]]:
    """The scope filter clause and its values (nothing for an unrestricted reader)."""
    if scopes is None:
        return "", []
    return IN_SCOPES.format(scopes=marks(len(scopes))), sorted(scopes)


@dataclass(frozen=True, slots=True)
class SharedConnection:
    """One connection and the lock that serialises it, used by several table sets."""

    conn: sqlite3.Connection
    lock: threading.RLock
    #: What each per-connection temporary table holds now, by table name, so a
    #: reader can reuse one whose content did not change (see :meth:`write_mark`).
    temp_keys: dict[str, object] = field(default_factory=dict)

    def write_mark(self) -> tuple[int, int]:
        """Changes since: rows written through this connection, commits by others.

        Equal marks mean the database is as it was (call with ``lock`` held).
        """
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        return self.conn.total_changes, int(version)

    @classmethod
    def open(cls, path: str, *, busy_timeout: float = 30.0) -> SharedConnection:
        """A connection in autocommit mode (transactions are explicit), WAL for files."""
        if path != ":memory:":
            # created 0600 before SQLite opens it: its -wal/-shm files copy that mode
            touch_private(path)
        conn = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, timeout=busy_timeout
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # deleted rows are overwritten, not left in free pages: a purge is a purge
        conn.execute("PRAGMA secure_delete=ON")
        # reads of a large file (a pool of rows scattered over it) without a system call
        # per page: a tenant-wide retrieve at 1M events measured 48 -> 25 ms (vs 256 MB)
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        return cls(conn, threading.RLock())

    def close(self) -> None:
        with self.lock:
            self.conn.close()


def _migrate(conn: sqlite3.Connection, statement: str) -> None:
    """One migration statement; an added column that is already there counts as done
    (SQLite has no ``ADD COLUMN IF NOT EXISTS``; a file whose version was set back, or
    a migration cut short, has it already)."""
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if not (statement.startswith("ALTER TABLE") and "duplicate column name" in str(exc)):
            raise


class SideTables:
    """A connection, a lock and a migrated schema (``sql``: SCHEMA_KEY/VERSION, MIGRATIONS).

    ``connection`` lends the tables a connection another object owns (and closes):
    the backend's one ``:memory:`` database, or a tenant view's parent store.
    """

    sql: ModuleType

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tenant: str = "default",
        busy_timeout: float = 30.0,
        connection: SharedConnection | None = None,
    ) -> None:
        if not isinstance(tenant, str) or not tenant:
            raise ValueError(f"tenant must be a non-empty string, got {tenant!r}")
        self.tenant = tenant
        self.path = str(path)
        self._owner = connection is None
        self._shared = connection or SharedConnection.open(self.path, busy_timeout=busy_timeout)
        self._conn, self._lock = self._shared.conn, self._shared.lock
        with self._lock:
            self._prepare(self._conn)
        self._closed = False
        self.setup()

    @property
    def connection(self) -> SharedConnection:
        """This store's connection, for a view that must see the same database."""
        return self._shared

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Per-connection set-up before the schema is touched (functions, pragmas)."""

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise StoreClosed(f"{type(self).__name__} is closed")
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._closed:
                raise StoreClosed(f"{type(self).__name__} is closed")
            return self._conn.execute(sql, params).fetchall()

    def _write(self, sql: str, params: Sequence[Any]) -> None:
        """One statement in its own write transaction."""
        with self._tx() as c:
            c.execute(sql, params)

    def setup(self) -> None:
        """Create or migrate the tables; safe to call any number of times."""
        q = self.sql
        with self._tx() as c:
            c.execute(CREATE_META)
            row = c.execute(GET_VERSION, (q.SCHEMA_KEY,)).fetchone()
            current = int(row[0]) if row else 0
            if current > q.SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has {q.SCHEMA_KEY} {current}, newer than this BeeWeave "
                    f"({q.SCHEMA_VERSION}); upgrade beeweave"
                )
            for version, statements in q.MIGRATIONS:
                if version > current:
                    for stmt in statements:
                        _migrate(c, stmt)
            c.execute(SET_VERSION, (q.SCHEMA_KEY, str(q.SCHEMA_VERSION)))

    @property
    def schema_version(self) -> int:
        return int(self._read(GET_VERSION, (self.sql.SCHEMA_KEY,))[0][0])

    def close(self) -> None:
        with self._lock:
            if self._owner and not self._closed:
                self._shared.close()
            self._closed = True
