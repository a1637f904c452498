"""The EventStore seam: narrow protocols and their union, one shared write-path, backends.

A backend only implements the ``_``-prefixed primitives of :class:`BaseEventStore`;
validation, the size policy, export/import and the async twins live here once, so
SQLite and Neo4j cannot drift apart on what they accept or how they store it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol, runtime_checkable

from beeweave_core import tombstones
from beeweave_core.errors import NotFound as NotFound  # re-exported: stores raise these
from beeweave_core.errors import StoreError as StoreError
from beeweave_core.errors import shown
from beeweave_core.events import (
    AppendResult,
    Edge,
    EdgeType,
    Event,
    EventType,
    SessionStats,
    Status,
)
from beeweave_core.exports import EXPORT_FORMAT, SessionExport, validate_export
from beeweave_core.payloads import (
    DEFAULT_INLINE_LIMIT,
    DEFAULT_PREVIEW_CHARS,
    PayloadError,
    clean_text,
    dumps,
    preview,
    sha256_text,
    to_jsonable,
)
from beeweave_core.scopes import META_KEY, Readable, ScopeError, refuse, scope_of, visible
from beeweave_core.scopes import write_scope as _write_scope
from beeweave_core.tombstones import Tombstone

#: Sessions of LangGraph store items (``items.py``): left out of ``sessions()`` unless asked.
ITEM_SESSION_PREFIX = "store:"
#: Counts the tokens of each text (a store keeps session token stats with it).
TokenCount = Callable[[list[str]], list[int]]


def default_token_count(texts: list[str]) -> list[int]:
    """Exact cl100k_base counts (offline); every backend's session token stats."""
    from beeweave_core.tokens import count_batch  # tiktoken's tables: loaded on first count

    return count_batch(texts)


#: Edge types walked by ``ancestors`` / ``descendants`` unless told otherwise.
CAUSAL_EDGES: tuple[EdgeType, ...] = (EdgeType.CAUSED_BY, EdgeType.REFERS_TO)
#: Deepest causal walk a store accepts (Neo4j writes the bound into the query text).
MAX_WALK_DEPTH = 1_000
MAX_ID_LEN = 512
#: Links whose sources a store remembers for :meth:`BaseEventStore.linked_since`.
RECENT_LINKS = 1_024


def _check_id(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{kind} must be a non-empty string, got {shown(value)}")
    if len(value) > MAX_ID_LEN:
        raise ValueError(f"{kind} is {len(value):,} chars; the limit is {MAX_ID_LEN}")
    if clean_text(value) != value:
        raise ValueError(f"{kind} contains lone surrogates: {shown(value)}")
    return value


class Prepared(NamedTuple):
    """An event in its stored form, with its JSON columns already serialised once."""

    event: Event
    artifacts: dict[str, str]
    payload_json: str
    meta_json: str
    source_json: str


def prepare_event(
    event: Event,
    tenant: str,
    *,
    inline_limit: int = DEFAULT_INLINE_LIMIT,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
    canonical: bool = False,
) -> Prepared:
    """Validate ``event`` and bring it to its stored form.

    The stored event has the store's tenant, UTF-8-safe text, a canonical payload,
    and big content/payload moved out to artifacts ``{sha256: full_text}`` that
    must be written with it.  ``canonical``: payload, meta and source are in that form
    already (the capture bus's records: its journal made them so), not converted again.
    """
    _check_id("event id", event.id)
    _check_id("session_id", event.session_id)
    for p in event.parents:
        _check_id("parent id", p)
    artifacts: dict[str, str] = {}
    content = clean_text(event.content)
    try:
        if canonical:
            payload, meta, source = event.payload, event.meta, event.source
        else:
            payload = to_jsonable(event.payload)
            meta = to_jsonable(event.meta)
            source = to_jsonable(event.source)
        payload_text = dumps(payload)
    except (TypeError, ValueError) as exc:  # pragma: no cover - to_jsonable is total
        raise PayloadError(f"event {event.id}: payload cannot be stored: {exc}") from exc
    if len(content) > inline_limit:
        sha = sha256_text(content)
        artifacts[sha] = content
        payload = {**payload, "$artifact": {"sha256": sha, "chars": len(content), "of": "content"}}
        content = preview(content, preview_chars)
    if len(payload_text) > inline_limit:
        sha = sha256_text(payload_text)
        artifacts[sha] = payload_text
        keep = {k: v for k, v in payload.items() if k == "$artifact"}
        payload = {
            **keep,
            "$payload_artifact": {"sha256": sha, "chars": len(payload_text), "of": "payload"},
            "$preview": preview(payload_text, preview_chars),
        }
    if artifacts:
        payload_text = dumps(payload)
    stored = event.model_copy(
        update={
            "tenant": tenant,
            "content": content,
            "payload": payload,
            "meta": meta,
            "source": source,
            "role": clean_text(event.role) if event.role else event.role,
            "status": Status.ACTIVE,
            "status_reason": None,
        }
    )
    return Prepared(stored, artifacts, payload_text, dumps(meta), dumps(source))


@runtime_checkable
class TenantView(Protocol):
    """Which records a store object sees: one tenant, and ``scopes`` of it (``None``: every
    scope; see :mod:`beeweave_core.scopes`).  The narrow protocols below but ``Connection``
    extend it."""

    tenant: str
    scopes: Readable


@runtime_checkable
class EventReader(TenantView, Protocol):
    """Reads events, their edges and artifacts: what retrieval, views and indexing need."""

    def get(self, ids: Sequence[str], *, include_inactive: bool = False) -> list[Event]:
        """Read events by id, in the order asked.

        Args:
            ids: The event ids; unknown ones are left out.
            include_inactive: Also return deleted and invalidated events.

        Returns:
            The events found.

        Raises:
            ScopeError: An id belongs to a scope outside this view.
        """

    def timeline(
        self,
        session_id: str,
        *,
        last: int | None = None,
        seq_from: int | None = None,
        seq_to: int | None = None,
        since: float | None = None,
        until: float | None = None,
        types: Iterable[EventType] | None = None,
        include_inactive: bool = False,
    ) -> list[Event]:
        """Read a session in order, whole or a slice of it.

        Args:
            session_id: The session.
            last: Only the latest ``last`` events (still oldest first).
            seq_from: Only events at or after this ``seq``.
            seq_to: Only events at or before this ``seq``.
            since: Only events at or after this time (seconds since the epoch).
            until: Only events at or before this time.
            types: Only events of these types.
            include_inactive: Also return deleted and invalidated events.

        Returns:
            The events, oldest first (empty for an unknown session).
        """

    def ancestors(
        self,
        event_id: str,
        *,
        depth: int = 3,
        edge_types: Sequence[EdgeType] = CAUSAL_EDGES,
        include_inactive: bool = False,
    ) -> list[tuple[Event, int]]:
        """Find what led to ``event_id``: events reached along its outgoing causal edges.

        Args:
            event_id: Where the walk starts.
            depth: Most hops (0 to ``MAX_WALK_DEPTH``).
            edge_types: The edge types followed (never NEXT).
            include_inactive: Also return deleted and invalidated events (hidden ones
                are walked through either way).

        Returns:
            ``(event, hops)`` pairs, nearest first.

        Raises:
            ValueError: A bad ``depth``, or NEXT among ``edge_types``.
            ScopeError: ``event_id`` belongs to a scope outside this view.
        """

    def descendants(
        self,
        event_id: str,
        *,
        depth: int = 3,
        edge_types: Sequence[EdgeType] = CAUSAL_EDGES,
        include_inactive: bool = False,
    ) -> list[tuple[Event, int]]:
        """Find what ``event_id`` led to: events whose causal edges point at it.

        Args:
            event_id: Where the walk starts.
            depth: Most hops (0 to ``MAX_WALK_DEPTH``).
            edge_types: The edge types followed (never NEXT).
            include_inactive: Also return deleted and invalidated events.

        Returns:
            ``(event, hops)`` pairs, nearest first.

        Raises:
            ValueError: A bad ``depth``, or NEXT among ``edge_types``.
            ScopeError: ``event_id`` belongs to a scope outside this view.
        """

    def around(
        self,
        events: Sequence[Event],
        *,
        depth: int,
        neighbours: int,
        edge_types: Sequence[EdgeType] = CAUSAL_EDGES,
    ) -> dict[str, list[tuple[Event, int, bool]]]:
        """Read what lies around each of ``events`` at once: a recall reads it for its
        best hits, and a networked store answers them all in one round trip.

        Args:
            events: Where the reads start (events of this view).
            depth: Most causal hops, both ways (0: none).
            neighbours: Session neighbours on each side, by sequence number (0: none).
            edge_types: The edge types followed (never NEXT).

        Returns:
            Per event id, ``(event, distance, beside)``: its active ancestors, then
            descendants (as :meth:`ancestors` and :meth:`descendants` give them), then
            its session's active events within ``neighbours`` (``beside`` True, the
            event itself included, oldest first).
        """

    def edges(
        self,
        *,
        event_id: str | None = None,
        session_id: str | None = None,
        types: Iterable[EdgeType] | None = None,
        direction: str = "out",
    ) -> list[Edge]:
        """Read the links of one event or of a whole session.

        Args:
            event_id: The event whose edges to read.
            session_id: Or the session whose edges to read.
            types: Only edges of these types (``None``: all).
            direction: For an event: ``"out"``, ``"in"`` or ``"both"``.

        Returns:
            The edges.

        Raises:
            ValueError: Not exactly one of ``event_id`` and ``session_id``, or an
                unknown ``direction``.
        """

    def get_artifact(self, sha256: str) -> str | None:
        """The full text behind a preview (``payload["$artifact"]["sha256"]``).

        Args:
            sha256: The artifact's hash.

        Returns:
            The text, or ``None`` when no such artifact is stored.
        """

    def search_text(
        self,
        query: str,
        *,
        k: int = 10,
        session_id: str | None = None,
        user_id: str | None = None,
        types: Iterable[EventType] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[tuple[Event, float]]:
        """Find active events by the words, numbers or codes of ``query`` (full text).

        Args:
            query: Any text; it is never passed on as query syntax.
            k: Most hits.
            session_id: Only events of this session.
            user_id: Only events of the sessions this user took part in.
            types: Only events of these types.
            since: Only events at or after this time (seconds since the epoch).
            until: Only events at or before this time.

        Returns:
            ``(event, score)`` pairs, best first.
        """


@runtime_checkable
class EventWriter(TenantView, Protocol):
    """Writes events and edges and changes their status (provenance notes, archive links)."""

    def in_scope(self, ev: Event) -> Event:
        """Give a record about to be written the scope this view writes it under.

        Args:
            ev: The record; a scope it names in ``meta`` is kept when allowed.

        Returns:
            ``ev``, or a copy carrying the scope in ``meta``.

        Raises:
            ScopeError: ``ev`` names a scope this view may not write, or the view
                writes several scopes and the record must name one.
        """

    def append(self, events: Sequence[Event], *, canonical: bool = False) -> AppendResult:
        """Store ``events`` in order; ids already stored are counted, not rewritten.

        Args:
            events: The events; the store sets their tenant, ``seq`` and status.
            canonical: Their payload, meta and source are in canonical form already
                (:func:`~beeweave_core.payloads.to_jsonable`; the capture bus's records).

        Returns:
            How many were written, how many were already stored, and which a purge
            erased (those are refused).

        Raises:
            TypeError: An item is not an :class:`Event`.
            ValueError: An id, session id or parent id is empty or too long.
            ScopeError: An event is outside the scopes this view writes.
        """

    def link(self, edges: Sequence[Edge]) -> int:
        """Add edges found after the events were written (REFERS_TO, SUMMARIZES, ...).

        Args:
            edges: The edges; ones already stored are kept as they are.

        Returns:
            How many edges were added.

        Raises:
            ValueError: An edge is of type NEXT (that order is the session's).
        """

    def soft_delete(self, ids: Sequence[str], reason: str) -> int:
        """Hide events from every read, keeping them on disk (``include_inactive`` shows
        them).

        Args:
            ids: The event ids.
            reason: Why, kept as their ``status_reason``.

        Returns:
            How many events changed.

        Raises:
            ValueError: ``reason`` is not a string.
            ScopeError: An id belongs to a scope outside this view.
        """

    def invalidate(self, ids: Sequence[str], reason: str, *, by: str | None = None) -> int:
        """Mark events as no longer true, so recall stops offering them.

        Args:
            ids: The event ids.
            reason: Why, kept as their ``status_reason``.
            by: The event that replaces them (a SUPERSEDES edge from it to each).

        Returns:
            How many events changed.

        Raises:
            ValueError: ``reason`` is not a string.
            ScopeError: An id belongs to a scope outside this view.
        """


@runtime_checkable
class Changes(TenantView, Protocol):
    """The counters by which a part holding what it derived from the store (views, caches,
    a text index) learns that the store changed, without reading it again."""

    #: Bumped by every status change or purge made through this object.
    status_changes: int
    #: Bumped by every ``link`` made through this object (see :meth:`linked_since`).
    link_changes: int

    def linked_since(self, mark: int) -> set[str] | None:
        """Sources of the edges linked since ``link_changes`` was ``mark``.

        Args:
            mark: An earlier ``link_changes``.

        Returns:
            Their source ids (``None``: too many links ago to tell).
        """
        ...

    def sync_text_index(
        self, batch: int = 5_000, *, go_on: Callable[[], bool] | None = None
    ) -> int:
        """Bring the full-text index up to what is stored (SQLite indexes text off the
        write path; a store that indexes as it writes has nothing to do).

        Args:
            batch: Events indexed per transaction.
            go_on: Asked before each batch; False stops there.

        Returns:
            How many events were indexed.
        """
        ...


@runtime_checkable
class ChangeReader(EventReader, Changes, Protocol):
    """Reads events and learns when they changed: for a part that keeps what it derives."""


@runtime_checkable
class EventGraph(EventReader, EventWriter, Protocol):
    """Reads and writes the event graph: for a part that maintains records it derives from
    the ones it reads (memories, summaries, rollbacks)."""


@runtime_checkable
class SessionDirectory(TenantView, Protocol):
    """Finds sessions and what they hold, without reading their events."""

    def sessions(
        self, *, user_id: str | None = None, include_items: bool = False
    ) -> list[SessionStats]:
        """List the conversations, for listings and dashboards.

        Args:
            user_id: Only the sessions this user took part in.
            include_items: Also the per-item sessions of LangGraph store items.

        Returns:
            Each session's stats, the most recently active first.
        """

    def session_ids_starting(self, prefix: str) -> list[str]:
        """Find sessions by id prefix, of any scope: what a purge of store items under a
        namespace looks for (the purge refuses another scope's).

        Args:
            prefix: A non-empty start of the session ids.

        Returns:
            The matching session ids.
        """

    def user_session_ids(self, user_id: str) -> list[str]:
        """The sessions a user took part in, without their stats (a scope, not a report).

        Args:
            user_id: The user.

        Returns:
            Their session ids.
        """

    def recent_session_ids(self, limit: int) -> list[str]:
        """The sessions active most recently, for listings that need no stats.

        Args:
            limit: Most sessions returned.

        Returns:
            Session ids (store items included), the newest latest event first.
        """

    def recent_user_sessions(self, user_id: str, limit: int) -> list[tuple[str, int]]:
        """A user's latest conversations: what cross-session recall reads per call.

        Args:
            user_id: The user.
            limit: Most sessions returned.

        Returns:
            ``(session id, last seq)`` pairs, the newest last event first.
        """

    def scopes_in(self, session_id: str) -> set[str | None]:
        """The scopes a session's events carry, as far as this view may see them.

        Args:
            session_id: The session.

        Returns:
            The scope names (``None`` for unscoped events).
        """

    def scopes_of(self, ids: Sequence[str]) -> set[str | None]:
        """The scopes of stored events, read without loading them (an assembly's audit
        record names the scope of thousands of events per call).

        Args:
            ids: The event ids.

        Returns:
            The scope names (``None`` for unscoped events).

        Raises:
            ScopeError: An id belongs to a scope outside this view.
        """

    def session_stats(self, session_id: str) -> SessionStats:
        """What one session holds.

        Args:
            session_id: The session.

        Returns:
            Its stats.

        Raises:
            NotFound: The session has no events for this tenant.
        """


@runtime_checkable
class SessionReader(ChangeReader, SessionDirectory, Protocol):
    """Reads events and finds the sessions they belong to: recall across sessions, listings,
    indexing."""


@runtime_checkable
class Erasure(TenantView, Protocol):
    """Deletes for good and keeps the tombstones that refuse what was erased."""

    def purge(
        self,
        *,
        session_id: str | None = None,
        ids: Sequence[str] | None = None,
        user_id: str | None = None,
        tombstone: bool = True,
    ) -> list[str]:
        """Delete for good (GDPR-style): events, their edges, artifacts no one points to.

        Args:
            session_id: Purge this session.
            ids: Or these events.
            user_id: Or every event of this user.
            tombstone: Leave a tombstone, so a copy still pending anywhere is refused
                when it arrives (False: the same events may come in again).

        Returns:
            The ids deleted (what the vector index must drop).

        Raises:
            ValueError: Not exactly one of ``session_id``, ``ids`` and ``user_id``.
            ScopeError: The target holds events outside this view's scopes.
        """

    def tombstones(self) -> list[Tombstone]:
        """What purges erased in this tenant: an operator's listing.

        Returns:
            The tombstones, oldest first.

        Raises:
            ScopeError: This view is limited to some scopes (tombstones are tenant-wide).
        """

    def lift_tombstone(self, kind: str, value: str) -> bool:
        """Let copies of a purged record in again: an operator's explicit decision.

        Args:
            kind: The tombstone's kind (event, session or user).
            value: The id it names.

        Returns:
            False when there was no such tombstone.

        Raises:
            ValueError: An unknown ``kind`` or an empty ``value``.
            ScopeError: This view is limited to some scopes.
        """


@runtime_checkable
class Portability(TenantView, Protocol):
    """Moves whole sessions between stores: export and all-or-nothing import."""

    def export_session(self, session_id: str) -> dict[str, Any]:
        """Everything needed to rebuild a session elsewhere: events (any status), edges,
        artifacts.

        Args:
            session_id: The session.

        Returns:
            The export, a JSON-ready dict that :meth:`import_session` takes.

        Raises:
            NotFound: The session has no events for this tenant.
            ScopeError: The session holds events outside this view's scopes.
        """

    def import_session(self, data: dict[str, Any] | SessionExport) -> AppendResult:
        """Load an export into this tenant, all or nothing, keeping ids, seq, status and
        edges.

        Args:
            data: What :meth:`export_session` returned, or it validated.

        Returns:
            What was written and what was already stored.

        Raises:
            ValueError: ``data`` is not a valid export, or conflicts with stored events.
        """


@runtime_checkable
class Connection(Protocol):
    """The connection behind a store: its schema, its views of other tenants and scopes."""

    #: Seconds the capture bus lets events gather between background writes.
    write_interval: float

    def setup(self) -> None:
        """Create or migrate the schema, so a fresh database can be written; idempotent.

        Raises:
            StoreError: The database cannot hold BeeWeave's schema (a server too old).
        """

    def for_tenant(self, tenant: str) -> EventStore:
        """Read and write another tenant over the same connection.

        Args:
            tenant: The tenant of the view.

        Returns:
            A store of the same backend, scoped to ``tenant`` and to this view's scopes.
        """

    def for_scopes(self, scopes: Readable) -> EventStore:
        """Narrow what this store reads and writes to ``scopes`` (never wider).

        Args:
            scopes: The scope names the view may see (``None``: this view's own).

        Returns:
            A view of the same tenant.

        Raises:
            ScopeError: ``scopes`` reaches beyond this view's own.
        """

    def close(self) -> None:
        """Release the connection (a view sharing it leaves it to its owner)."""


@runtime_checkable
class EventStore(SessionReader, EventGraph, Erasure, Portability, Connection, Protocol):
    """What every event-graph backend offers: the union of the narrow protocols above.  All
    reads are scoped to ``tenant``, and to ``scopes`` (``None``: every scope; see
    :mod:`beeweave_core.scopes`).  A part takes the narrowest of them it uses."""


def walk_types(depth: int, edge_types: Sequence[EdgeType]) -> list[str]:
    """Check a walk's arguments; the edge type names to follow (empty: nothing to walk)."""
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise ValueError(f"depth must be an int, got {depth!r}")
    if not 0 <= depth <= MAX_WALK_DEPTH:
        raise ValueError(f"depth must be between 0 and {MAX_WALK_DEPTH}, got {depth}")
    types = list(dict.fromkeys(EdgeType(t).value for t in edge_types))
    if EdgeType.NEXT.value in types:
        raise ValueError("walk along NEXT with timeline(), not ancestors()/descendants()")
    return types if depth > 0 else []


class BaseEventStore:
    """Shared behaviour; backends implement the ``_`` primitives."""

    tenant: str
    #: The scopes this view reads and writes (``None``: every scope).
    scopes: Readable = None
    inline_limit: int = DEFAULT_INLINE_LIMIT
    #: Default: written each journal tick (a SQLite append costs well under a ms).
    write_interval: float = 0.0
    #: Bumped by every status change or purge made through this object, so a reader
    #: holding derived state (the context engine) knows when to read again.
    status_changes: int = 0

    def _status_changed(self) -> None:
        self.status_changes += 1

    def _begin_purge(
        self, session_id: str | None, ids: Sequence[str] | None, user_id: str | None
    ) -> None:
        """Every backend's purge names exactly one target; a view's status changes."""
        if sum(x is not None for x in (session_id, ids, user_id)) != 1:
            raise ValueError("purge() takes exactly one of session_id=, ids= or user_id=")
        self._status_changed()

    #: Bumped by every ``link`` made through this object; with the sources of the
    #: newest links (see :meth:`linked_since`), a cache of what edges say (when a
    #: memory was last restated) drops only the entries a new edge changed.
    link_changes: int = 0
    _recent_links: deque[tuple[int, frozenset[str]]] | None = None

    def _linked(self, edges: Sequence[Edge]) -> None:
        if self._recent_links is None:
            self._recent_links = deque(maxlen=RECENT_LINKS)
        self.link_changes += 1
        self._recent_links.append((self.link_changes, frozenset(e.src for e in edges)))

    def sync_text_index(
        self, batch: int = 5_000, *, go_on: Callable[[], bool] | None = None
    ) -> int:
        """Nothing to do: this store's text index follows its writes (SQLite overrides)."""
        return 0

    def linked_since(self, mark: int) -> set[str] | None:
        """Sources of the edges linked after ``link_changes`` was ``mark`` (``None``:
        too many links ago to tell)."""
        if mark == self.link_changes:
            return set()
        recent = list(self._recent_links or ())
        if not recent or recent[0][0] > mark + 1:
            return None
        return {src for n, srcs in recent if n > mark for src in srcs}

    # ----------------------------------------------------------------- writes
    def append(self, events: Sequence[Event], *, canonical: bool = False) -> AppendResult:
        """Store ``events`` in order; ids already stored are counted, not rewritten."""
        prepared: list[Prepared] = []
        seen: set[str] = set()
        for ev in events:
            if not isinstance(ev, Event):
                raise TypeError(f"append() takes Event objects, got {type(ev).__name__}")
            if ev.id in seen:
                continue
            seen.add(ev.id)
            ev = self.in_scope(ev)
            prepared.append(
                prepare_event(ev, self.tenant, inline_limit=self.inline_limit, canonical=canonical)
            )
        if not prepared:
            return AppendResult(duplicates=len(events))
        result = self._append(prepared)
        result.duplicates += len(events) - len(prepared)
        return result

    # ------------------------------------------------------------- tombstones
    def tombstones(self) -> list[Tombstone]:
        """What purges erased in this tenant, oldest first: an operator's listing."""
        self._operator_only("list tombstones")
        return sorted(self._tombstones(), key=lambda t: (t.at, t.kind, t.value))

    def lift_tombstone(self, kind: str, value: str) -> bool:
        """Let copies of a purged record in again: an operator's explicit decision (a
        re-import is accepted afterwards).  False when there was no such tombstone."""
        self._operator_only("lift a tombstone")
        if kind not in tombstones.KINDS:
            raise ValueError(f"kind must be one of {', '.join(tombstones.KINDS)}, got {kind!r}")
        if not isinstance(value, str) or not value:
            raise ValueError(f"value must be a non-empty string, got {value!r}")
        return self._lift_tombstone(kind, value)

    def _operator_only(self, what: str) -> None:
        if self.scopes is not None:  # tombstones name sessions and users of every scope
            raise ScopeError(f"only a weave of every scope may {what} (tombstones are tenant-wide)")

    def _tombstones(self) -> list[Tombstone]:
        raise NotImplementedError

    def _lift_tombstone(self, kind: str, value: str) -> bool:
        raise NotImplementedError

    # ----------------------------------------------------------------- scopes
    def in_scope(self, ev: Event) -> Event:
        """``ev`` with the scope it is written under; ScopeError if it may not be.

        A record naming no scope, written by a view of several scopes, stays unscoped:
        BeeWeave's own records derived from unscoped sources (capture through
        ``Weave.emit`` is stricter: there such a writer must name one)."""
        named = scope_of(ev.meta)
        if named is None and (self.scopes is None or len(self.scopes) != 1):
            return ev
        scope = _write_scope(named, self.scopes)
        if scope == named:
            return ev
        return ev.model_copy(update={"meta": {**ev.meta, META_KEY: scope}})

    def _scopes_of(self, ids: list[str]) -> dict[str, str | None]:
        """The scope of each stored event among ``ids`` (any status, unfiltered)."""
        raise NotImplementedError

    def _session_scopes(self, session_id: str) -> set[str | None]:
        """The scopes the events of one session carry (any status, unfiltered)."""
        raise NotImplementedError

    def scopes_in(self, session_id: str) -> set[str | None]:
        """The scopes of the session's events this view may see (``None``: unscoped)."""
        return {s for s in self._session_scopes(session_id) if visible(s, self.scopes)}

    def scopes_of(self, ids: Sequence[str]) -> set[str | None]:
        """The scopes the stored events among ``ids`` carry, read without loading the
        events (an assembly's audit record names the scope of thousands of them per
        call); ids of a scope outside this view are refused, as ``get`` does."""
        found = self._scopes_of(list(dict.fromkeys(ids))) if ids else {}
        foreign = [i for i, s in found.items() if not visible(s, self.scopes)]
        if foreign:
            refuse(foreign, self.scopes)
        return set(found.values())

    def _refuse_foreign(self, ids: Sequence[str]) -> None:
        """An explicit read or change of events outside this view's scopes is an error."""
        if self.scopes is None or not ids:
            return
        found = self._scopes_of(list(dict.fromkeys(ids)))
        foreign = [i for i, s in found.items() if not visible(s, self.scopes)]
        if foreign:
            refuse(foreign, self.scopes)

    def _refuse_foreign_session(self, session_id: str) -> None:
        """A whole-session operation (export, purge) needs every event of it in scope."""
        if self.scopes is None:
            return
        if any(not visible(s, self.scopes) for s in self._session_scopes(session_id)):
            raise ScopeError(
                f"session {shown(session_id)} holds events of a scope outside "
                f"{{{', '.join(sorted(self.scopes))}}}"
            )

    def _visible_edges(self, edges: list[Edge], event_id: str | None) -> list[Edge]:
        """Edges whose two ends this view may see (an edge names the other end's id)."""
        if self.scopes is None:
            return edges
        if event_id is not None:
            self._refuse_foreign([event_id])
        ends = self._scopes_of(sorted({i for e in edges for i in (e.src, e.dst)}))
        return [
            e
            for e in edges
            if visible(ends.get(e.src), self.scopes) and visible(ends.get(e.dst), self.scopes)
        ]

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **kw: Any) -> Iterator[Any]:
        """``with Store.from_conn_string("agent.db" | "neo4j://host:7687", …) as store:``"""
        store = cls(conn_string, **kw)
        try:
            yield store
        finally:
            store.close()  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ walks
    def ancestors(
        self,
        event_id: str,
        *,
        depth: int = 3,
        edge_types: Sequence[EdgeType] = CAUSAL_EDGES,
        include_inactive: bool = False,
    ) -> list[tuple[Event, int]]:
        """What led to ``event_id``: events reached along outgoing causal edges.

        Nearest first.  Hidden (deleted/invalidated) events are left out of the
        answer but still walked through, so a cause behind them is still found.
        """
        types = walk_types(depth, edge_types)
        self._refuse_foreign([event_id])
        return self._walk(event_id, depth, types, include_inactive, forward=True) if types else []

    def descendants(
        self,
        event_id: str,
        *,
        depth: int = 3,
        edge_types: Sequence[EdgeType] = CAUSAL_EDGES,
        include_inactive: bool = False,
    ) -> list[tuple[Event, int]]:
        """What ``event_id`` led to: events whose causal edges point at it."""
        types = walk_types(depth, edge_types)
        self._refuse_foreign([event_id])
        return self._walk(event_id, depth, types, include_inactive, forward=False) if types else []

    def around(
        self,
        events: Sequence[Event],
        *,
        depth: int,
        neighbours: int,
        edge_types: Sequence[EdgeType] = CAUSAL_EDGES,
    ) -> dict[str, list[tuple[Event, int, bool]]]:
        """What lies around each of ``events`` (see :class:`EventReader`)."""
        types = walk_types(depth, edge_types)
        self._refuse_foreign([ev.id for ev in events])
        return self._around(events, types, depth, neighbours)

    def _around(
        self, events: Sequence[Event], types: list[str], depth: int, neighbours: int
    ) -> dict[str, list[tuple[Event, int, bool]]]:
        """:meth:`around` for checked arguments: one read per walk here, a backend with
        round trips to save answers in one."""
        out: dict[str, list[tuple[Event, int, bool]]] = {}
        for ev in events:
            found = [
                (o, d, False)
                for forward in ((True, False) if types else ())
                for o, d in self._walk(ev.id, depth, types, False, forward=forward)
            ]
            out[ev.id] = found + self._near(ev, neighbours)
        return out

    def _near(self, ev: Event, neighbours: int) -> list[tuple[Event, int, bool]]:
        """``ev``'s session neighbours within ``neighbours`` places, as :meth:`around`
        lists them (with their distance, marked as neighbours)."""
        if neighbours <= 0 or ev.seq < 0:
            return []
        near = self.timeline(  # type: ignore[attr-defined]
            ev.session_id, seq_from=max(0, ev.seq - neighbours), seq_to=ev.seq + neighbours
        )
        return [(o, abs(o.seq - ev.seq), True) for o in near]

    def _walk(
        self, event_id: str, depth: int, types: list[str], include_inactive: bool, forward: bool
    ) -> list[tuple[Event, int]]:
        """Events within ``depth`` hops along ``types`` (validated), nearest first."""
        raise NotImplementedError

    def _append(self, prepared: list[Prepared], *, keep_seq: bool = False) -> AppendResult:
        """Write prepared events in order; ``keep_seq`` (import) keeps seq and status."""
        raise NotImplementedError

    def session_stats(self, session_id: str) -> SessionStats:
        for s in self._session_stats([session_id]):
            return s
        raise NotFound(f"no session {session_id!r} for tenant {self.tenant!r}")

    def sessions(
        self, *, user_id: str | None = None, include_items: bool = False
    ) -> list[SessionStats]:
        """Conversations, without the per-item sessions of LangGraph store items
        (``include_items=True`` lists those too)."""
        found = self._session_stats(None, user_id=user_id)
        if include_items:
            return found
        return [s for s in found if not s.session_id.startswith(ITEM_SESSION_PREFIX)]

    def user_session_ids(self, user_id: str) -> list[str]:
        """The sessions ``user_id`` took part in, without their stats (a scope, not a
        report: stats count tokens, which costs as much as writing the events)."""
        return [s.session_id for s in self.sessions(user_id=user_id)]

    def recent_session_ids(self, limit: int) -> list[str]:
        """The ``limit`` sessions (store items included) whose latest active event is
        newest, newest first.  This default reads every session's stats; a backend
        with a time index reads only the newest events (SQLite)."""
        return [s.session_id for s in self.sessions(include_items=True)][: max(0, limit)]

    def recent_user_sessions(self, user_id: str, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` conversations of ``user_id`` whose last event is newest, newest
        first, as (session id, last seq): what cross-session recall reads per call, so a
        backend answers it from indexes, one step per session, never per event.  This
        default reads the user's session stats."""
        found = [(s.session_id, s.last_seq) for s in self.sessions(user_id=user_id)]
        return found[: max(0, limit)]

    @staticmethod
    def _newest_conversations(
        rows: Iterable[tuple[str, int, float | None]], limit: int
    ) -> list[tuple[str, int]]:
        """``recent_user_sessions``'s answer from (session id, last seq, its time) rows
        a backend read from its indexes: store items left out, newest ``limit`` first."""
        kept = [r for r in rows if not r[0].startswith(ITEM_SESSION_PREFIX)]
        kept.sort(key=lambda r: (r[2] or 0.0, r[1]), reverse=True)
        return [(sid, int(seq)) for sid, seq, _ in kept[: max(0, limit)]]

    def _session_stats(
        self, session_ids: list[str] | None, *, user_id: str | None = None
    ) -> list[SessionStats]:
        raise NotImplementedError

    # ---------------------------------------------------------- export/import
    def export_session(self, session_id: str) -> dict[str, Any]:
        """Everything needed to rebuild a session: events (any status), edges, artifacts."""
        self._refuse_foreign_session(session_id)
        events = self.timeline(session_id, include_inactive=True)
        if not events:
            raise NotFound(f"no session {session_id!r} for tenant {self.tenant!r}")
        declared = {(e.src, e.type, e.dst) for ev in events for e in ev.edges()}
        extra = [
            e.model_dump(mode="json")
            for e in self.edges(session_id=session_id)
            if e.type != EdgeType.NEXT and (e.src, e.type, e.dst) not in declared
        ]
        shas = sorted(
            {
                a["sha256"]
                for ev in events
                for a in (ev.payload.get("$artifact"), ev.payload.get("$payload_artifact"))
                if isinstance(a, dict)
            }
        )
        return {
            "format": EXPORT_FORMAT,
            "tenant": self.tenant,
            "session_id": session_id,
            "events": [ev.to_record() for ev in events],
            "edges": extra,
            "artifacts": {sha: self.get_artifact(sha) for sha in shas},
        }

    def import_session(self, data: dict[str, Any] | SessionExport) -> AppendResult:
        """Load an export into this tenant, keeping ids, seq, status and edges.

        The whole file is validated first (see :mod:`beeweave_core.exports`); then
        events and artifacts go in one transaction.  Extra edges follow; if they
        cannot be written the imported events are purged again, so an import is all
        or nothing.
        """
        export = data if isinstance(data, SessionExport) else validate_export(data)
        prepared = []
        for ev in export.events:
            ev = self.in_scope(ev)
            p = prepare_event(
                ev.model_copy(update={"tenant": self.tenant}),
                self.tenant,
                inline_limit=self.inline_limit,
            )
            kept = p.event.model_copy(
                update={"status": ev.status, "status_reason": ev.status_reason}
            )
            prepared.append(p._replace(event=kept, artifacts={}))
        if prepared:
            prepared[0] = prepared[0]._replace(artifacts=export.artifacts)
        result = self._append(prepared, keep_seq=True)
        try:
            self.link(export.edges)
        except Exception:
            if result.ids:
                self.purge(ids=result.ids, tombstone=False)
            raise
        return result

    # ------------------------------------------------------------ async twins
    async def aappend(self, events: Sequence[Event]) -> AppendResult:
        return await asyncio.to_thread(self.append, events)

    async def aget(self, ids: Sequence[str], **kw: Any) -> list[Event]:
        return await asyncio.to_thread(self.get, ids, **kw)  # type: ignore[attr-defined]

    async def atimeline(self, session_id: str, **kw: Any) -> list[Event]:
        return await asyncio.to_thread(self.timeline, session_id, **kw)  # type: ignore[attr-defined]

    async def aancestors(self, event_id: str, **kw: Any) -> list[tuple[Event, int]]:
        return await asyncio.to_thread(self.ancestors, event_id, **kw)  # type: ignore[attr-defined]

    async def adescendants(self, event_id: str, **kw: Any) -> list[tuple[Event, int]]:
        return await asyncio.to_thread(self.descendants, event_id, **kw)  # type: ignore[attr-defined]

    def __enter__(self) -> BaseEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]
