"""Indexing throughput beside the raw model speed, for the recall benches.

"Vectors keep up with capture" is a claim about the whole path (bus, store, chunking,
model, vector store), while the model alone bounds it; printing both in the same run
shows how much of the model's speed the path keeps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from beeweave_core.index.base import Embedder

#: Turns embedded to time the model alone (enough for a stable figure, a few seconds).
RAW_SAMPLE = 600


def raw_model_speed(
    embeddings: Embedder, texts: Sequence[str], *, sample: int = RAW_SAMPLE
) -> float:
    """Texts per second of ``embed_documents`` alone over (up to ``sample``) of ``texts``."""
    part = list(texts[:sample])
    if not part:
        return float("nan")
    embeddings.embed_documents(part[:8])  # loaded and warm before the clock starts
    t0 = time.perf_counter()
    embeddings.embed_documents(part)
    return len(part) / max(time.perf_counter() - t0, 1e-9)


def throughput_summary(
    turns: int, capture_s: float, index_s: float, raw_texts_per_s: float
) -> dict[str, float]:
    """turns/s from capture to searchable vectors, beside the model's own texts/s."""
    total = capture_s + index_s
    per_s = turns / total if total > 0 else float("nan")
    return {
        "index_turns_per_s": round(per_s, 1),
        "model_texts_per_s": round(raw_texts_per_s, 1),
        "index_share_of_model_speed": round(per_s / raw_texts_per_s, 2)
        if raw_texts_per_s == raw_texts_per_s and raw_texts_per_s > 0
        else float("nan"),
    }
