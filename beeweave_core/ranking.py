"""How BeeWeave orders what it recalls: BM25, reciprocal-rank fusion, and decay by age.

The retriever (fusing its search paths) and the context engine (scoring what the
recalled layer may hold) rank with these functions, so a relevance score, a fused
rank or the weight of an old memory mean the same thing wherever they appear.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from beeweave_core.events import Event, EventType

__all__ = [
    "BM25_B",
    "BM25_K1",
    "DAY",
    "DEFAULT_HALF_LIFE_DAYS",
    "HALF_LIFE_DAYS",
    "RRF_K",
    "age_weight",
    "bm25",
    "decay",
    "half_life",
    "minmax_shares",
    "rrf_shares",
]

K = TypeVar("K", bound=Hashable)

DAY = 86_400.0

# ---------------------------------------------------------------------- BM25
#: BM25 term-frequency saturation and length normalisation: Robertson's standard
#: values, which are also SQLite FTS5's ``bm25()`` and Lucene's (Neo4j) defaults, so
#: the context engine ranks a piece the way the store's full-text index would.
BM25_K1 = 1.2
BM25_B = 0.75


def bm25(
    query: Sequence[str], docs: Sequence[Sequence[str]], *, k1: float = BM25_K1, b: float = BM25_B
) -> list[float]:
    """Okapi BM25 of each tokenised doc for the query's terms (each term counted once).

    The idf is Lucene's ``log(1 + (N - df + 0.5) / (df + 0.5))``: never negative, so a
    term found in most docs still counts a little instead of pushing a doc down.
    """
    terms = list(dict.fromkeys(query))
    counts = [Counter(d) for d in docs]
    n = len(counts)
    if not n or not terms:
        return [0.0] * n
    avg = sum(len(d) for d in docs) / n or 1.0
    df = Counter(t for c in counts for t in c)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    out = []
    for c, d in zip(counts, docs, strict=True):
        norm = k1 * (1 - b + b * (len(d) or 1) / avg)
        out.append(sum(idf[t] * c[t] * (k1 + 1) / (c[t] + norm) for t in terms if c[t]))
    return out


# -------------------------------------------------------------------- fusion
#: The reciprocal-rank constant.  Small (3, not the customary 60) so each path's
#: first hits dominate: with 60, ranks 1 and 50 differ by less than 2x and a weaker
#: path's noise outweighs a stronger path's confident top hit.  ``beeweave bench
#: locomo`` chooses it (with the path weights) by leave-one-conversation-out
#: cross-validation among 3, 5 and 10; 3 is the pick over all five folds.
RRF_K = 3.0


def rrf_shares(ranked: Sequence[tuple[K, float]], k: float = RRF_K) -> list[tuple[K, float]]:
    """Reciprocal-rank share of each entry of one ranking (best first): ``1 / (k + rank)``.

    Ranks, unlike raw scores, compare across rankers (a cosine and a BM25 score do not).
    """
    return [(key, 1.0 / (k + r)) for r, (key, _) in enumerate(ranked, 1)]


def minmax_shares(ranked: Sequence[tuple[K, float]]) -> list[tuple[K, float]]:
    """Each raw score min-max normalised over its list (1 = the best, 0 = the worst).

    Keeps how far ahead a confident top hit is, which ranks forget.
    """
    if not ranked:
        return []
    lo = min(x for _, x in ranked)
    span = max(x for _, x in ranked) - lo
    return [(key, (x - lo) / span if span > 0 else 1.0) for key, x in ranked]


# --------------------------------------------------------------------- decay
#: How long each kind of memory stays relevant, in days: a preference ("I prefer
#: metric units") holds for months, a constraint or decision for a project's life,
#: a fact about the current state changes within weeks, and an artifact (a file, a
#: URL just produced) is superseded fastest.
HALF_LIFE_DAYS: Mapping[str, float] = {
    "preference": 180.0,
    "constraint": 90.0,
    "decision": 60.0,
    "fact": 30.0,
    "artifact": 14.0,
}
#: Half-life of a memory whose kind is unknown, and the retriever's default for events
#: that have no kind: a month, the life of one piece of work.
DEFAULT_HALF_LIFE_DAYS = 30.0


def decay(age: float, half_life: float | None, floor: float = 0.0) -> float:
    """Weight of something ``age`` seconds old: 1.0 new, halving towards ``floor``.

    ``half_life`` in seconds (``None``: no decay).  A future timestamp counts as new.
    """
    if not half_life:
        return 1.0
    return floor + (1.0 - floor) * 0.5 ** (max(0.0, age) / half_life)


def half_life(ev: Event, default: float = DEFAULT_HALF_LIFE_DAYS * DAY) -> float:
    """An event's half-life in seconds: a memory's own (stored when it was written, else
    by its kind), ``default`` for every other event."""
    if ev.type != EventType.MEMORY:
        return default
    payload = ev.payload or {}
    stored = payload.get("half_life_days")
    if isinstance(stored, (int, float)) and stored > 0:
        return float(stored) * DAY
    kind = str(payload.get("kind", "fact"))
    return HALF_LIFE_DAYS.get(kind, DEFAULT_HALF_LIFE_DAYS) * DAY


def age_weight(
    ev: Event,
    now: float | None = None,
    *,
    default: float | None = DEFAULT_HALF_LIFE_DAYS * DAY,
    floor: float = 0.0,
) -> float:
    """:func:`decay` of ``ev`` at ``now`` with its own :func:`half_life`.

    ``default=None`` turns decay off for every event (memories included).
    """
    if default is None:
        return 1.0
    now = time.time() if now is None else now
    return decay(now - ev.ts, half_life(ev, default), floor)
