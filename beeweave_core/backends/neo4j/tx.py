"""One managed Neo4j transaction per call, for stores that share a driver.

Sessions are bookmarked with the driver's ``execute_query`` manager, so a read sees
the write before it even on a cluster, and mute only the UNRECOGNIZED notification
class: "property key does not exist" for optional properties (``expires_at``,
``metadata_blob`` …) that no node carries yet on a fresh database.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any


def session(driver: Any, database: str | None, *, read: bool = False) -> Any:
    import neo4j

    return driver.session(
        database=database,
        default_access_mode=neo4j.READ_ACCESS if read else neo4j.WRITE_ACCESS,
        bookmark_manager=driver.execute_query_bookmark_manager,
        notifications_disabled_classifications=[
            neo4j.NotificationDisabledClassification.UNRECOGNIZED
        ],
    )


#: Seconds to wait before each new attempt of a statement that failed transiently.
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


def run(
    driver: Any, database: str | None, query: str, params: dict[str, Any], *, read: bool = False
) -> list[Any]:
    """``query`` as one auto-commit transaction, retried on transient errors; all records.

    A managed transaction costs three round trips (BEGIN, RUN+PULL, COMMIT); one
    statement on its own is atomic already and needs one, which is most of the time
    of a small read or write (a checkpoint's ``put_writes``, ``get_tuple``).  The
    retry mirrors ``execute_write``'s: every statement sent this way is a read or an
    idempotent write (``MERGE``, ``DELETE``), so running it again after an unknown
    outcome (a connection lost during commit) is safe.
    """
    import neo4j.exceptions as nx

    for delay in (*RETRY_DELAYS, None):
        try:
            with session(driver, database, read=read) as s:
                return list(s.run(query, params))
        except (nx.Neo4jError, nx.DriverError) as exc:
            if delay is None or not exc.is_retryable():
                raise
        time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises


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
        self.setup()

    def _run(self, query: str, *, read: bool = False, **params: Any) -> list[Any]:
        """One statement in one managed (retried) transaction; returns all records."""
        return run(self.driver, self.database, query, {"tenant": self.tenant, **params}, read=read)

    def setup(self) -> None:
        """Create constraints and indexes (idempotent; once per driver in a process)."""
        ensure_schema(self.driver, self.database, self.schema)

    def close(self) -> None:
        """Close the driver if this object opened it (a shared one belongs to its owner)."""
        if self._owns_driver:
            self.driver.close()

    def purge_tenant(self) -> None:
        """Delete every node of this tenant (tests, GDPR erasure)."""
        with session(self.driver, self.database) as s:
            for stmt in self.purge:
                s.run(stmt, tenant=self.tenant).consume()
