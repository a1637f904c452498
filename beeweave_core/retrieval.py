"""Recall: find the past events that answer a query, and say where each came from.

Several *paths* each rank candidates their own way:

* ``recent``   — the latest events of the current session (what was just said);
* ``semantic`` — nearest vectors (same meaning, other words);
* ``lexical``  — BM25 over exact words, numbers, codes and names (Chinese too);
* ``temporal`` — the semantic + lexical search again, inside the dates the query
  names ("what did we decide on 13 October 2023?"), as a soft preference;
* ``metadata`` — events matching the filters alone, newest first (when filters
  are given);
* ``feedback`` — the lexical search again, with the words the best lexical hits
  share added to the query (a second round: what a list question's other answers
  have in common with its first);
* ``graph``    — events linked to the best hits of the other paths: their causes
  and effects (the tool call and user question behind a tool result) and their
  neighbours in the session (a question's answer is usually the next turn).

Ranks are fused by weighted reciprocal rank (ranks, unlike raw scores, compare
across paths); the graph path passes on a share of its seed's fused score, since a
neighbour is relevant *because* its seed is.  The fused score is then weighted by
event type, raised for what the one author the query names wrote ("what did Ana
say about the shed?"), and decayed by age (half-life), near-identical texts are merged, and
only active events of the weave's tenant within the requested scope come back.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypedDict

from beeweave_core.config import DAY, DEFAULT_TYPE_WEIGHTS, PATHS, RetrievalConfig
from beeweave_core.errors import shown
from beeweave_core.events import SEARCHED_TYPES, EdgeType, Event, EventType, Status
from beeweave_core.index.base import IndexFilter
from beeweave_core.ranking import age_weight, minmax_shares, rrf_shares
from beeweave_core.store import SessionReader
from beeweave_core.telemetry import traced
from beeweave_core.text.segment import STOPWORDS, has_cjk, tokens
from beeweave_core.text.timehints import TimeWindow, find_windows
from beeweave_core.tokens import bounded_query

if TYPE_CHECKING:
    from beeweave_core.index.indexer import Indexer

log = logging.getLogger("beeweave.retrieval")
#: Below this similarity a semantic hit is dropped before fusion: rank fusion only sees
#: positions, so without a floor the nearest of many unrelated events (another session's
#: chatter) still earns a rank and can outrank a real lexical match.  The index's score
#: is a sum of cosines (own text + context, 0..2).  Measured with the offline MiniLM on
#: nine questions over nine unrelated facts in three sessions (each answer worded
#: differently from its question): answers scored 0.61-1.37, unrelated events median
#: 0.02, 90th percentile 0.28, max 0.63 (a neighbour of the answer).  An index reporting
#: one cosine (Neo4j's normalised vectors, the plain recipe) gets half of it.
SEMANTIC_FLOOR = 0.3

#: The metadata path looks at this many of the scope's most recent sessions.
METADATA_SESSIONS = 50

#: Edge types the graph path follows from a seed (NEXT is walked by seq).
GRAPH_EDGES: tuple[EdgeType, ...] = (
    EdgeType.CAUSED_BY,
    EdgeType.REFERS_TO,
    EdgeType.SUMMARIZES,
    EdgeType.DERIVED_FROM,
)


@dataclass(frozen=True)
class Filters:
    """Metadata conditions every returned event must meet.

    ``tags``: the event must carry all of them.  ``since``/``until``: epoch
    seconds or ``datetime``.  ``types``: event types (or their names); none named, the
    types of what was said and done (``SEARCHED_TYPES``: not audit records, checkpoints,
    model-call markers or warnings).
    """

    types: Sequence[EventType | str] | None = None
    since: float | datetime | None = None
    until: float | datetime | None = None
    tags: Sequence[str] | None = None
    user_id: str | None = None
    agent_id: str | None = None

    @classmethod
    def of(cls, value: Filters | Mapping[str, Any] | None) -> Filters:
        if value is None:
            return cls()
        if isinstance(value, Filters):
            return value
        unknown = set(value) - {"types", "type", "since", "until", "tags", "user_id", "agent_id"}
        if unknown:
            raise ValueError(f"unknown filter(s) {sorted(unknown)}")
        data = dict(value)
        if "type" in data:
            t = data.pop("type")
            data["types"] = [t] if isinstance(t, (str, EventType)) else t
        return cls(**data)

    @functools.cached_property  # (asked of every candidate a path returns: built once)
    def type_set(self) -> frozenset[EventType]:
        """The types asked for; none named: what was said and done (``SEARCHED_TYPES``)."""
        if self.types is None:
            return SEARCHED_TYPES
        return frozenset(EventType(t) for t in self.types)

    @staticmethod
    def _ts(v: float | datetime | None) -> float | None:
        if v is None or isinstance(v, (int, float)):
            return v
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        return v.timestamp()

    @functools.cached_property
    def since_ts(self) -> float | None:
        return self._ts(self.since)

    @functools.cached_property
    def until_ts(self) -> float | None:
        return self._ts(self.until)

    @property
    def active(self) -> bool:
        return any(
            v is not None
            for v in (self.types, self.since, self.until, self.tags, self.user_id, self.agent_id)
        )

    def accepts(self, ev: Event) -> bool:
        if ev.type not in self.type_set:
            return False
        if self.since_ts is not None and ev.ts < self.since_ts:
            return False
        if self.until_ts is not None and ev.ts > self.until_ts:
            return False
        if self.user_id is not None and ev.user_id != self.user_id:
            return False
        if self.agent_id is not None and ev.agent_id != self.agent_id:
            return False
        return not (self.tags and not set(self.tags) <= set(ev.tags))


@dataclass(frozen=True)
class Provenance:
    """Where a hit came from: the event, its place in its session, its time, and why."""

    event_id: str
    session_id: str
    seq: int
    ts: float
    type: EventType
    via: tuple[str, ...] = ()  # graph path: the seed hits that led here
    duplicates: tuple[str, ...] = ()  # same text elsewhere, merged into this hit

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.ts, tz=timezone.utc)


@dataclass
class Hit:
    """One recalled event: the event, its fused score, each path's own score and rank."""

    event: Event
    score: float
    paths: dict[str, float]
    ranks: dict[str, int]
    provenance: Provenance

    @property
    def event_id(self) -> str:
        return self.event.id

    def metadata(self) -> dict[str, Any]:
        """The hit's provenance as flat metadata, for framework documents and nodes."""
        ev, prov = self.event, self.provenance
        md: dict[str, Any] = {
            "event_id": ev.id,
            "session_id": ev.session_id,
            "seq": ev.seq,
            "type": ev.type.value,
            "role": ev.role,
            "ts": ev.ts,
            "time": ev.time.isoformat(),
            "score": self.score,
            "source": "beeweave",
        }
        if prov.via:
            md["via"] = list(prov.via)
        if prov.duplicates:
            md["duplicates"] = list(prov.duplicates)
        for key in ("user_id", "agent_id", "tags"):
            if ev.meta.get(key) is not None:
                md[key] = ev.meta[key]
        if isinstance(ev.payload.get("name"), str):
            md["tool"] = ev.payload["name"]
        art = ev.payload.get("$artifact")
        if isinstance(art, Mapping):  # content is a preview; the full text is an artifact
            md["artifact_sha256"] = art.get("sha256")
        if ev.source.get("framework"):
            md["framework"] = str(ev.source["framework"])
        return md

    def __repr__(self) -> str:
        p = ", ".join(f"{k}={v:.3g}" for k, v in self.paths.items())
        return (
            f"Hit({self.event.type.value} {self.event.session_id}#{self.event.seq} "
            f"score={self.score:.4f} [{p}] {self.event.content[:60]!r})"
        )


@dataclass
class _Scope:
    session_id: str | None
    sessions: frozenset[str] | None  # None: the whole tenant
    user_id: str | None = None  # set for a user scope

    def accepts(self, ev: Event) -> bool:
        return self.sessions is None or ev.session_id in self.sessions


@dataclass
class _Call:
    """Everything one retrieve() call works with (kept per call: retrievers are shared)."""

    query: str
    sc: _Scope
    flt: Filters
    cfg: RetrievalConfig
    chosen: frozenset[str]
    now: float
    seen: dict[str, Event] = field(default_factory=dict)


def _shares(ranked: list[tuple[str, float]], cfg: RetrievalConfig) -> list[tuple[str, float]]:
    """What each entry of one path's ranking (best first) adds before weighting."""
    return rrf_shares(ranked, cfg.rrf_k) if cfg.fusion == "rrf" else minmax_shares(ranked)


@functools.lru_cache(maxsize=4096)  # the same texts come back query after query
def _norm_text(text: str) -> str:
    return hashlib.sha1(" ".join(text.lower().split()).encode()).hexdigest()


class RetrieveOptions(TypedDict, total=False):
    """Keyword arguments of :meth:`Retriever.retrieve` (for ``Weave.retrieve``).

    ``retrieve`` also takes any :class:`RetrievalConfig` field as a one-call
    override (``half_life=None``); typed code passes ``config=replace(...)`` instead.
    """

    session_id: str | None
    user_id: str | None
    k: int
    filters: Filters | Mapping[str, object] | None
    paths: Iterable[str] | None
    scope: str | None
    now: float | None
    config: RetrievalConfig | None


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    """Threads that run a semantic search beside the store's searches (shared by all
    retrievers: at most two semantic searches at once, whatever the callers)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="beeweave-recall")
        return _POOL


def _check_query(query: object) -> None:
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")


def _check_call(k: object, session_id: object, user_id: object) -> None:
    """Refuse the arguments that would otherwise fail deep inside, or find nothing silently."""
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"k must be an int (how many hits), got {shown(k)}")
    for name, value in (("session_id", session_id), ("user_id", user_id)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a string or None, got {type(value).__name__}")


#: What the graph path found around one seed: (event, distance, whether it is a session
#: neighbour rather than a cause or effect), by (seed id, causal depth, neighbours either side).
Near = dict[tuple[str, int, int], list[tuple[Event, int, bool]]]


@dataclass
class Rankings:
    """Each path's own ranking for one query, and the events they name.

    The searching half of a retrieve call: :meth:`Retriever.fuse` turns it into hits,
    as often as wanted and with other weights, without searching again (the graph
    path's neighbours are remembered in ``near`` as they are read).
    """

    call: _Call
    ranked: dict[str, list[tuple[str, float]]]
    events: dict[str, Event]
    near: Near = field(default_factory=dict)

    @property
    def query(self) -> str:
        return self.call.query


def _on(c: _Call, name: str) -> bool:
    """Whether path ``name`` runs in this call: chosen, and weighted above zero."""
    return name in c.chosen and c.cfg.weights.get(name, 0) > 0


@dataclass
class _Fusion:
    """The fused score of each event, and each path's own score and rank for it."""

    score: dict[str, float] = field(default_factory=dict)
    paths: dict[str, dict[str, float]] = field(default_factory=dict)
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)
    via: dict[str, list[str]] = field(default_factory=dict)

    def add(self, eid: str, path: str, share: float, raw: float, rank: int) -> None:
        self.score[eid] = self.score.get(eid, 0.0) + share
        self.paths.setdefault(eid, {})[path] = raw
        self.ranks.setdefault(eid, {})[path] = rank


def _fuse(
    c: _Call, ranked: Mapping[str, list[tuple[str, float]]], events: Mapping[str, Event]
) -> _Fusion:
    """Weighted sum of each path's shares over the events that passed the gate."""
    fusion = _Fusion()
    for name, lst in ranked.items():
        kept = [(eid, raw) for eid, raw in lst if eid in events]
        weight = c.cfg.weights.get(name, 0.0)
        for rank, ((eid, raw), (_, share)) in enumerate(
            zip(kept, _shares(kept, c.cfg), strict=True), 1
        ):
            fusion.add(eid, name, weight * share, raw, rank)
    return fusion


def _seeds(fused: Mapping[str, float], cfg: RetrievalConfig) -> list[str]:
    """The best fused hits, where the graph path starts."""
    return sorted(fused, key=lambda e: -fused[e])[: cfg.graph_seeds]


def _decay(ev: Event, c: _Call) -> float:
    """Recency weight: the event's own half-life (a memory's by its kind, see
    :func:`beeweave_core.ranking.half_life`), else ``half_life``, towards ``decay_floor``."""
    return age_weight(ev, c.now, default=c.cfg.half_life, floor=c.cfg.decay_floor)


def _top_hits(
    c: _Call,
    order: list[str],
    final: Mapping[str, float],
    fusion: _Fusion,
    events: Mapping[str, Event],
    k: int,
) -> list[Hit]:
    """The best ``k`` non-empty events, each near-identical text merged into its first hit."""
    hits: list[Hit] = []
    merged: dict[str, list[str]] = {}
    kept_by_text: dict[str, str] = {}
    for eid in order:
        ev = events[eid]
        if not ev.content.strip():
            continue  # an empty marker (a model call) links the graph but answers nothing
        key = _norm_text(ev.content) if c.cfg.dedup else None
        if key is not None and key in kept_by_text:
            merged.setdefault(kept_by_text[key], []).append(eid)
            continue
        if len(hits) >= k:
            continue  # keep scanning: later duplicates still get merged into shown hits
        via = tuple(fusion.via.get(eid, ()))
        prov = Provenance(ev.id, ev.session_id, ev.seq, ev.ts, ev.type, via=via)
        hits.append(Hit(ev, final[eid], fusion.paths.get(eid, {}), fusion.ranks.get(eid, {}), prov))
        if key is not None:
            kept_by_text[key] = eid
    for h in hits:
        if h.event.id in merged:
            h.provenance = replace(h.provenance, duplicates=tuple(merged[h.event.id]))
    return hits


def _author(ev: Event) -> str | None:
    """Who wrote ``ev`` when the capture named them (``meta["name"]``: a chat speaker)."""
    name = ev.meta.get("name")
    return name if isinstance(name, str) and name.strip() else None


def feedback_query(query: str, hits: Sequence[Event], cfg: RetrievalConfig) -> str | None:
    """``query`` and the ``feedback_terms`` words most shared by its first
    ``feedback_seeds`` hits, leaving out the query's own words, stopwords, authors'
    names (a chat speaker is in every turn) and Latin words of two letters or less;
    ``None`` when the hits add no word.  BM25 weighs the words by their rarity."""
    skip = set(tokens(query)) | STOPWORDS
    for ev in hits:
        if (a := _author(ev)) is not None:
            skip.update(tokens(a))
    counts: dict[str, int] = {}
    for ev in hits[: cfg.feedback_seeds]:
        for t in tokens(ev.content):
            if t not in skip and (len(t) > 2 or has_cjk(t)):
                counts[t] = counts.get(t, 0) + 1
    best = sorted(counts, key=lambda t: -counts[t])[: cfg.feedback_terms]
    return f"{query} {' '.join(best)}" if best else None


def _named_author(query: str, candidates: Iterable[Event]) -> str | None:
    """The one author among ``candidates`` whom ``query`` names by every word of their
    name, else ``None`` (no author named, or several: "what do Ana and Li share?")."""
    words = set(tokens(query))
    if not words:
        return None
    authors = {a for ev in candidates if (a := _author(ev)) is not None}
    named = {a for a in authors if (parts := tokens(a)) and set(parts) <= words}
    return named.pop() if len(named) == 1 else None


class Retriever:
    """Fused recall over a weave (its store, and its vector index when there is one)."""

    def __init__(
        self,
        store: SessionReader,
        *,
        indexer: Indexer | None = None,
        config: RetrievalConfig | None = None,
    ) -> None:
        self.store = store
        #: Semantic search; ``None`` (no vector index) leaves the other paths.
        self.indexer = indexer
        self.config = config or RetrievalConfig()

    # ---------------------------------------------------------------- API
    @traced("retrieve")
    def retrieve(
        self,
        query: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
        paths: Iterable[str] | None = None,
        scope: str | None = None,
        now: float | None = None,
        config: RetrievalConfig | None = None,
        **overrides: Any,
    ) -> list[Hit]:
        """The ``k`` best events for ``query``.

        Scope: ``session_id`` alone searches that session; ``user_id`` searches
        every session of that user (plus ``session_id``'s, which also feeds the
        ``recent`` path); neither searches the tenant.  ``scope`` ("session",
        "user", "tenant") overrides the inference.  ``paths`` picks paths (default:
        all that apply).  ``now`` is the reference time for decay and for dates
        without a year.  Keyword ``overrides`` replace :class:`RetrievalConfig`
        fields for this call (e.g. ``half_life=None``).  Only the query's first
        :data:`~beeweave_core.tokens.MAX_QUERY_TOKENS` tokens are searched for.
        """
        _check_query(query)
        _check_call(k, session_id, user_id)
        if k <= 0:
            return []
        query = bounded_query(query)
        return self.fuse(
            self._rankings(
                query, session_id, user_id, filters, paths, scope, now, config, overrides
            ),
            k,
        )

    def rankings(
        self,
        query: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        filters: Filters | Mapping[str, Any] | None = None,
        paths: Iterable[str] | None = None,
        scope: str | None = None,
        now: float | None = None,
        config: RetrievalConfig | None = None,
        **overrides: Any,
    ) -> Rankings:
        """Each path's own ranking for ``query`` (the searching half of :meth:`retrieve`).

        :meth:`fuse` turns it into hits, as often as wanted and with other fusion
        settings, without searching again: what choosing weights by cross-validation
        needs.  Arguments as :meth:`retrieve`.
        """
        _check_query(query)
        return self._rankings(
            bounded_query(query), session_id, user_id, filters, paths, scope, now, config, overrides
        )

    def _rankings(
        self,
        query: str,
        session_id: str | None,
        user_id: str | None,
        filters: Filters | Mapping[str, Any] | None,
        paths: Iterable[str] | None,
        scope: str | None,
        now: float | None,
        config: RetrievalConfig | None,
        overrides: Mapping[str, Any],
    ) -> Rankings:
        _check_query(query)
        cfg = config or self.config
        if overrides:
            unknown = set(overrides) - set(RetrievalConfig.__dataclass_fields__)
            if unknown:
                raise TypeError(f"unknown retrieval option(s) {sorted(unknown)}")
            cfg = replace(cfg, **overrides)
        chosen = set(PATHS if paths is None else paths)
        bad = chosen - set(PATHS)
        if bad:
            raise ValueError(f"unknown path(s) {sorted(bad)}; known: {', '.join(PATHS)}")
        call = _Call(
            query=query,
            sc=self._scope(session_id, user_id, scope),
            flt=Filters.of(filters),
            cfg=cfg,
            chosen=frozenset(chosen),
            now=time.time() if now is None else now,
        )
        near: Near = {}
        ranked = self._rank_paths(call, near)
        events = self._hydrate(call, {eid for lst in ranked.values() for eid, _ in lst})
        return Rankings(call, ranked, events, near)

    def fuse(
        self, rankings: Rankings, k: int = 10, config: RetrievalConfig | None = None
    ) -> list[Hit]:
        """The ``k`` best hits of ``rankings`` fused with ``config`` (default: theirs).

        Fusion settings (weights, ``rrf_k``, graph, decay, type weights) apply here;
        search settings (``candidates``, ``time_margin``) were used by :meth:`rankings`.
        """
        if k <= 0:
            return []
        c = rankings.call if config is None else replace(rankings.call, cfg=config)
        events = dict(rankings.events)
        fusion = _fuse(c, rankings.ranked, events)
        if _on(c, "graph") and fusion.score:
            self._add_graph(c, fusion, events, rankings.near)
        final = {
            eid: s * c.cfg.type_weights.get(events[eid].type, 1.0) * _decay(events[eid], c)
            for eid, s in fusion.score.items()
        }
        named = _named_author(c.query, [events[e] for e in final]) if c.cfg.author_boost else None
        if named is not None:
            for eid in final:
                if _author(events[eid]) == named:
                    final[eid] *= 1.0 + c.cfg.author_boost
        order = sorted(final, key=lambda e: (-final[e], -events[e].ts))
        return _top_hits(c, order, final, fusion, events, k)

    async def aretrieve(self, query: str, **kw: Any) -> list[Hit]:
        """Async twin of :meth:`retrieve` (runs in a worker thread)."""
        return await asyncio.to_thread(self.retrieve, query, **kw)

    # ------------------------------------------------------------- scope
    def _scope(self, session_id: str | None, user_id: str | None, scope: str | None) -> _Scope:
        if scope is None:
            scope = "user" if user_id else ("session" if session_id else "tenant")
        if scope == "session":
            if not session_id:
                raise ValueError("scope='session' needs session_id")
            return _Scope(session_id, frozenset({session_id}))
        if scope == "user":
            if not user_id:
                raise ValueError("scope='user' needs user_id")
            sessions = set(self.store.user_session_ids(user_id))
            if session_id:
                sessions.add(session_id)
            return _Scope(session_id, frozenset(sessions), user_id)
        if scope == "tenant":
            return _Scope(session_id, None)
        raise ValueError(f"scope must be 'session', 'user' or 'tenant', got {scope!r}")

    # -------------------------------------------------------------- paths
    @staticmethod
    def _span(c: _Call, window: TimeWindow | None) -> tuple[float | None, float | None]:
        since, until = c.flt.since_ts, c.flt.until_ts
        if window is not None:
            since = window.start if since is None else max(since, window.start)
            until = window.end if until is None else min(until, window.end)
        return since, until

    def _semantic(self, c: _Call, window: TimeWindow | None = None) -> list[tuple[str, float]]:
        indexer = self.indexer
        if indexer is None or not c.query.strip():
            return []
        since, until = self._span(c, window)
        flt = c.flt
        where = IndexFilter(
            session_ids=sorted(c.sc.sessions) if c.sc.sessions is not None else None,
            agent_id=flt.agent_id,
            user_id=flt.user_id,
            types=sorted(flt.type_set, key=lambda t: t.value),
            since=since,
            until=until,
            scopes=self.store.scopes,
        )
        try:
            hits = indexer.query(c.query, k=c.cfg.candidates, filters=where)
        except Exception as exc:  # recall degrades to the other paths, it does not fail
            log.warning("beeweave: semantic path unavailable: %s: %s", type(exc).__name__, exc)
            return []
        floor = SEMANTIC_FLOOR * indexer.score_scale / 2.0  # the floor is on the 0..2 scale
        return [(eid, sim) for eid, sim in hits if sim >= floor]

    def _lexical(self, c: _Call, window: TimeWindow | None = None) -> list[tuple[str, float]]:
        search = self.store.search_text
        if not c.query.strip():
            return []
        since, until = self._span(c, window)
        sc = c.sc
        # push the scope down: one session, the sessions of one user, or the tenant
        if sc.sessions is None:
            targets: list[dict[str, Any]] = [{}]
        elif sc.user_id is None:
            targets = [{"session_id": sid} for sid in sorted(sc.sessions)]
        else:
            targets = [{"user_id": sc.user_id}]
            if sc.session_id:
                targets.append({"session_id": sc.session_id})
        found: dict[str, tuple[Event, float]] = {}
        for where in targets:
            for ev, score in search(
                c.query,
                k=c.cfg.candidates,
                types=c.flt.type_set,
                since=since,
                until=until,
                **where,
            ):
                if sc.accepts(ev) and score > found.get(ev.id, (ev, float("-inf")))[1]:
                    found[ev.id] = (ev, score)
        c.seen.update((eid, ev) for eid, (ev, _) in found.items())
        ranked = sorted(found.values(), key=lambda p: -p[1])[: c.cfg.candidates]
        return [(ev.id, s) for ev, s in ranked]

    def _recent(self, c: _Call) -> list[tuple[str, float]]:
        n = c.cfg.recent_n
        if not c.sc.session_id or n <= 0:
            return []
        events = self.store.timeline(c.sc.session_id, last=n * 2, types=c.flt.type_set)
        events = [e for e in events if c.flt.accepts(e)][-n:]
        c.seen.update((e.id, e) for e in events)
        return [(e.id, float(e.seq)) for e in reversed(events)]

    def _metadata(self, c: _Call) -> list[tuple[str, float]]:
        flt = c.flt
        if not flt.active:
            return []
        if c.sc.sessions is not None:  # ask for the sessions in scope, not the tenant's
            order = self._newest_first(c.sc.sessions)
        elif flt.user_id is None:  # the newest sessions only, not the whole tenant's stats
            order = self.store.recent_session_ids(METADATA_SESSIONS)
        else:
            stats = self.store.sessions(user_id=flt.user_id, include_items=True)
            order = [s.session_id for s in stats]
        found: list[Event] = []
        for sid in order[:METADATA_SESSIONS]:  # most recent sessions first
            evs = self.store.timeline(
                sid,
                since=flt.since_ts,
                until=flt.until_ts,
                types=flt.type_set,
                last=c.cfg.candidates,
            )
            found += [e for e in evs if flt.accepts(e)]
        found.sort(key=lambda e: -e.ts)
        found = found[: c.cfg.candidates]
        c.seen.update((e.id, e) for e in found)
        return [(e.id, e.ts) for e in found]

    def _newest_first(self, sessions: frozenset[str]) -> list[str]:
        """The sessions with their newest active event first, when only the newest
        :data:`METADATA_SESSIONS` are read (one index seek each: a session's stats
        would read all of it); in any order when all of them are."""
        if len(sessions) <= METADATA_SESSIONS:
            return sorted(sessions)
        newest = {sid: tl[-1].ts for sid in sessions if (tl := self.store.timeline(sid, last=1))}
        return sorted(newest, key=lambda sid: -newest[sid])

    def _feedback(self, c: _Call, first: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """A second lexical round, asked with the query and the words of the first
        round's best hits (pseudo-relevance feedback): a list question ("what has Ana
        painted?") is answered across turns the question's words reach only in part,
        and its best hits name what the others share ("sunset", "canvas").  Seeded
        from the lexical round, which is done while the semantic search still runs."""
        hits = [ev for e, _ in first if (ev := c.seen.get(e)) is not None and c.flt.accepts(ev)]
        query = feedback_query(c.query, hits, c.cfg)
        return self._lexical(replace(c, query=query)) if query else []

    def _temporal(self, c: _Call) -> list[tuple[str, float]]:
        """Semantic + lexical again, inside each date the query names (a soft preference)."""
        windows = find_windows(c.query, now=c.now)
        if not windows:
            return []
        scores: dict[str, float] = {}
        for win in windows:
            win = win.widened(0.0, c.cfg.time_margin * DAY)
            for fn in (self._semantic, self._lexical):
                for eid, share in _shares(fn(c, win), c.cfg):
                    scores[eid] = scores.get(eid, 0.0) + share
        return sorted(scores.items(), key=lambda p: -p[1])

    # ------------------------------------------------------------- fusion
    def _rank_paths(self, c: _Call, near: Near) -> dict[str, list[tuple[str, float]]]:
        """Each chosen path's own ranking (best first) of event ids.

        The semantic path (embedding the query, then the vector index) runs in a worker
        thread while the store answers the others: both release the GIL, so the two
        slowest paths overlap; what is left of the wait reads the graph around the
        likely seeds (into ``near``).  The temporal path runs last: it reuses the query
        vector.
        """
        semantic = None
        if self.indexer is not None and (_on(c, "semantic") or _on(c, "temporal")):
            self.indexer.sync(c.cfg.index_wait, derived=False)  # read your writes, within reason
            if _on(c, "semantic"):
                semantic = _workers().submit(self._semantic, c)
        runs = {"recent": self._recent, "lexical": self._lexical, "metadata": self._metadata}
        out = {name: run(c) for name, run in runs.items() if _on(c, name)}
        if _on(c, "feedback") and out.get("lexical"):  # while the semantic search runs
            out["feedback"] = self._feedback(c, out["lexical"])
        if semantic is not None and _on(c, "graph"):
            self._read_ahead(c, out, semantic, near)
        if _on(c, "semantic"):
            out["semantic"] = semantic.result() if semantic is not None else []
        if _on(c, "temporal"):
            out["temporal"] = self._temporal(c)
        return out

    def _read_ahead(
        self,
        c: _Call,
        ranked: Mapping[str, list[tuple[str, float]]],
        running: Future[list[tuple[str, float]]],
        near: Near,
    ) -> None:
        """While the semantic search runs: the graph around the events the paths done so
        far fuse best (most of the seeds the graph path will start from), so the wait
        for the query's embedding does the graph path's reads.  Stops when the search
        is done: what it did not read, the graph path reads."""
        found = {e: ev for e, ev in c.seen.items() if ev.status == Status.ACTIVE}
        for seed in _seeds(_fuse(c, ranked, found).score, c.cfg):
            if running.done():
                return
            self._near(found[seed], c.cfg, near)

    def _add_graph(self, c: _Call, fusion: _Fusion, events: dict[str, Event], near: Near) -> None:
        """The graph path: neighbours of the best fused hits, ranked by what they inherit."""
        graph = self._graph(c, fusion.score, events, near)
        order = sorted(graph.items(), key=lambda p: -p[1][0])
        weight = c.cfg.weights["graph"]
        for rank, (eid, (score, seeds)) in enumerate(order, 1):
            fusion.add(eid, "graph", weight * score, score, rank)
            fusion.via[eid] = seeds

    def _hydrate(self, c: _Call, ids: set[str]) -> dict[str, Event]:
        """Active events by id, in scope and passing the filters (the one gate for all paths)."""
        missing = [i for i in ids if i not in c.seen]
        got = self._fetch(missing) if missing else {}
        out: dict[str, Event] = {}
        gone: list[str] = []
        for i in ids:
            ev = c.seen.get(i) or got.get(i)
            if ev is None:
                gone.append(i)
                continue
            if ev.status != Status.ACTIVE or not c.sc.accepts(ev) or not c.flt.accepts(ev):
                continue
            out[i] = ev
        if gone and self.indexer is not None:
            self.indexer.forget(gone)  # vectors of purged/deleted events: drop them lazily
        return out

    def _fetch(self, ids: list[str]) -> dict[str, Event]:
        """Events by id; one a vector index placed in a scope it is not in is left out
        (an internal read: the store refuses it, recall just does not offer it).  The
        refused ids are found by halving, so a few of them cost a few reads, not one
        read per candidate."""
        try:
            return {e.id: e for e in self.store.get(ids)}
        except PermissionError:
            if len(ids) <= 1:
                return {}
            half = len(ids) // 2
            return {**self._fetch(ids[:half]), **self._fetch(ids[half:])}

    def _graph(
        self, c: _Call, fused: dict[str, float], events: dict[str, Event], near: Near
    ) -> dict[str, tuple[float, list[str]]]:
        """Events linked to the best seeds, each scored by the seed's score × hop decay."""
        cfg = c.cfg
        reached: dict[str, tuple[float, list[str]]] = {}
        seeds = _seeds(fused, cfg)
        self._read_near([events[s] for s in seeds], cfg, near)
        for seed in seeds:
            for ev, dist, beside in self._near(events[seed], cfg, near):
                if ev.id == seed or ev.status != Status.ACTIVE:
                    continue
                if not c.sc.accepts(ev) or not c.flt.accepts(ev):
                    continue
                events.setdefault(ev.id, ev)
                decay = cfg.neighbour_decay if beside else cfg.hop_decay
                score = fused[seed] * decay ** (dist - 1)
                old = reached.get(ev.id)
                if old is None or score > old[0]:
                    reached[ev.id] = (score, [seed] + (old[1] if old else []))
                elif seed not in old[1]:
                    old[1].append(seed)
        return reached

    def _near(self, seed: Event, cfg: RetrievalConfig, near: Near) -> list[tuple[Event, int, bool]]:
        """What the graph path reaches from ``seed``, read once per call (``near``)."""
        self._read_near([seed], cfg, near)
        return near[(seed.id, cfg.graph_depth, cfg.neighbours)]

    def _read_near(self, seeds: Sequence[Event], cfg: RetrievalConfig, near: Near) -> None:
        """Read around the ``seeds`` not read yet this call, all in one store read."""
        todo = [s for s in seeds if (s.id, cfg.graph_depth, cfg.neighbours) not in near]
        if not todo:
            return
        found = self.store.around(
            todo, depth=cfg.graph_depth, neighbours=cfg.neighbours, edge_types=GRAPH_EDGES
        )
        for s in todo:
            near[(s.id, cfg.graph_depth, cfg.neighbours)] = found.get(s.id, [])


__all__ = [
    "DEFAULT_TYPE_WEIGHTS",
    "PATHS",
    "Filters",
    "Hit",
    "Provenance",
    "Rankings",
    "RetrievalConfig",
    "RetrieveOptions",
    "Retriever",
]
