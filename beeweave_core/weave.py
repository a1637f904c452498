"""``Weave``: the one object a user holds — a store, the capture bus, and what reads them.

``Weave.open()`` with no URL gives the embedded default (one SQLite file under
``$BEEWEAVE_HOME`` or ``~/.beeweave``); ``sqlite:///path`` names the file;
``neo4j://``, ``neo4j+s://``, ``bolt://`` … open a Neo4j server, cluster or Aura.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from beeweave_core import telemetry
from beeweave_core.backends import Backend, open_backend
from beeweave_core.backends.neo4j.auth import AuthSpec
from beeweave_core.capture import ContextBus
from beeweave_core.config import IndexConfig, WeaveConfig
from beeweave_core.errors import shown
from beeweave_core.events import EdgeType, EventType
from beeweave_core.governance.redaction import env_redactor
from beeweave_core.governance.retention import erase_from_archives
from beeweave_core.ids import check_tenant
from beeweave_core.items import ItemIndex, purge_namespace, user_namespace
from beeweave_core.paths import beeweave_home, default_url
from beeweave_core.read_gate import ReadGate
from beeweave_core.scopes import META_KEY, Readable, derived, narrow, with_scope
from beeweave_core.store import EventStore, SessionDirectory
from beeweave_core.store_writer import AppendListener, StoreWriter
from beeweave_core.tokens import uncut_query
from beeweave_core.tombstones import EVENT, SESSION, USER, Tombstone, buried, of_purge
from beeweave_core.transcript import Transcript, bus_transcript

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from beeweave_core.context.assembler import AssembledContext
    from beeweave_core.context.engine import ContextEngine
    from beeweave_core.context.request import AssembleOptions
    from beeweave_core.index.base import Embedder, VectorIndex
    from beeweave_core.index.indexer import Indexer
    from beeweave_core.retrieval import Hit, RetrieveOptions, Retriever

log = logging.getLogger("beeweave")
#: Events indexed for full-text search per batch while ``flush`` waits.
_WORDS_BATCH = 2_000
T = TypeVar("T")


def require_weave(value: object, owner: str) -> Weave:
    """``value`` if it is a :class:`Weave`, else one ``TypeError`` line naming the fix.

    Integrations take an open weave, not a path: a path given by mistake would fail deep
    inside (``'str' object has no attribute 'backend'``) instead of here.
    """
    if isinstance(value, Weave):
        return value
    hint = "Weave.open(...)"
    if isinstance(value, str):
        hint = (
            f"Weave.open({shown(value)}), or {owner}.from_conn_string({shown(value)}) if it has one"
        )
    raise TypeError(f"{owner} needs an open beeweave_core.Weave, got {shown(value)}: pass {hint}")


def open_store(
    url: str | None = None,
    *,
    tenant: str = "default",
    auth: AuthSpec = None,
    database: str | None = None,
    **kw: Any,
) -> EventStore:
    """Open the EventStore a URL names, for tools that read or write events without
    capture (no bus, no index, no context engine).

    Args:
        url: ``sqlite:///path`` or a Neo4j URL (``None``: :func:`default_url`).
        tenant: Whose records the store reads and writes.
        auth: Neo4j credentials: ``"user:password"``, a pair or a driver auth (``None``:
            none).
        database: The Neo4j database (``None``: the server's default).
        **kw: More keyword arguments for the backend's event store.

    Returns:
        The backend's store; closing it closes the connection or driver it holds.

    Raises:
        ValueError: The URL is not one BeeWeave opens, or it is malformed.
    """
    return open_backend(url, tenant=tenant, auth=auth, database=database, **kw).events


class Weave:
    """An agent's lasting memory: capture (``emit``), the graph (``store``), and reads.

    Use as a context manager so the capture bus is flushed and the store closed::

        with Weave.open() as weave:
            weave.emit("user_message", "hi", session_id="s1")

    The weave builds its parts and hands each what it works with: the indexer gets the
    store and the index settings, the retriever the store and the indexer, the context
    engine the writer of its store (:attr:`writer`, which the indexer follows) and the
    weave's ``emit``/``retrieve``/``flush``.  Parts that listen to capture are subscribed
    to the bus here, and closed by :meth:`close`.

    Args:
        backend: The opened store and what lives beside it (:meth:`open` opens one).
        spool_dir: Where capture spools (``None``: ``spool`` in :func:`beeweave_home`).
        config: Every part's settings (``None``: the defaults).
        scopes: Limit what the weave reads and writes to these business lines and
            unscoped records (``None``: every scope; see :mod:`beeweave_core.scopes`).
        **bus_kw: Settings of the capture bus (see :class:`ContextBus`).

    Raises:
        TypeError: ``config`` is not a :class:`WeaveConfig`.
        ValueError: The store's tenant is not a valid tenant name.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        spool_dir: str | os.PathLike[str] | None = None,
        config: WeaveConfig | None = None,
        scopes: Iterable[str] | str | None = None,
        **bus_kw: float,
    ) -> None:
        if config is not None and not isinstance(config, WeaveConfig):
            raise TypeError(f"config must be a WeaveConfig, got {type(config).__name__}")
        #: Where the events and everything beside them live (chosen once, from the URL).
        self.backend = backend
        readable = narrow(None, scopes)
        #: The store as this weave sees it: its tenant and, if given, only its ``scopes``.
        self.store = store = (
            backend.events if readable is None else backend.events.for_scopes(readable)
        )
        self.url = url = backend.url
        self.tenant = check_tenant(store.tenant)
        #: The settings every part was built with (frozen: open a new weave to change them).
        self.config = config or WeaveConfig()
        spool = Path(spool_dir) if spool_dir else beeweave_home() / "spool"
        # the bus names its files by a hash of (url, tenant): no raw id reaches a path; a
        # scoped weave spools apart (another weave's pending events may not be its to write)
        name = url if readable is None else url + "\x1fscopes=" + ",".join(sorted(readable))
        if "redactor" not in bus_kw:
            bus_kw["redactor"] = env_redactor()  # type: ignore[assignment]
        self.bus = ContextBus(store, spool_dir=spool, name=name, **bus_kw)  # type: ignore[arg-type]
        telemetry.enable_capture()
        self._closed = False
        self._closers: list[Callable[[], None]] = []
        self._retrievers: dict[Readable, Retriever] = {}
        self._contexts: dict[Readable, ContextEngine] = {}
        self._contexts_lock = threading.Lock()  # two first reads build one engine
        self._writers: dict[int, tuple[EventStore, StoreWriter]] = {}
        self._writers_lock = threading.Lock()
        self._items: ItemIndex | None = None  # store items' pointers (a user purge's)
        self._transcript: Transcript | None = None
        self._transcript_lock = threading.Lock()
        #: reads in flight: the background workers of this weave give way to them
        self.reads = ReadGate()
        #: Background vector indexer (``None`` without an index); see ``index/indexer.py``.
        self.indexer: Indexer | None = None
        if self.config.index.enabled:
            from beeweave_core.index.indexer import build_indexer

            self.indexer = build_indexer(backend, config=self.config.index)
        if self.indexer is not None:
            self.bus.subscribe(self.indexer.on_stored)
            self.on_close(self.indexer.close)
        _warm_tokenizer()

    @property
    def transcript(self) -> Transcript:
        """The one writer of this weave's conversations, made (with its REFERS_TO linker on
        the bus) on first use: every integration on the weave records through it, so no
        message is recorded twice (``transcript.transcript_for``)."""
        with self._transcript_lock:
            if self._transcript is None:
                self._transcript = bus_transcript(self.bus)
            return self._transcript

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        tenant: str = "default",
        auth: AuthSpec = None,
        database: str | None = None,
        spool_dir: str | os.PathLike[str] | None = None,
        store_options: Mapping[str, object] | None = None,
        config: WeaveConfig | None = None,
        embeddings: Embedder | None = None,
        index: str | VectorIndex | bool | None = None,
        vector_url: str | None = None,
        index_options: Mapping[str, object] | None = None,
        scopes: Iterable[str] | str | None = None,
        **bus_kw: float,
    ) -> Weave:
        """Open (creating if needed) the store at ``url`` and start capture.

        Args:
            url: ``sqlite:///path`` or a Neo4j URL (``None``: :func:`default_url`).
            tenant: Whose records the weave reads and writes.
            auth: Neo4j credentials: ``"user:password"``, a pair or a driver auth.
            database: The Neo4j database (``None``: the server's default).
            spool_dir: Where capture spools (``None``: ``spool`` in the home folder).
            store_options: More keyword arguments for the backend's event store.
            config: Every part's settings (a :class:`~beeweave_core.config.WeaveConfig`).
            embeddings: Shortcut into ``config.index`` (wins over it), as are the next 3.
            index: The index kind or a ready index (``False``: none).
            vector_url: A Chroma directory or server.
            index_options: ``policy``, ``backfill``, ``batch_size``, ``retry_interval``.
            scopes: Limit reads and writes to these business lines and unscoped records.
            **bus_kw: Tune the capture bus (``flush_interval``, ``max_high`` ...).

        Returns:
            The open weave; use it as a context manager, or :meth:`close` it.

        Raises:
            ValueError: A bad URL, tenant or index option.
        """
        config = _with_index_options(
            config or WeaveConfig(),
            embeddings=embeddings,
            index=index,
            vector_url=vector_url,
            index_options=index_options,
        )
        url = url or default_url()
        check_tenant(tenant)
        backend = open_backend(
            url, tenant=tenant, auth=auth, database=database, **(store_options or {})
        )
        try:
            return cls(backend, spool_dir=spool_dir, config=config, scopes=scopes, **bus_kw)
        except BaseException:
            backend.close()
            raise

    # ------------------------------------------------------------ capture
    def emit(
        self,
        type: EventType | str,
        content: object = "",
        *,
        session_id: str,
        role: str | None = None,
        payload: Mapping[str, object] | None = None,
        parents: Sequence[str] = (),
        links: Mapping[EdgeType | str, Sequence[str]] | None = None,
        meta: Mapping[str, object] | None = None,
        source: Mapping[str, object] | None = None,
        key: str | None = None,
        ts: float | None = None,
        priority: str | None = None,
        coalesce_key: str | None = None,
        scope: str | None = None,
    ) -> str:
        """Record one event without blocking; bad input is counted and dead-lettered, not raised.

        Args:
            type: The event type (an :class:`EventType` or its value).
            content: The text; anything else is kept as JSON (see ``payloads.py``).
            session_id: The session (thread, conversation) it belongs to.
            role: Who produced it (``"user"``, ``"assistant"``, ``"tool"`` ...).
            payload: Structure beside the text (tool args and output, usage ...).
            parents: The events that caused it (CAUSED_BY edges).
            links: Other edge types, each to its target ids.
            meta: ``user_id``, ``agent_id``, ``tags`` and other details.
            source: Where it was captured (framework, run id ...).
            key: Makes the id deterministic, so a redelivered hook maps to the same id.
            ts: When it happened, in seconds since the epoch (``None``: now).
            priority: ``"high"`` or ``"low"`` over the type's default.
            coalesce_key: Low-priority events with the same key close in time merge.
            scope: Its business line (or ``meta["scope"]``; a weave of one scope fills it in).

        Returns:
            The event's id, at once.

        Raises:
            ScopeError: ``scope`` is not this weave's to write, or it has several, none named.
        """
        if meta is None or isinstance(meta, Mapping):  # (anything else: the bus refuses it)
            meta = with_scope(meta, self.store.scopes, scope)
        return self.bus.emit(
            type,
            content,
            session_id=session_id,
            role=role,
            payload=payload,
            parents=parents,
            links=links,
            meta=meta,
            source=source,
            key=key,
            ts=ts,
            priority=priority,
            coalesce_key=coalesce_key,
        )

    @property
    def scopes(self) -> Readable:
        """The scopes this weave reads and writes (``None``: every scope)."""
        return self.store.scopes

    def flush(
        self, timeout: float = 30.0, wait_index: bool = False, *, reading: bool = False
    ) -> bool:
        """Wait until captured events are in the store, so a read right after sees them.

        Words are indexed before it returns (within ``timeout``), so a search right after
        finds them without indexing them itself.  Vectors are built in the background, so
        semantic recall lags a write by a moment.

        Args:
            timeout: Most seconds to wait, for everything together.
            wait_index: Also wait until the indexer has embedded everything stored so far
                (for a caller that retrieves by meaning right after writing).
            reading: Leave out the audit records of earlier assemblies (what the context
                engine passes before a read: they are not what it reads), and leave the
                words to the read's own search.

        Returns:
            False when some events are only spooled on disk (replayed later), were
            refused since the last flush, the timeout passed, or (with ``wait_index``)
            the indexer did not catch up.
        """
        deadline = time.monotonic() + timeout
        stored = self.bus.flush(timeout, reading=reading)
        if stored and not reading:  # (a store that did not answer would hold this call on
            # its lock; a read's own search indexes what it needs, once, right after)
            self._sync_words(deadline)
        if not wait_index or self.indexer is None:
            return stored
        return self.indexer.sync(max(0.0, deadline - time.monotonic())) and stored

    def _sync_words(self, deadline: float) -> None:
        """Make what was just stored findable by its words (SQLite indexes text off the write
        path): a bulk write waited for here costs its first search nothing afterwards."""
        self.store.sync_text_index(_WORDS_BATCH, go_on=lambda: time.monotonic() < deadline)

    def stats(self) -> dict[str, int | bool]:
        """What happened to every emitted event, for health checks and dashboards.

        Returns:
            The capture bus's counters, queue sizes and whether the store is up (see
            :meth:`ContextBus.stats`).
        """
        return self.bus.stats()

    @property
    def writer(self) -> StoreWriter:
        """BeeWeave's own synchronous writes to :attr:`store` (memories, notes, imports):
        redacted, put in the store's write scope, stored, then told to the vector indexer
        (searchable by meaning at once) and the context engine's views.  It only writes:
        reads go to ``weave.store``."""
        return self._writer_for(self.store)

    def _writer_for(self, store: EventStore) -> StoreWriter:
        """The writer of ``store`` (the weave's, or a narrower scope view): built once per
        store, so every part writing to it shares its subscribers."""
        with self._writers_lock:
            held = self._writers.get(id(store))
            if held is None:  # (the store is kept with it: its id is never reused)
                redact = self.redact if self.bus.redactor is not None else None
                writer = StoreWriter(store, redact=redact)
                if self.indexer is not None:
                    writer.subscribe(AppendListener(self.indexer.on_stored))
                held = self._writers[id(store)] = (store, writer)
            return held[1]

    def redact(self, value: T) -> T:
        """``value`` as the weave's redactor would store it (itself when redaction is off).

        Every write path runs it — capture, BeeWeave's own writers, LangGraph
        checkpoints and store items — and what it replaced is counted in
        ``stats()["redacted"]``.

        Args:
            value: A text, or a JSON-like value or checkpoint object holding texts.

        Returns:
            ``value`` with every string inside redacted, its types kept.
        """
        return self.bus.redact(value)

    def purge(
        self,
        *,
        session_id: str | None = None,
        ids: Sequence[str] | None = None,
        user_id: str | None = None,
        checkpoints: bool = False,
        tombstone: bool = True,
    ) -> int:
        """Delete for good: from the graph, the vector index, and what is still pending.

        Pending copies go too: events waiting in memory, in the spool (also spools a
        killed process left), in the overflow file, and dead-letter entries, so nothing
        purged comes back at the next start.  They are dropped first, so when the store
        is down this raises and can simply be called again.  The vectors dropped are
        exactly the events the store deleted (one stored while the purge ran included),
        and retention archives are rewritten without them.

        Args:
            session_id: Purge one session.
            ids: Purge these events.
            user_id: Purge every event whose ``meta["user_id"]`` is that user, and every
                ``BeeWeaveStore`` item under ``("users", user_id)`` (every version).
            checkpoints: With ``session_id``, also delete the LangGraph thread of that id.
            tombstone: False leaves no tombstone and touches no archive (retention, which
                archived the events first so ``beeweave import`` can bring them back).

        Returns:
            The number of events removed (stored, pending, archived).

        Raises:
            ValueError: None of ``session_id``, ``ids`` and ``user_id`` is given.
        """
        if session_id is None and ids is None and user_id is None:
            raise ValueError("purge needs session_id=, ids= or user_id=")
        self.flush()
        self._settle([session_id] if session_id else [], user_id)
        wanted = set(ids or ())

        def match(eid: str | None, sid: str | None, uid: str | None) -> bool:
            return (
                eid in wanted
                or (sid is not None and sid == session_id)
                or (user_id is not None and uid == user_id)
            )

        n = self.bus.forget(match)
        gone = self._purge_stored(session_id, sorted(wanted), user_id, tombstone)
        if self.indexer is not None and gone:
            self.indexer.forget(gone)
            self.indexer.sync()
        if tombstone:
            marks = of_purge(session_id=session_id, ids=sorted(wanted), user_id=user_id)
            n += erase_from_archives(self.tenant, lambda evs: buried(evs, marks))
        if checkpoints and session_id is not None:
            self.backend.checkpoints().delete_thread(session_id)
        return n + len(gone)

    def _purge_stored(
        self, session_id: str | None, ids: list[str], user_id: str | None, tombstone: bool
    ) -> list[str]:
        """The store's part of :meth:`purge`; returns the ids it deleted."""
        gone: list[str] = []
        if session_id is not None:
            gone += self.store.purge(session_id=session_id, tombstone=tombstone)
        if ids:
            gone += self.store.purge(ids=ids, tombstone=tombstone)
        if user_id is not None:  # in one transaction with the user's tombstone
            gone += self.store.purge(user_id=user_id, tombstone=tombstone)
            if self._items is None:
                self._items = self.backend.items()
            gone += purge_namespace(
                self.store, self._items, user_namespace(user_id), tombstone=tombstone
            )
        return gone

    def tombstones(self) -> list[Tombstone]:
        """What purges erased in this tenant, for an operator to review (``tombstones.py``).

        Returns:
            The tombstones, oldest first.

        Raises:
            ScopeError: The weave is limited to some scopes (tombstones are tenant-wide).
        """
        return self.store.tombstones()

    def lift_tombstone(
        self,
        *,
        session_id: str | None = None,
        event_id: str | None = None,
        user_id: str | None = None,
    ) -> bool:
        """Lift one purge's tombstone, so copies of that session, event or user are stored
        again (a re-import is accepted): an operator's explicit decision.

        Args:
            session_id: The purged session.
            event_id: Or the purged event.
            user_id: Or the purged user.

        Returns:
            False when there was no such tombstone.

        Raises:
            ValueError: Not exactly one of the three is given.
            ScopeError: The weave is limited to some scopes.
        """
        named = [
            (k, v)
            for k, v in ((SESSION, session_id), (EVENT, event_id), (USER, user_id))
            if v is not None
        ]
        if len(named) != 1:
            raise ValueError(
                "lift_tombstone takes exactly one of session_id=, event_id= or user_id="
            )
        return self.store.lift_tombstone(*named[0])

    def hide_session(self, session_id: str, reason: str) -> int:
        """Hide every event of ``session_id`` from every read (a soft delete: kept on
        disk for audit, ``include_inactive`` shows them), the memories and summaries
        maintenance made of its turns included.

        Args:
            session_id: The session.
            reason: Why, kept as each event's ``status_reason``.

        Returns:
            The number of events hidden.
        """
        self.flush()
        self._settle([session_id], None)
        ids = [e.id for e in self.store.timeline(session_id)]
        return self.store.soft_delete(ids, reason) if ids else 0

    def _settle(self, session_ids: Sequence[str], user_id: str | None) -> None:
        """Let context maintenance finish what it was doing with these sessions (or the
        user's), so nothing it derives from their turns is written after they go."""
        if not self._contexts:
            return
        sids = list(session_ids)
        if user_id is not None:
            sids += self.store.user_session_ids(user_id)
        for engine in list(self._contexts.values()):
            engine.settle(sids)

    def user_event_ids(self, user_id: str) -> list[str]:
        """Every stored event id of ``user_id`` (``meta["user_id"]``), whatever its status:
        what an access request or an erasure check lists.

        Args:
            user_id: The user.

        Returns:
            The ids, session by session in order.
        """
        return [
            e.id
            for sid in self.store.user_session_ids(user_id)
            for e in self.store.timeline(sid, include_inactive=True)
            if e.meta.get("user_id") == user_id
        ]

    # ------------------------------------------------------------ recall
    def _view(self, readable: Readable) -> EventStore:
        """The store as a call limited to ``readable`` (within the weave's scopes) sees it."""
        return self.store if readable == self.store.scopes else self.store.for_scopes(readable)

    @property
    def retriever(self) -> Retriever:
        """The fused retriever over this weave (built on first use; see ``retrieval.py``)."""
        return self.retriever_for(None)

    def retriever_for(self, scopes: Iterable[str] | str | None) -> Retriever:
        """The retriever of a narrower set of ``scopes`` (one per set, built on first use).

        Args:
            scopes: Some of the weave's scopes (``None``: all of them).

        Returns:
            The fused retriever over those scopes.

        Raises:
            ScopeError: ``scopes`` reaches beyond the weave's own.
        """
        readable = narrow(self.store.scopes, scopes)
        if readable not in self._retrievers:
            from beeweave_core.retrieval import Retriever

            self._retrievers[readable] = Retriever(
                self._view(readable), indexer=self.indexer, config=self.config.retrieval
            )
        return self._retrievers[readable]

    def retrieve(
        self,
        query: str,
        *,
        scopes: Iterable[str] | str | None = None,
        **kw: Unpack[RetrieveOptions],
    ) -> list[Hit]:
        """Find past events for ``query`` by fused recall (words, meaning, time, graph).

        Args:
            query: What to look for (its first ``MAX_QUERY_TOKENS`` tokens are searched).
            scopes: Narrows this call to some of the weave's scopes.
            **kw: ``session_id``, ``user_id``, ``k``, ``filters``, ``paths``, ``scope``,
                ``now``, ``config`` (see :meth:`beeweave_core.retrieval.Retriever.retrieve`).

        Returns:
            The best hits, each with its scores and provenance, best first.

        Raises:
            TypeError: ``query`` is not a string, or ``k`` not an int.
            ScopeError: ``scopes`` reaches beyond the weave's own.
        """
        with self.reads.reading():
            return self.retriever_for(scopes).retrieve(query, **kw)

    async def aretrieve(
        self,
        query: str,
        *,
        scopes: Iterable[str] | str | None = None,
        **kw: Unpack[RetrieveOptions],
    ) -> list[Hit]:
        """Async twin of :meth:`retrieve` (runs in a worker thread).

        Args:
            query: What to look for.
            scopes: Narrows this call to some of the weave's scopes.
            **kw: As :meth:`retrieve` takes them.

        Returns:
            The best hits, best first.
        """
        with self.reads.reading():
            return await self.retriever_for(scopes).aretrieve(query, **kw)

    # ------------------------------------------------------------ context
    @property
    def context(self) -> ContextEngine:
        """Assembly, compaction and long-term memory (built on first use; see ``context/``)."""
        return self.context_for(None)

    def context_for(self, scopes: Iterable[str] | str | None) -> ContextEngine:
        """The context engine of a narrower set of ``scopes`` (one per set).

        Args:
            scopes: Some of the weave's scopes (``None``: all of them).

        Returns:
            The engine that assembles, compacts and remembers within those scopes.

        Raises:
            ScopeError: ``scopes`` reaches beyond the weave's own.
        """
        readable = narrow(self.store.scopes, scopes)
        with self._contexts_lock:
            return self._contexts.get(readable) or self._new_context(readable)

    def _new_context(self, readable: Readable) -> ContextEngine:
        from functools import partial

        from beeweave_core.context import ContextEngine

        store = self._view(readable)
        engine = ContextEngine(
            self._writer_for(store),
            self.config.context,
            emit=partial(self._emit_record, store),  # type: ignore[arg-type]
            retrieve=partial(self.retrieve, scopes=readable),
            flush=partial(self.flush, reading=True),
            gate=self.reads,
        )
        self.bus.subscribe(engine.on_batch)
        self.on_close(lambda: self.bus.unsubscribe(engine.on_batch))
        self.on_close(engine.close)
        self._contexts[readable] = engine
        return engine

    def _emit_record(
        self,
        store: SessionDirectory,
        type: EventType | str,
        content: object = "",
        *,
        session_id: str,
        role: str | None = None,
        payload: Mapping[str, object] | None = None,
        meta: Mapping[str, object] | None = None,
        source: Mapping[str, object] | None = None,
    ) -> str | None:
        """Emit an assembly's audit record, of the scope of what it shows: the session's
        events and the pieces it lists.  One that spans two scopes is not recorded (no
        single scope may hold it; see ``scopes.py``)."""
        meta = dict(meta or {})
        if store.scopes is not None and len(store.scopes) == 1:
            meta[META_KEY] = next(iter(store.scopes))
        else:
            shown = {
                i
                for part in ("included", "left_out")
                for piece in (payload or {}).get(part) or ()  # type: ignore[attr-defined]
                for i in piece.get("event_ids") or ()
            }
            seen = store.scopes_in(session_id) | store.scopes_of(sorted(shown))
            try:
                scope = derived(seen)
            except PermissionError:
                return None
            if scope is not None:
                meta[META_KEY] = scope
        return self.bus.emit(
            type,
            content,
            session_id=session_id,
            role=role,
            payload=payload,
            meta=meta,
            source=source,
            lazy=True,  # the next read does not wait for it
        )

    def assemble(
        self,
        session_id: str,
        query: str | None = None,
        *,
        scopes: Iterable[str] | str | None = None,
        **kw: Unpack[AssembleOptions],
    ) -> AssembledContext:
        """The layered, token-budgeted context for the next model call of ``session_id``.

        Args:
            session_id: The session the model call continues.
            query: Steers recall (``None``: the latest user message).
            scopes: Only some of the weave's scopes, for this call.
            **kw: ``budget_tokens`` (required), ``model``, ``phase``, ``user_id``,
                ``agent_id`` ... (see :class:`~beeweave_core.context.request.AssembleRequest`).

        Returns:
            The messages for the model, with what each layer holds and why.

        Raises:
            TypeError: A missing ``budget_tokens``, an unknown option, or a bad type.
            ValueError: A budget that is not a positive int.
        """
        self._prepare_recall(query, kw.get("use_retriever"))
        return self.context_for(scopes).assemble(session_id, query, **kw)

    def _prepare_recall(self, query: object, use_retriever: object) -> None:
        """Start embedding the query while the engine reads the session: the vector is the
        slowest part of its recall, and the model runs beside this thread.  Only a query
        too short to be cut (the engine's cut follows the request's model): a long one
        is embedded when asked, as it would be."""
        if (
            self.indexer is not None
            and use_retriever is not False
            and isinstance(query, str)
            and query.strip()
            and uncut_query(query)
        ):
            self.indexer.prepare(query)

    async def aassemble(
        self,
        session_id: str,
        query: str | None = None,
        *,
        scopes: Iterable[str] | str | None = None,
        **kw: Unpack[AssembleOptions],
    ) -> AssembledContext:
        """Async twin of :meth:`assemble` (runs in a worker thread).

        Args:
            session_id: The session the model call continues.
            query: Steers recall (``None``: the latest user message).
            scopes: Only some of the weave's scopes, for this call.
            **kw: As :meth:`assemble` takes them.

        Returns:
            The assembled context.
        """
        self._prepare_recall(query, kw.get("use_retriever"))
        return await self.context_for(scopes).aassemble(session_id, query, **kw)

    def confirm(self, memory_id: str) -> str:
        """Wake a dormant memory (or keep one awake): it was confirmed now.

        Args:
            memory_id: The memory's event id.

        Returns:
            The id of the note that records it (see ``memory/dormancy.py``).

        Raises:
            NotFound: No active memory has that id.
        """
        from beeweave_core.memory.dormancy import confirm

        self.flush()
        return confirm(self.writer, memory_id, now=self.context.dormancy.clock())

    # ------------------------------------------------------------ lifecycle
    def on_close(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when the weave closes: after capture is flushed, before the store
        closes, newest first (a part closes before what it was built on).

        Args:
            fn: Called with no arguments; its failure is logged, closing goes on.
        """
        self._closers.append(fn)

    def close(self) -> None:
        """Flush capture, close the parts, then the store; safe to call twice.

        What the store does not take in time stays spooled and is replayed by the next
        weave opened on the same store and tenant.
        """
        if self._closed:
            return
        self._closed = True
        self.bus.close()
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:  # closing must finish even if one part fails
                log.exception("beeweave: closer failed")
        self.backend.close()

    def __enter__(self) -> Weave:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Weave(url={self.url!r}, tenant={self.tenant!r})"


def _warm_tokenizer() -> None:
    """Build the default model's tokenizer in the background (0.2-0.8 s of parsing),
    so a first ``assemble`` does not pay for it: the process keeps one per encoding."""
    from beeweave_core import tokens

    name = tokens.encoding_for_model(tokens.DEFAULT_MODEL)
    if not tokens.is_built(name):
        threading.Thread(
            target=tokens.get_encoding, args=(name,), daemon=True, name="beeweave-tokenizer"
        ).start()


def _with_index_options(
    config: WeaveConfig,
    *,
    embeddings: Embedder | None,
    index: str | VectorIndex | bool | None,
    vector_url: str | None,
    index_options: Mapping[str, object] | None,
) -> WeaveConfig:
    """``config`` with ``Weave.open``'s index shortcuts applied (they win)."""
    if embeddings is None and index is None and vector_url is None and not index_options:
        return config
    section = IndexConfig.from_options(
        index=index,
        embeddings=embeddings,
        vector_url=vector_url,
        index_options=index_options,
        base=config.index,
    )
    return replace(config, index=section)


__all__ = ["Weave", "beeweave_home", "default_url", "open_store"]
