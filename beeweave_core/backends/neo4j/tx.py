"""One managed Neo4j transaction per call, for stores that share a driver.

Sessions are bookmarked with the driver's ``execute_query`` manager, so a read sees
the write before it even on a cluster, and mute only the UNRECOGNIZED notification
class: "property key does not exist" for optional properties (``expires_at``,
``metadata_blob`` …) that no node carries yet on a fresh database.  The async driver
of a store's coroutines (:func:`arun`) shares the sync driver's bookmark manager, so
a write through one is seen by a read through the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from beeweave_core.errors import StoreClosed


def session(driver: Any, database: str | None, *, read: bool = False, bookmarks: Any = None) -> Any:
    """A session of ``driver`` (sync or async); ``bookmarks``: another driver's manager."""
    import neo4j

    return driver.session(
        database=database,
        default_access_mode=neo4j.READ_ACCESS if read else neo4j.WRITE_ACCESS,
        bookmark_manager=bookmarks or driver.execute_query_bookmark_manager,
        notifications_disabled_classifications=[
            neo4j.NotificationDisabledClassification.UNRECOGNIZED
        ],
    )


#: Seconds to wait before each new attempt of a statement that failed transiently.
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


class IdleSessions:
    """A store's sessions between statements, kept for the next one (closed with it).

    A session holds no connection while idle (an auto-commit result read to the end
    gives it back to the pool), so keeping one is free; building one costs ~30 µs of
    CPU, a tenth of a small statement's round trip (a checkpoint's ``put_writes``).
    Sessions are not thread-safe: a taken session is one caller's until given back.
    An async driver's sessions are kept the same way (``bookmarks``: the manager they
    share with a sync driver); their owner closes them (:meth:`kept`, :meth:`drain`).
    """

    def __init__(
        self, driver: Any, database: str | None, *, keep: int = 8, bookmarks: Any = None
    ) -> None:
        self.driver, self.database, self.keep = driver, database, keep
        self.bookmarks = bookmarks
        self._lock = threading.Lock()
        self._idle: dict[bool, list[Any]] = {False: [], True: []}  # by read access
        self._closed = False

    def take(self, read: bool) -> Any:
        with self._lock:
            if self._closed:
                raise StoreClosed("the Neo4j store is closed")
            if self._idle[read]:
                return self._idle[read].pop()
        return session(self.driver, self.database, read=read, bookmarks=self.bookmarks)

    def kept(self, s: Any, read: bool) -> bool:
        """Keep ``s`` for the next caller; False: not kept (the caller closes it)."""
        with self._lock:
            if not self._closed and len(self._idle[read]) < self.keep:
                self._idle[read].append(s)
                return True
        return False

    def give(self, s: Any, read: bool) -> None:
        if not self.kept(s, read):
            s.close()

    def drain(self) -> list[Any]:
        """Every idle session, handed over for closing; none is kept after this."""
        with self._lock:
            self._closed = True
            idle = self._idle[False] + self._idle[True]
            self._idle = {False: [], True: []}
        return idle

    def close(self) -> None:
        for s in self.drain():
            with contextlib.suppress(Exception):  # a driver closed first took its connections
                s.close()


def run(
    driver: Any,
    database: str | None,
    query: str,
    params: dict[str, Any],
    *,
    read: bool = False,
    sessions: IdleSessions | None = None,
) -> list[Any]:
    """``query`` as one auto-commit transaction, retried on transient errors; all records.

    A managed transaction costs three round trips (BEGIN, RUN+PULL, COMMIT); one
    statement on its own is atomic already and needs one, which is most of the time
    of a small read or write (a checkpoint's ``put_writes``, ``get_tuple``).  The
    retry mirrors ``execute_write``'s: every statement sent this way is a read or an
    idempotent write (``MERGE``, ``DELETE``), so running it again after an unknown
    outcome (a connection lost during commit) is safe.  With ``sessions`` the session
    comes from (and, unless the statement failed, goes back to) that pool.
    """
    for delay in attempts():
        s = sessions.take(read) if sessions else session(driver, database, read=read)
        try:
            records = list(s.run(query, params))
        except BaseException as exc:
            s.close()  # a failed session is not reused
            retry_or_raise(exc, delay)
        else:
            if sessions:
                sessions.give(s, read)
            else:
                s.close()
            return records
        time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises


async def arun(
    sessions: IdleSessions, query: str, params: dict[str, Any], *, read: bool = False
) -> list[Any]:
    """:func:`run` on an async driver's pooled sessions: no worker thread per statement.

    Handing a statement to a thread and back costs more than the statement's own
    Python work (two thread wake-ups, each a scheduler round on a busy machine), so
    the async saver's hot calls await the driver directly.
    """
    for delay in attempts():
        s = sessions.take(read)
        try:
            records = [r async for r in await s.run(query, params)]
        except BaseException as exc:
            await s.close()
            retry_or_raise(exc, delay)
        else:
            if not sessions.kept(s, read):
                await s.close()
            return records
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises


def attempts() -> Iterator[float]:
    """The delays before each retry, then a sentinel (-1) for the last attempt."""
    yield from RETRY_DELAYS
    yield -1.0


def retry_or_raise(exc: BaseException, delay: float) -> None:
    """Re-raise ``exc`` unless the driver calls it transient and attempts are left."""
    import neo4j.exceptions as nx

    retry = isinstance(exc, (nx.Neo4jError, nx.DriverError)) and exc.is_retryable()
    if delay < 0 or not retry or (delay > RETRY_DELAYS[0] and refused(exc)):
        raise exc


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a refused connection: no server listens there, which a
    second retry does not change (a stopped server is reported in 0.1 s, not 3 s)."""
    seen: BaseException | None = exc
    for _ in range(8):  # the driver chains a few levels deep; never loop forever
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: Per live driver: the (database, statements) already ensured.  Weakly keyed, so a
#: closed and collected driver's entry goes with it (an ``id()`` could be reused).
SCHEMA_DONE: weakref.WeakKeyDictionary[Any, set[tuple[str | None, tuple[str, ...]]]] = (
    weakref.WeakKeyDictionary()
)
_SCHEMA_LOCK = threading.Lock()


def ensure_schema(driver: Any, database: str | None, statements: tuple[str, ...]) -> None:
    """Run idempotent ``CREATE … IF NOT EXISTS`` statements once per driver and process."""
    key = (database, statements)
    with _SCHEMA_LOCK:
        if key in SCHEMA_DONE.get(driver, ()):
            return
    for stmt in statements:
        driver.execute_query(stmt, database_=database)
    with _SCHEMA_LOCK:
        SCHEMA_DONE.setdefault(driver, set()).add(key)


class TenantNodes:
    """Base of a tenant-scoped node store on a (usually shared) driver.

    Subclasses set ``schema`` (idempotent statements) and ``purge`` (statements that
    delete this tenant's nodes in batches); every query gets ``$tenant``.
    """

    schema: tuple[str, ...] = ()
    purge: tuple[str, ...] = ()

    def __init__(
        self,
        driver: Any,
        *,
        tenant: str = "default",
        database: str | None = None,
        owns_driver: bool = False,
    ) -> None:
        if not isinstance(tenant, str) or not tenant:
            raise ValueError(f"tenant must be a non-empty string, got {tenant!r}")
        self.tenant = tenant
        self.driver = driver
        self.database = database
        self._owns_driver = owns_driver
        self._sessions = IdleSessions(driver, database)
        weakref.finalize(self, self._sessions.close)  # a store dropped without close()
        self.setup()

    def _run(self, query: str, *, read: bool = False, **params: Any) -> list[Any]:
        """One statement in one auto-commit (retried) transaction; returns all records."""
        return run(
            self.driver,
            self.database,
            query,
            {"tenant": self.tenant, **params},
            read=read,
            sessions=self._sessions,
        )

    def setup(self) -> None:
        """Create constraints and indexes (idempotent; once per driver in a process)."""
        ensure_schema(self.driver, self.database, self.schema)

    def close(self) -> None:
        """Close the driver if this object opened it (a shared one belongs to its owner)."""
        self._sessions.close()
        if self._owns_driver:
            self.driver.close()

    def purge_tenant(self) -> None:
        """Delete every node of this tenant (tests, GDPR erasure)."""
        with session(self.driver, self.database) as s:
            for stmt in self.purge:
                s.run(stmt, tenant=self.tenant).consume()
