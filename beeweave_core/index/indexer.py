"""Graph first, vectors after: keeping the vector index in step with the event graph.

The store write is the commit.  Vectors follow on a background thread: the bus
hands every stored batch to :meth:`Indexer.on_stored` (a bus listener, so capture
never waits for an embedding model), and a *gap check* repairs whatever a crash,
a closed process or a failing embedding service left behind.  The gap check keeps,
per session, the seq up to which the index has been verified (saved in the index
itself), so on open it only looks at what was stored since.

Embedding identity: vectors of another model or version are never queried.  When
the configured embeddings differ from those the tenant's vectors were built with,
the indexer says so (a warning, :meth:`Indexer.status`, :meth:`Indexer.check`)
instead of silently re-embedding everything (which, with a hosted model, costs
money): ``beeweave reindex`` re-embeds, resumably, with a progress bar.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from beeweave_core.config import IndexConfig
from beeweave_core.events import Event, Status
from beeweave_core.extras import install_hint
from beeweave_core.index import IndexFilter, IndexState, VectorIndex, open_index, query_vectors
from beeweave_core.index.base import (
    Chunk,
    Embedder,
    EmbeddingIdentity,
    EmbeddingMismatch,
    IndexBusy,
    VectorHome,
)
from beeweave_core.index.chunking import (
    ChunkPolicy,
    chunk_events,
    embed_chunks,
    embed_query,
    event_text,
    recipe_key,
)
from beeweave_core.store import SessionReader

log = logging.getLogger("beeweave.indexer")

Progress = Callable[[int, int], None]
#: How far back (in seq) to look for the text an event answers (past empty markers).
CONTEXT_LOOKBACK = 8


@dataclass
class ReindexResult:
    sessions: int = 0
    scanned: int = 0
    embedded_events: int = 0
    chunks: int = 0
    dropped_identities: int = 0
    pruned: int = 0
    seconds: float = 0.0


class Indexer:
    """Embeds stored events into a :class:`VectorIndex`, in the background.

    Args:
        store: the event store (the source of truth).
        index: the vector index, or a zero-argument factory that opens it
            (called lazily on the indexer thread, so opening a weave stays fast).
        embeddings: any LangChain ``Embeddings``.
        policy: what is embedded and how big texts are chunked.
        batch_size: events per embedding batch (one model call over all their texts,
            length-bucketed, and one vector-store write).
        backfill_on_open: run the gap check when the indexer starts.
    """

    def __init__(
        self,
        store: SessionReader,
        index: VectorIndex | Callable[[], VectorIndex],
        embeddings: Embedder,
        *,
        policy: ChunkPolicy | None = None,
        batch_size: int = 256,
        backfill_on_open: bool = True,
        retry_interval: float = 30.0,
    ) -> None:
        self.store = store
        self.embeddings = embeddings
        self.policy = policy or ChunkPolicy()
        self.identity = EmbeddingIdentity.of(embeddings, recipe_key(self.policy.recipe))
        self.batch_size = max(1, batch_size)
        self.retry_interval = retry_interval
        self._index: VectorIndex | None = None
        self._factory = index if callable(index) and not isinstance(index, VectorIndex) else None
        if self._factory is None:
            self._index = index  # type: ignore[assignment]
        self._index_lock = threading.Lock()
        self._gap_lock = threading.Lock()
        self._cancel_gap = threading.Event()
        self._queue: deque[Any] = deque()
        self._cond = threading.Condition()
        self._submitted = 0
        self._done = 0
        #: the job ``sync`` waits for: the last one holding more than maintenance's notes
        self._awaited = 0
        self._closing = False
        self._dirty_since: float | None = None
        self.stale: dict[EmbeddingIdentity, int] = {}
        self.needs_reindex = False
        self.errors = 0
        self.last_error: str | None = None
        self._backfill = backfill_on_open
        if backfill_on_open:
            self._submitted = self._awaited = 1  # the gap check on open: sync() waits for it
        self._thread = threading.Thread(target=self._run, name="beeweave-indexer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ the index
    @property
    def index(self) -> VectorIndex:
        """The vector index (opened on first use)."""
        if self._index is None:
            with self._index_lock:
                if self._index is None:
                    assert self._factory is not None
                    self._index = self._factory()
                    self._inspect_identities()
        return self._index

    def _inspect_identities(self) -> None:
        idx = self._index
        assert idx is not None
        self.stale = idx.other_identities()
        if self.stale and not idx.load_state().sessions:
            self.needs_reindex = True
            old = ", ".join(f"{i} ({n} vectors)" for i, n in self.stale.items())
            log.warning(
                "beeweave: embedding model changed: the vector index of tenant %r was built "
                "with %s, the configured embeddings are %s. Semantic recall only sees events "
                "embedded with the new model until you run `beeweave reindex`.",
                idx.tenant,
                old,
                self.identity,
            )

    def check(self) -> None:
        """Raise :class:`EmbeddingMismatch` while the index needs a reindex."""
        _ = self.index
        if self.needs_reindex:
            old = ", ".join(str(i) for i in self.stale)
            raise EmbeddingMismatch(
                f"vectors were built with {old}; the embeddings now are {self.identity}: "
                "run `beeweave reindex`"
            )

    # ------------------------------------------------------- listener side
    def on_stored(self, events: list[Event]) -> None:
        """Bus listener: queue a stored batch for embedding (cheap, never blocks).  A
        batch with nothing to embed (an assembly's audit record) queues nothing, so a
        search after it does not wait for the worker (the lexical path syncs its own
        text index)."""
        wanted = [e for e in events if self.policy.wants(e)] if not self._closing else []
        if not wanted:
            return
        with self._cond:
            self._queue.append(("index", [e.id for e in wanted]))
            self._submitted += 1
            if not all(_derived(e) for e in wanted):
                self._awaited = self._submitted
            self._cond.notify_all()

    def forget(self, event_ids: Sequence[str]) -> None:
        """Queue removal of vectors (events found deleted, invalidated or purged)."""
        if self._closing or not event_ids:
            return
        with self._cond:
            self._queue.append(("delete", list(event_ids)))
            self._submitted += 1  # not awaited by a search: it drops what the store lost
            self._cond.notify_all()

    def sync(self, timeout: float = 30.0, *, derived: bool = True) -> bool:
        """Wait until everything queued so far is embedded (True) or ``timeout`` passed.

        ``derived=False`` (a search reading its caller's writes): what maintenance
        derived in the background (memories, summaries) and vector removals are not
        waited for unless something else was queued after them — a read waits for the
        caller's writes, not for a catch-up it did not ask for (and a search hydrates
        from the store, which drops what was invalidated or purged)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._submitted if derived else self._awaited
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    @property
    def pending(self) -> int:
        return self._submitted - self._done

    # --------------------------------------------------------- worker side
    def _run(self) -> None:
        if self._backfill:
            try:
                _ = self.index
                if not self.needs_reindex:
                    self.gap_check()
                elif getattr(self.embeddings, "offline", False):
                    # an in-process model costs only CPU: re-embed now (the old
                    # identity's vectors are dropped once every event has a new one)
                    log.warning(
                        "beeweave: re-embedding tenant %r with %s", self.index.tenant, self.identity
                    )
                    self.reindex()
            except Exception as exc:
                self._failed(exc)
            finally:
                with self._cond:
                    self._done += 1
                    self._cond.notify_all()
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait(self._retry_wait())
                    if self._should_retry():
                        break
                if self._closing:
                    return
                jobs = list(self._queue)
                self._queue.clear()
            if not jobs and self._should_retry():
                self._retry()
                continue
            self._process(jobs)

    def _retry_wait(self) -> float | None:
        if self._dirty_since is None:
            return None
        return max(0.05, self._dirty_since + self.retry_interval - time.monotonic())

    def _should_retry(self) -> bool:
        return (
            self._dirty_since is not None
            and time.monotonic() >= self._dirty_since + self.retry_interval
        )

    def _retry(self) -> None:
        self._dirty_since = None
        try:
            self.gap_check()
        except Exception as exc:
            self._failed(exc)

    def _process(self, jobs: list[tuple[str, list[str]]]) -> None:
        to_index: list[str] = []
        to_delete: list[str] = []
        for kind, ids in jobs:
            (to_index if kind == "index" else to_delete).extend(ids)
        try:
            self._sync_text()
            if to_delete:
                self.index.delete(to_delete)
            for i in range(0, len(to_index), self.batch_size):
                if self._closing:
                    break
                events = self.store.get(to_index[i : i + self.batch_size])
                self._embed(events, only_missing=True)  # the gap check may have been first
        except Exception as exc:
            self._failed(exc)
        finally:
            with self._cond:
                self._done += len(jobs)
                self._cond.notify_all()

    def _sync_text(self) -> None:
        """Keep the store's full-text index current too (SQLite builds it off the write path)."""
        self.store.sync_text_index()

    def _failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, IndexBusy):  # not a failure: another process embeds for now
            if self._dirty_since is None:
                log.info("beeweave: %s; retry in %.0f s", exc, self.retry_interval)
        elif self._dirty_since is None:
            log.warning(
                "beeweave: vector indexing failed (%s); the events are stored and will be "
                "indexed by the gap check (retry in %.0f s, or `beeweave reindex`)",
                self.last_error,
                self.retry_interval,
            )
        self._dirty_since = time.monotonic()

    def _embed(self, events: Sequence[Event], *, only_missing: bool = False) -> tuple[int, int]:
        """Chunk, embed and upsert ``events``; returns (events embedded, chunks)."""
        events = [e for e in events if e.status == Status.ACTIVE]
        if only_missing and events:
            have = self.index.ids([e.id for e in events])
            events = [e for e in events if e.id not in have]
        chunks = chunk_events(events, self.policy, load_artifact=self.store.get_artifact)
        if not chunks:
            return 0, 0
        if self.policy.recipe == "context":
            chunks = self._with_context(chunks)
        vectors = embed_chunks(self.embeddings, chunks, self.policy.recipe)
        self.index.upsert(chunks, vectors)
        return len({c.event_id for c in chunks}), len(chunks)

    def _with_context(self, chunks: list[Chunk]) -> list[Chunk]:
        """Fill each chunk's context: the latest earlier event with text in its session."""
        by_session: dict[str, list[int]] = {}
        for c in chunks:
            by_session.setdefault(c.session_id, []).append(c.seq)
        before: dict[tuple[str, int], str] = {}
        for sid, seqs in by_session.items():
            lo, hi = min(seqs), max(seqs)
            if lo <= 0 and hi <= 0:
                continue
            timeline = self.store.timeline(sid, seq_from=max(0, lo - CONTEXT_LOOKBACK), seq_to=hi)
            last = ""
            for ev in timeline:
                before[(sid, ev.seq)] = last
                if ev.content.strip():  # as the previous event's own vector was made
                    last = event_text(ev)[: self.policy.max_chars]
        # only a text's first chunk is read with what came before it
        return [
            replace(c, context=before.get((c.session_id, c.seq), "")) if c.part == 0 else c
            for c in chunks
        ]

    # ------------------------------------------------------------ repairs
    def gap_check(
        self, *, progress: Progress | None = None, result: ReindexResult | None = None
    ) -> ReindexResult:
        """Index every stored event the index does not have yet (resumable).

        Walks each session from the seq up to which it was last verified, gathering
        events across sessions into batches of ``batch_size`` (conversations are many
        short sessions: one model call per session would pad and pay per call); the
        watermarks are saved after every batch, so an interrupted run resumes.
        """
        result = result or ReindexResult()
        t0 = time.perf_counter()
        with self._gap_lock:
            self._cancel_gap.clear()
            state = self.index.load_state()
            todo = []
            for s in self.store.sessions(include_items=True):
                mark = state.sessions.get(s.session_id, -1)
                if s.last_seq > mark:
                    todo.append((s.session_id, mark, s.last_seq))
            total = sum(last - mark for _, mark, last in todo)
            if progress:
                progress(0, total)
            walk = _GapBatch(state)
            done = 0
            for sid, mark, last in todo:
                result.sessions += 1
                seq = mark
                while seq < last:
                    if self._gap_cancelled():
                        result.seconds += time.perf_counter() - t0
                        return result  # what was gathered is found again next time
                    step = min(last, seq + self.batch_size)
                    batch = self.store.timeline(sid, seq_from=seq + 1, seq_to=step)
                    walk.add(sid, step, [e for e in batch if self.policy.wants(e)])
                    result.scanned += len(batch)
                    done += step - seq
                    seq = step
                    if len(walk.events) >= self.batch_size:
                        self._flush_gap(walk, result)
                        if progress:
                            progress(done, total)
            self._flush_gap(walk, result)
            if progress:
                progress(done, total)
        result.seconds += time.perf_counter() - t0
        return result

    def _gap_cancelled(self) -> bool:
        on_worker = threading.current_thread() is self._thread
        return (self._cancel_gap.is_set() and on_worker) or self._closing

    def _flush_gap(self, walk: _GapBatch, result: ReindexResult) -> None:
        """Embed what the gap check gathered, then move the sessions' watermarks."""
        if not walk.marks:
            return
        n_ev, n_chunks = self._embed(walk.events, only_missing=True)
        result.embedded_events += n_ev
        result.chunks += n_chunks
        walk.state.sessions.update(walk.marks)
        self.index.save_state(walk.state)
        walk.events, walk.marks = [], {}

    def reindex(
        self,
        *,
        full: bool = False,
        drop_stale: bool = True,
        prune: bool = False,
        progress: Progress | None = None,
    ) -> ReindexResult:
        """Bring the index fully up to date with the store.

        ``full`` throws this identity's vectors away first (re-embed everything);
        otherwise the run continues where the last one stopped.  Once complete,
        vectors of other identities are dropped (``drop_stale``), and ``prune``
        removes vectors of events that were deleted, invalidated or purged.
        """
        self._cancel_gap.set()  # a background gap check yields to an explicit reindex
        result = ReindexResult()
        if full:
            with self._gap_lock:
                self.index.reset()
        self.gap_check(progress=progress, result=result)
        if prune:
            result.pruned = self.prune()
        if drop_stale:
            for ident in list(self.index.other_identities()):
                self.index.drop_identity(ident)
                result.dropped_identities += 1
        self.stale = self.index.other_identities()
        self.needs_reindex = False
        return result

    def prune(self) -> int:
        """Delete vectors whose events are no longer active (or no longer exist)."""
        indexed = list(self.index.ids())
        gone: list[str] = []
        for i in range(0, len(indexed), 500):
            part = indexed[i : i + 500]
            alive = {e.id for e in self.store.get(part)}
            gone.extend(x for x in part if x not in alive)
        return self.index.delete(gone) if gone else 0

    # -------------------------------------------------------------- query
    @property
    def score_scale(self) -> float:
        """The highest similarity ``query`` reports: the context recipe's two summed cosines
        reach 2, unless the index stores the summed vector normalised (one cosine, 1)."""
        try:
            index = self.index
        except IndexBusy:
            return 2.0 if self.policy.recipe != "plain" else 1.0
        one_cosine = self.policy.recipe == "plain" or getattr(index, "normalised_scores", False)
        return 1.0 if one_cosine else 2.0

    def prepare(self, text: str) -> None:
        """Start embedding a query that :meth:`query` will be asked soon (an assembly
        knows its query before it reads the session; the vector is ready by then)."""
        try:
            query_vectors.start(self.embeddings, text)
        except TypeError:  # an unhashable embedder: no cache, nothing to prepare
            return

    def query(
        self, text: str, *, k: int, filters: IndexFilter | None = None
    ) -> list[tuple[str, float]]:
        """Semantic search over this identity's vectors only (none while another
        process holds the embedded index: words, graph and recency still recall)."""
        try:
            index = self.index
        except IndexBusy:
            return []
        try:
            vector = list(query_vectors.vector(self.embeddings, text))
        except TypeError:  # an unhashable embedder: no cache
            vector = embed_query(self.embeddings, text)
        return index.query(vector, k=k, filters=filters)

    def status(self) -> dict[str, Any]:
        """What the indexer knows; ``busy`` (and no ``chunks``) while another process
        holds the embedded index: a status call never fails on it."""
        try:
            idx: VectorIndex | None = self.index
        except IndexBusy as exc:
            idx, busy = None, str(exc)
        else:
            busy = ""
        return {
            "index": repr(idx) if idx is not None else "held by another process",
            "busy": busy,
            "identity": str(self.identity),
            "chunks": idx.count() if idx is not None else None,
            "pending_batches": self.pending,
            "stale_identities": {str(k): v for k, v in self.stale.items()},
            "needs_reindex": self.needs_reindex,
            "errors": self.errors,
            "last_error": self.last_error,
        }

    def close(self) -> None:
        """Stop after the batch in hand; what is left is found by the next gap check."""
        self._closing = True
        self._cancel_gap.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=30.0)
        if self._index is not None:
            self._index.close()


@dataclass
class _GapBatch:
    """Events the gap check gathered (across sessions) and the marks they move."""

    state: IndexState
    events: list[Event] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)

    def add(self, session_id: str, upto: int, events: list[Event]) -> None:
        self.events.extend(events)
        self.marks[session_id] = upto


# ----------------------------------------------------------- weave wiring
def build_indexer(backend: VectorHome, *, config: IndexConfig) -> Indexer | None:
    """The :class:`Indexer` ``config`` asks for over ``backend``'s events (``None``: none).

    No index either when a package the chosen index or the default embeddings need is
    missing: recall then runs on words, graph and recency.  The caller subscribes
    :meth:`Indexer.on_stored` to its capture bus and closes the indexer with the weave.
    """
    if not config.enabled:
        return None
    kind = config.kind
    missing = _missing_packages(backend, kind, config)
    if missing:
        log.info(
            "beeweave: semantic recall is off (not installed: %s; %s); words, graph "
            "and recency still recall",
            ", ".join(missing),
            install_hint(["chroma"]),
        )
        return None
    embeddings = config.embeddings
    if embeddings is None:
        from beeweave_core.embeddings import default_embeddings

        embeddings = default_embeddings()
    policy = config.policy or ChunkPolicy()
    identity = EmbeddingIdentity.of(embeddings, recipe_key(policy.recipe))

    def factory() -> VectorIndex:
        return open_index(
            backend,
            embeddings=embeddings,
            identity=identity,
            kind=kind,
            vector_url=config.vector_url,
        )

    return Indexer(
        backend.events,
        factory,
        embeddings,
        policy=policy,
        batch_size=config.batch_size,
        backfill_on_open=config.backfill,
        retry_interval=config.retry_interval,
    )


def _missing_packages(
    backend: VectorHome, kind: str | VectorIndex | None, config: IndexConfig
) -> list[str]:
    """Packages the chosen index / default embeddings need that are not installed."""
    from importlib.util import find_spec

    need: list[str] = []
    if kind is None or isinstance(kind, str):  # a ready VectorIndex needs nothing more
        need += backend.required_packages(kind=kind or "auto", vector_url=config.vector_url)
    if config.embeddings is None:
        from beeweave_core.embeddings import MODEL_CHOICES, chosen_model

        need += MODEL_CHOICES[chosen_model()]
    return [n for n in need if find_spec(n) is None]


#: Writers whose events maintenance derives in the background (``sync`` does not wait).
_DERIVED_BY = frozenset({"memory", "compactor"})


def _derived(ev: Event) -> bool:
    return ev.source.get("framework") == "beeweave" and ev.source.get("component") in _DERIVED_BY


__all__ = ["Indexer", "IndexState", "ReindexResult", "build_indexer"]
