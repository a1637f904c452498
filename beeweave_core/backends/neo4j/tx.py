"""One managed Neo4j transaction per call, for stores that share a driver.

Sessions are bookmarked with the driver's ``execute_query`` manager, so a read sees
the write before it even on a cluster, and mute only the UNRECOGNIZED notification
class: "property key does not exist" for optional properties (``expires_at``,
``metadata_blob`` …) that no node carries yet on a fresh database.
"""

from __future__ import annotations

import threading
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


def run(
    driver: Any, database: str | None, query: str, params: dict[str, Any], *, read: bool = False
) -> list[Any]:
    """``query`` in one managed (retried) transaction; returns all records."""

    def work(tx: Any) -> list[Any]:
        return list(tx.run(query, params))

    with session(driver, database, read=read) as s:
        return s.execute_read(work) if read else s.execute_write(work)


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
