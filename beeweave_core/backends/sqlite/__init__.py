"""The embedded default: events, checkpoints and items in one SQLite file, Chroma beside it.

Each table set keeps its own connection to a file (WAL: a checkpoint write never
blocks the bus's reads).  ``:memory:`` is one database *per connection*, so there
this backend lends the event store's connection to the tables beside it (closed
before the events, which close the connection).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from beeweave_core.backends.common import BackendBase
from beeweave_core.backends.sqlite.events import SQLiteEventStore
from beeweave_core.store import TokenCount

if TYPE_CHECKING:
    from beeweave_core.backends.sqlite.checkpoints import SQLiteCheckpointStore
    from beeweave_core.backends.sqlite.items import SQLiteItemIndex

MEMORY = ":memory:"


class SQLiteBackend(BackendBase):
    """A SQLite file (or ``:memory:``) holding one tenant's events and what lives beside them."""

    def __init__(
        self,
        path: str,
        *,
        url: str,
        tenant: str = "default",
        token_count: TokenCount | None = None,
        busy_timeout: float = 30.0,
    ) -> None:
        self.path = path
        events = SQLiteEventStore(
            path, tenant=tenant, token_count=token_count, busy_timeout=busy_timeout
        )
        #: The events' connection, lent to the tables beside them when in memory.
        self._memory = events.connection if path == MEMORY else None
        super().__init__(url, events)

    def _open_checkpoints(self) -> SQLiteCheckpointStore:
        from beeweave_core.backends.sqlite.checkpoints import SQLiteCheckpointStore

        return SQLiteCheckpointStore(self.path, tenant=self.tenant, connection=self._memory)

    def _open_items(self) -> SQLiteItemIndex:
        from beeweave_core.backends.sqlite.items import SQLiteItemIndex

        return SQLiteItemIndex(self.path, tenant=self.tenant, connection=self._memory)

    def chroma_location(self) -> str | None:
        """``<file>.chroma/`` beside the SQLite file; in memory for ``:memory:``."""
        return None if self.path == MEMORY else f"{self.path}.chroma"

    def vector_key(self) -> str:
        return self.url if self.path == MEMORY else str(Path(self.path).resolve())
