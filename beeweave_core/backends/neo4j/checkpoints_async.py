"""The Neo4j checkpoint store's writes on the neo4j ``AsyncDriver``.

The async twin of :class:`~beeweave_core.backends.neo4j.checkpoints.Neo4jCheckpointStore`
(the ``langgraph-checkpoint`` convention of a sync and an async saver): the same
statements and parameters (shared with the sync store), only awaited instead of sent
from a worker thread.  A small write's round trip (``put_writes``) is about as long as
the two thread wake-ups that ``asyncio.to_thread`` adds around it, so the async saver
awaits the driver for ``put`` and ``put_writes``.  Reads (whole checkpoints: decoding
dominates, and the sync driver decodes with less CPU) and housekeeping stay on the
sync store.

Sessions share the sync driver's bookmark manager: a checkpoint written here is seen
by a read through the sync store and the other way round, on a cluster as well.  The
driver is bound to the event loop it first runs in; :meth:`aclose` closes it there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from beeweave_core.backends.neo4j import checkpoints_cypher as q
from beeweave_core.backends.neo4j import tx as neo4j_tx
from beeweave_core.backends.neo4j.checkpoints import create_writes, put_params, writes_params
from beeweave_core.checkpoints import CheckpointRow, Typed, WriteRow


class AsyncNeo4jCheckpointStore:
    """:class:`~beeweave_core.checkpoints.AsyncCheckpointStore` on an ``AsyncDriver``.

    The schema is the sync store's (created by it); this store owns ``driver`` and
    closes it in :meth:`aclose`.
    """

    def __init__(
        self, driver: Any, *, tenant: str, database: str | None = None, bookmarks: Any = None
    ) -> None:
        self.driver = driver
        self.tenant = tenant
        self._sessions = neo4j_tx.IdleSessions(driver, database, bookmarks=bookmarks)

    async def _run(self, query: str, *, read: bool = False, **params: Any) -> list[Any]:
        return await neo4j_tx.arun(
            self._sessions, query, {"tenant": self.tenant, **params}, read=read
        )

    async def aput(self, row: CheckpointRow, blobs: Mapping[tuple[str, str], Typed | None]) -> None:
        await self._run(q.CYPHER_PUT_CHECKPOINT, **put_params(row, blobs))

    async def aput_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        import neo4j.exceptions as nx

        if not writes:
            return
        query, params = create_writes(thread_id, checkpoint_ns, checkpoint_id, writes)
        try:  # as the sync store: new nodes first, the keep-or-replace MERGE if refused
            await self._run(query, **params)
        except nx.ConstraintError:
            await self._run(
                q.CYPHER_PUT_WRITES,
                **writes_params(thread_id, checkpoint_ns, checkpoint_id, writes),
            )

    async def aclose(self) -> None:
        """Close the idle sessions and the driver (in the loop they ran in)."""
        for s in self._sessions.drain():
            await s.close()
        await self.driver.close()
