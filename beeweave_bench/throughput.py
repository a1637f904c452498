"""Indexing throughput beside the raw model speed, for the recall benches.

"Vectors keep up with capture" is a claim about the whole path (bus, store, chunking,
model, vector store), while the model alone bounds it; printing both in the same run
shows how much of the model's speed the path keeps.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from beeweave_core.index.base import Embedder
from beeweave_core.index.chunking import embed_texts

#: Turns embedded to time the model alone: all of LoCoMo's dev turns (a sample from
#: one conversation's first sessions would not have the lengths the indexer sees).
RAW_SAMPLE = 4000


def raw_model_speed(
    embeddings: Embedder, texts: Sequence[str], *, sample: int = RAW_SAMPLE
) -> float:
    """Texts per second of the model alone over ``texts`` (evenly spread, ``sample`` at
    most), called as the indexer calls it (same batching, same threads), so the ratio
    of indexing speed to this one is what the rest of the path costs."""
    step = max(1, -(-len(texts) // sample))
    part = list(texts[::step])
    if not part:
        return float("nan")
    embed_texts(embeddings, part[:8])  # loaded and warm before the clock starts
    t0 = time.perf_counter()
    embed_texts(embeddings, part)
    return len(part) / max(time.perf_counter() - t0, 1e-9)


def throughput_summary(
    turns: int, capture_s: float, index_s: float, raw_texts_per_s: float
) -> dict[str, float]:
    """turns/s from capture to searchable vectors, beside the model's own texts/s, and
    the machine's load then (a shared machine depresses both rates, not their ratio)."""
    total = capture_s + index_s
    per_s = turns / total if total > 0 else float("nan")
    return {
        "index_turns_per_s": round(per_s, 1),
        "model_texts_per_s": round(raw_texts_per_s, 1),
        "index_share_of_model_speed": round(per_s / raw_texts_per_s, 2)
        if raw_texts_per_s == raw_texts_per_s and raw_texts_per_s > 0
        else float("nan"),
        "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else float("nan"),
        "cpus": os.cpu_count() or 1,
    }
