"""Sentence vectors for the memory writer: the offline MiniLM, one cache for every user.

The act classifier and the supersession scorer read the same sentences; a sentence is
embedded once (a batch of new ones in one model run) and kept by its text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

#: Vectors kept by sentence (cleared when full).
CACHE_MAX = 50_000
_vecs: dict[str, np.ndarray] = {}
_lock = threading.Lock()


_model: list[object] = []


def _minilm() -> object:
    """The writer's own MiniLM: one thread, so maintenance in the background never takes
    more than one core from the agent (the index and queries keep theirs).  It runs the
    packaged file as it is: the act classifier and the supersession scorer were fitted on
    that file's vectors, and the quantized copy the index runs moves them a little."""
    with _lock:
        if not _model:
            from beeweave_core.embeddings import MiniLMEmbeddings

            _model.append(MiniLMEmbeddings(workers=1, intra_op_threads=1, quantize=False))
        return _model[0]


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit vectors of ``texts`` (rows in order); the ones not seen before in one run."""
    todo = list(dict.fromkeys(t for t in texts if t not in _vecs))
    if todo:
        model = _minilm()
        got = np.asarray(model.embed_array(todo), dtype=np.float32)  # type: ignore[attr-defined]
        with _lock:
            if len(_vecs) + len(todo) > CACHE_MAX:
                _vecs.clear()
            _vecs.update(zip(todo, got, strict=True))
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.vstack([_vecs[t] if t in _vecs else embed([t])[0] for t in texts])


__all__ = ["embed"]
