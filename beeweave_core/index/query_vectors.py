"""Query vectors: each computed once, and early when the caller knows the query early.

Embedding a query is the slowest step of a recall (a few milliseconds of ONNX on a
small CPU, more than the store's searches).  An assembly knows its query before it
reads the session, so it starts the embedding then (:func:`start`, in a worker thread:
the model releases the GIL) and its semantic search picks the vector up when it gets
there (:func:`vector`), waiting for the running computation instead of doing it again.
The newest :data:`QUERY_CACHE` vectors are remembered: one recall asks for its query's
vector up to twice (the semantic and the temporal path), and agents repeat queries.
Keyed by the embedder object, so another model never answers from this cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from concurrent.futures import Future, ThreadPoolExecutor

from beeweave_core.index.chunking import embed_query

#: Query vectors remembered (about 1.5 KB each with MiniLM's 384 dimensions).
QUERY_CACHE = 512

Vector = tuple[float, ...]
_done: OrderedDict[tuple[Hashable, str], Vector] = OrderedDict()
_running: dict[tuple[Hashable, str], Future[Vector]] = {}
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def vector(embeddings: Hashable, text: str) -> Vector:
    """``text``'s vector: remembered, being computed (waited for), or computed now.

    Raises:
        TypeError: ``embeddings`` is not hashable (the caller embeds without the cache).
    """
    key = (embeddings, text)
    with _lock:
        found = _done.get(key)
        if found is not None:
            _done.move_to_end(key)
            return found
        running = _running.get(key)
        if running is None:
            mine: Future[Vector] = Future()
            _running[key] = mine
    if running is not None:
        return running.result()
    try:
        out = tuple(embed_query(embeddings, text))
    except BaseException as exc:
        with _lock:
            _running.pop(key, None)
        mine.set_exception(exc)
        raise
    with _lock:
        _running.pop(key, None)
        _done[key] = out
        while len(_done) > QUERY_CACHE:
            _done.popitem(last=False)
    mine.set_result(out)
    return out


def start(embeddings: Hashable, text: str) -> None:
    """Begin computing ``text``'s vector in a worker thread (nothing if it is known or
    running); a failure is the later :func:`vector` call's to report."""
    global _pool
    key = (embeddings, text)
    with _lock:
        if key in _done or key in _running:
            return
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="beeweave-query")
        pool = _pool
    pool.submit(_quietly, embeddings, text)


def _quietly(embeddings: Hashable, text: str) -> None:
    try:
        vector(embeddings, text)
    except Exception:  # the caller that needs the vector computes it and sees the error
        return


def forget() -> None:
    """Drop the remembered vectors (a benchmark timing queries as new ones)."""
    with _lock:
        _done.clear()


__all__ = ["QUERY_CACHE", "forget", "start", "vector"]
