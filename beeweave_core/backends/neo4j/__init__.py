"""Neo4j (server, cluster or Aura): events, checkpoints, items and vectors in one database.

The event store opens the driver; checkpoints, the item index and Neo4j's own vector
index run on that same driver and database, so a Neo4j deployment needs nothing else.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import TYPE_CHECKING, Any, ClassVar

from beeweave_core.backends.common import BackendBase
from beeweave_core.backends.neo4j.auth import AuthSpec, driver_auth
from beeweave_core.paths import beeweave_home

if TYPE_CHECKING:
    from beeweave_core.backends.neo4j.checkpoints import Neo4jCheckpointStore
    from beeweave_core.backends.neo4j.checkpoints_async import AsyncNeo4jCheckpointStore
    from beeweave_core.backends.neo4j.items import Neo4jItemIndex
    from beeweave_core.backends.neo4j.vectors import Neo4jVectorIndex
    from beeweave_core.index.base import EmbeddingIdentity


def _driver_options(store_options: dict[str, Any]) -> dict[str, Any]:
    """The driver keywords and bounded waits the event store opened its driver with."""
    from beeweave_core.backends.neo4j import events

    named = inspect.signature(events.Neo4jEventStore.__init__).parameters
    kw = {k: v for k, v in store_options.items() if k not in named}
    kw.setdefault(
        "connection_timeout", store_options.get("connect_timeout", events.DEFAULT_CONNECT_TIMEOUT)
    )
    return {**events.DRIVER_TIMEOUTS, **kw}


class Neo4jBackend(BackendBase):
    """One tenant's view of a Neo4j database; the driver is shared by every part."""

    native_vectors: ClassVar[str] = "neo4j"

    def __init__(
        self,
        url: str,
        *,
        tenant: str = "default",
        auth: AuthSpec = None,
        database: str | None = None,
        **store_options: Any,
    ) -> None:
        from beeweave_core.backends.neo4j.events import Neo4jEventStore

        store = Neo4jEventStore(url, tenant=tenant, auth=auth, database=database, **store_options)
        self.driver = store.driver
        self.database = database
        self._auth = auth
        self._store_options = store_options
        super().__init__(url, store)

    def _open_checkpoints(self) -> Neo4jCheckpointStore:
        from beeweave_core.backends.neo4j.checkpoints import Neo4jCheckpointStore

        return Neo4jCheckpointStore(self.driver, tenant=self.tenant, database=self.database)

    def async_checkpoints(self) -> AsyncNeo4jCheckpointStore | None:
        """The checkpoint store's writes on an ``AsyncDriver`` to the same server, with
        the event store's driver options; None when that driver was handed in (its
        address and credentials are the caller's)."""
        import neo4j

        from beeweave_core.backends.neo4j.checkpoints_async import AsyncNeo4jCheckpointStore

        if self._store_options.get("driver") is not None:
            return None
        kw = _driver_options(self._store_options)
        driver = neo4j.AsyncGraphDatabase.driver(self.url, auth=driver_auth(self._auth), **kw)
        return AsyncNeo4jCheckpointStore(
            driver,
            tenant=self.tenant,
            database=self.database,
            bookmarks=self.driver.execute_query_bookmark_manager,
        )

    def _open_items(self) -> Neo4jItemIndex:
        from beeweave_core.backends.neo4j.items import Neo4jItemIndex

        return Neo4jItemIndex(self.driver, tenant=self.tenant, database=self.database)

    def _open_native_vectors(self, identity: EmbeddingIdentity) -> Neo4jVectorIndex:
        from beeweave_core.backends.neo4j.vectors import Neo4jVectorIndex

        return Neo4jVectorIndex(
            self.driver, tenant=self.tenant, identity=identity, database=self.database
        )

    def chroma_location(self) -> str:
        """A server store has no file to sit beside: ``$BEEWEAVE_HOME/chroma/<url digest>``."""
        digest = hashlib.sha1(self.url.encode()).hexdigest()[:12]
        return str(beeweave_home() / "chroma" / digest)

    def vector_key(self) -> str:
        return self.url
