"""BM25 over a scope too large to rank whole (a tenant), at a cost bounded by the query.

FTS5's own ``bm25()`` counts, for every query term, every row of the index that holds
it (the IDF) before it ranks anything: with common words that is a walk over most of
the index, so a tenant-wide search at 1M events cost ~0.2 s and grew with the store.
This module ranks with the same formula (``bm25(1.0, 0.5)``: body weight 1, context
0.5, k1 = 1.2, b = 0.75) from bounded reads only:

* **probes** — for each query phrase, the newest ``probe`` rows that hold it, read
  from the index in rowid order (no ranking, so no IDF walk), each with its length
  (``docsize``); a probe that comes back short lists *every* row holding the phrase
  (its document frequency, exactly), a full one gives its frequency by density (rows
  found / rowid span read);
* **conjunctions** — BM25 is dominated by the rarest phrases, and a short row holding
  them outranks a long one: the rows holding, in their body, all the phrases, then all
  but the most common, and so on, are read with their lengths (``read`` rows at most;
  a conjunction of common phrases among their newest rows only, ``walk``), so an old
  row holding the rare words is found however many newer rows hold the common ones;
  it stops once ``k`` rows met beat any row holding fewer of the phrases;
* **pool** — of all rows met, the ``pool`` best by an estimate of their BM25 (the
  phrases each is known to hold, once, and its length);
* **score** — each pooled row's text (the index's own stored copy) is split into the
  tokens FTS5 indexed, each token stemmed by SQLite's own tokenizer (cached), and its
  BM25 computed with the index's row count and average length (FTS5's ``averages``
  record) and the frequencies above.

The scope filter (tenant, active, session/user/type/time) is applied when the pool's
text is read, through the events primary key.
"""

from __future__ import annotations

import heapq
import math
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from beeweave_core.backends.sqlite import events_sql as q
from beeweave_core.text.lexical import fts_query

#: BM25 parameters and column weights, as ``SEARCH_TEXT`` gives FTS5's ``bm25()``.
K1, B = 1.2, 0.75
WEIGHTS = (1.0, 0.5)
#: What FTS5's ``unicode61`` keeps as one token (letters and digits; ``_`` separates).
_TOKEN = re.compile(r"[^\W_]+")
#: Stems kept in memory (a token's stem never changes; cleared when full).
_STEM_CACHE_MAX = 200_000
_stems: dict[str, tuple[str, ...]] = {}
_stems_lock = threading.Lock()


def _varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints (FTS5 ``averages`` and ``docsize`` records)."""
    out, v, n = [], 0, 0
    for byte in blob:
        n += 1
        if n == 9:
            out.append((v << 8) | byte)
            v, n = 0, 0
        elif byte & 0x80:
            v = (v << 7) | (byte & 0x7F)
        else:
            out.append((v << 7) | byte)
            v, n = 0, 0
    return out


def _length(size: bytes | None) -> int:
    """A row's length in tokens from its ``docsize`` record (two varints: body, context);
    two bytes are two one-byte varints, the usual case, read without decoding."""
    if not size:
        return 0
    return size[0] + size[1] if len(size) == 2 else sum(_varints(size))


def stems(conn: sqlite3.Connection, words: Sequence[str]) -> list[tuple[str, ...]]:
    """What the index's tokenizer (porter over unicode61) makes of each word (cached)."""
    missing = [w for w in dict.fromkeys(words) if w not in _stems]
    if missing:
        conn.execute(q.STEM_CREATE)
        conn.execute(q.STEM_VOCAB_CREATE)
        try:
            conn.executemany(q.STEM_INSERT, enumerate(missing, 1))
            found: dict[int, list[tuple[int, str]]] = {}
            for term, doc, offset in conn.execute(q.STEM_READ):
                found.setdefault(doc, []).append((offset, term))
        finally:
            conn.execute(q.STEM_CLEAR)
        with _stems_lock:
            if len(_stems) + len(missing) > _STEM_CACHE_MAX:
                _stems.clear()
            for i, w in enumerate(missing, 1):
                _stems[w] = tuple(t for _o, t in sorted(found.get(i, [])))
    return [_stems.get(w) or () for w in words]


@dataclass(frozen=True)
class IndexTotals:
    """The index's row count, average row length and rowid range (for IDF and length)."""

    rows: int
    avg_len: float
    low: int
    high: int

    @classmethod
    def read(cls, conn: sqlite3.Connection) -> IndexTotals:
        blob = conn.execute(q.FTS_AVERAGES).fetchone()
        vals = _varints(blob[0]) if blob and blob[0] else [0]
        rows = vals[0]
        avg = sum(vals[1:]) / rows if rows else 1.0
        low, high = conn.execute(q.FTS_ROWID_RANGE).fetchone()
        return cls(rows, avg or 1.0, int(low or 0), int(high or 0))

    def idf(self, df: float) -> float:
        """FTS5's IDF: ``log((N - df + 0.5) / (df + 0.5))``, never below 1e-6."""
        v = math.log((self.rows - df + 0.5) / (df + 0.5)) if self.rows else 0.0
        return v if v > 0 else 1e-6


@dataclass
class Probe:
    """The newest rows holding one phrase (or a conjunction), and what they tell."""

    match: str
    rowids: list[int]
    sizes: list[int]  # each row's length in tokens (all columns, as BM25 counts it)
    complete: bool  # fewer than asked: every row holding it is listed

    def df(self, totals: IndexTotals) -> float:
        """Document frequency: exact when complete, else by density over the span read."""
        if self.complete or not self.rowids:
            return float(len(self.rowids))
        span = max(1, totals.high - self.rowids[-1] + 1)
        whole = max(1, totals.high - totals.low + 1)
        return min(float(totals.rows), len(self.rowids) * whole / span)


def _quote(tokens: Sequence[str]) -> str:
    return '"' + " ".join(tokens).replace('"', '""') + '"'


def probe(conn: sqlite3.Connection, match: str, low: int, limit: int) -> Probe:
    rows = conn.execute(q.PROBE, (match, low, limit)).fetchall()
    # two bytes: two one-byte varints (the usual case), summed without a call
    sizes = [sz[0] + sz[1] if sz and len(sz) == 2 else _length(sz) for _r, sz in rows]
    return Probe(match, [r[0] for r in rows], sizes, len(rows) < limit)


@dataclass
class Candidates:
    """Rows met by the probes: the phrases each is known to hold (a bit mask) and the
    estimate of its BM25 that orders the pool (see ``estimate``)."""

    idf: list[float]
    avg_len: float
    known: dict[int, int] = field(default_factory=dict)
    score: dict[int, float] = field(default_factory=dict)
    shortest: int = 1 << 30  # the shortest row met (for ``ceiling``)

    def add(self, p: Probe, mask: int) -> None:
        # ``estimate`` spelt out (a call per row would be most of the cost)
        known, score, held = self.known, self.score, {mask: self.held(mask)}
        base, per = 1 + K1 * (1 - B), K1 * B / self.avg_len
        for r, n in zip(p.rowids, p.sizes, strict=True):
            m = known.get(r, 0) | mask
            if m not in held:
                held[m] = self.held(m)
            known[r] = m
            score[r] = held[m] * (K1 + 1) / (base + per * n)
        self.shortest = min(self.shortest, *p.sizes) if p.sizes else self.shortest

    def held(self, mask: int) -> float:
        return sum(w for i, w in enumerate(self.idf) if mask >> i & 1)

    def estimate(self, held: float, length: int) -> float:
        """BM25 of a row of ``length`` tokens holding phrases of total IDF ``held`` once
        each: the rarer the phrases and the shorter the row, the higher (more
        occurrences only add to it)."""
        return held * (K1 + 1) / (1 + K1 * (1 - B + B * length / self.avg_len))

    def ceiling(self, mask: int) -> float:
        """The estimate of a row holding ``mask``'s phrases, as short as any met."""
        return self.estimate(self.held(mask), self.shortest)

    def kth(self, k: int) -> float:
        """The ``k``-th best estimate (0 with fewer rows)."""
        top = heapq.nlargest(k, self.score.values())
        return top[-1] if len(top) >= k else 0.0

    def best(self, n: int) -> list[int]:
        return heapq.nlargest(n, self.score, key=self.score.__getitem__)


@dataclass(frozen=True)
class Bounds:
    """What one wide search may read: rows per phrase (``probe``), rows of the rarest
    phrases' conjunctions (``read``), rows of its phrases together a conjunction may
    walk (``walk``: common phrases are joined among their newest rows only, see
    ``_floor``), and rows scored (``pool``)."""

    probe: int
    read: int
    walk: int
    pool: int

    @classmethod
    def default(cls) -> Bounds:
        return cls(q.WIDE_PROBE, q.WIDE_READ, q.WIDE_WALK, q.WIDE_POOL)

    def grown(self) -> Bounds:
        """Four times as much (for a scope that keeps few of the rows read)."""
        return Bounds(
            self.probe * 4, self.read * 4, self.walk * 4, min(self.pool * 4, 4 * q.WIDE_POOL)
        )


def _floor(group: Sequence[Probe], totals: IndexTotals, low: int, walk: int) -> int:
    """The lowest rowid at which a conjunction of ``group``'s phrases is looked for.

    FTS5 joins phrases by walking their row lists, so the cost follows how many rows
    hold each phrase, not how many hold them all: the span is the newest part of the
    index in which they hold about ``walk`` rows together (all of it when one of them
    is listed whole: the join then steps along its few rows)."""
    if any(p.complete for p in group):
        return low
    whole = max(1, totals.high - totals.low + 1)
    held = sum(p.df(totals) for p in group)
    return max(low, totals.high - int(walk * whole / max(held, 1.0)))


def gather(
    conn: sqlite3.Connection,
    phrases: Sequence[Sequence[str]],
    totals: IndexTotals,
    low: int,
    bounds: Bounds,
    k: int,
) -> tuple[list[int], list[Probe]]:
    """The rows worth scoring (at most ``bounds.pool``) and each phrase's probe.

    BM25 is dominated by the rarest phrases, so rows holding all of them come first:
    the conjunction of every phrase, then of all but the most common one, and so on
    down to the rarest alone, each in the body (a word of the context counts half)
    and read newest first within what is left of ``bounds.read`` rows, until ``k``
    rows met beat any row holding fewer phrases (see ``_enough``).  A small
    conjunction is thus read whole (every row holding those phrases, however old);
    where the phrases are common, their newest rows only (``_floor``).  Among all
    rows met, the best ``pool`` by their estimated BM25 (phrases known held, length)
    are scored exactly.
    """
    singles = [probe(conn, _quote(p), low, bounds.probe) for p in phrases]
    idf = [totals.idf(s.df(totals)) if s.rowids else 0.0 for s in singles]
    found = Candidates(idf, totals.avg_len)
    for i, s in enumerate(singles):
        found.add(s, 1 << i)
    # one entry per distinct phrase (a query may name a word twice, or two of its forms)
    same: dict[tuple[str, ...], list[int]] = {}
    for i, key in enumerate(phrase_stems(conn, phrases)):
        if singles[i].rowids:
            same.setdefault(key or (singles[i].match,), []).append(i)
    order = sorted(same.values(), key=lambda ix: -idf[ix[0]])
    left = bounds.read
    for n in range(len(order), 0, -1):
        group = [singles[ix[0]] for ix in order[:n]]
        mask = sum(1 << i for ix in order[:n] for i in ix)
        if left <= 0 or (n == 1 and group[0].complete) or _enough(found, mask, k):
            break
        match = q.IN_BODY.format(" AND ".join(p.match for p in group))
        p = probe(conn, match, _floor(group, totals, low, bounds.walk), left)
        found.add(p, mask)
        left -= len(p.rowids)
    return found.best(bounds.pool), singles


def _enough(found: Candidates, mask: int, k: int) -> bool:
    """Whether ``k`` rows met already beat any row holding only ``mask``'s phrases once
    (then rows holding fewer of them are not worth reading)."""
    return found.kth(k) >= found.ceiling(mask) > 0


def _phrase_count(seq: list[str], phrase: tuple[str, ...]) -> int:
    n, m = 0, len(phrase)
    for i in range(len(seq) - m + 1):
        if seq[i] == phrase[0] and tuple(seq[i : i + m]) == phrase:
            n += 1
    return n


def _fold(word: str) -> str:
    """Lower case without accents (``remove_diacritics``), so the prefix test holds."""
    if word.isascii():
        return word.lower()
    return "".join(
        ch for ch in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(ch)
    )


class _Matcher:
    """How often each query phrase occurs in a text, without stemming the whole text.

    A Porter stem, less its last letter, begins the word it came from (``happi`` <
    happy, ``hope`` < hoping, ``relat`` < relational): one regular expression finds
    the words that may stem to a query stem, and only those are stemmed (by SQLite,
    cached) and compared.  A text is split into all its words only for a phrase of
    several words, and only when it holds the phrase's first one.
    """

    def __init__(self, conn: sqlite3.Connection, phrases: Sequence[tuple[str, ...]]) -> None:
        self.conn, self.phrases = conn, phrases
        heads = {(st[:-1] if len(st) > 2 else st[:1]) for ph in phrases for st in ph if st}
        alts = "|".join(sorted((re.escape(h) for h in heads), key=len, reverse=True))
        # Texts are lower-cased first (faster than a case-blind pattern), and a match's
        # start is checked in Python: a leading look-behind makes the scan ~2x slower.
        self.pattern = re.compile(rf"(?:{alts})[^\W_]*")
        self.stem_of: dict[str, tuple[str, ...]] = {}

    def words(self, text: str | None) -> list[str]:
        """The words of ``text`` that may stem to a query stem."""
        if not text:
            return []
        low = text.lower()
        return [
            _fold(m.group())
            for m in self.pattern.finditer(low)
            if not m.start() or not low[m.start() - 1].isalnum()
        ]

    def learn(self, words: Iterable[str]) -> None:
        """Stem the words not seen yet, all at once (one round trip to SQLite)."""
        new = list(set(words) - self.stem_of.keys())
        self.stem_of.update(zip(new, stems(self.conn, new), strict=True))

    def counts(self, text: str | None, words: list[str]) -> list[int]:
        found: dict[str, int] = {}
        for w in words:
            for st in self.stem_of[w]:
                found[st] = found.get(st, 0) + 1
        out = []
        for ph in self.phrases:
            if len(ph) == 1 or not found.get(ph[0]) or not text:
                out.append(found.get(ph[0], 0) if ph else 0)
                continue
            every = [_fold(w) for w in _TOKEN.findall(text)]
            self.learn(every)
            seq = [st for w in every for st in self.stem_of[w]]
            out.append(_phrase_count(seq, ph))
        return out


def score(
    conn: sqlite3.Connection,
    rows: Sequence[tuple[Any, ...]],
    phrases: Sequence[tuple[str, ...]],
    idf: Sequence[float],
    totals: IndexTotals,
) -> list[tuple[int, float]]:
    """(rowid, BM25) of each ``(rowid, body, context, docsize)`` row, best first."""
    match = _Matcher(conn, phrases)
    found = [(r, match.words(r[1]), match.words(r[2])) for r in rows]
    match.learn(w for _r, a, b in found for w in (*a, *b))
    out = []
    for (rowid, body, context, size), in_body, in_context in found:
        if not in_body and not in_context:
            continue
        freq = [
            WEIGHTS[0] * a + WEIGHTS[1] * b
            for a, b in zip(
                match.counts(body, in_body), match.counts(context, in_context), strict=True
            )
        ]
        if not any(freq):
            continue
        length = _length(size)
        norm = K1 * (1 - B + B * length / totals.avg_len)
        s = sum(w * f * (K1 + 1) / (f + norm) for w, f in zip(idf, freq, strict=True) if f)
        out.append((rowid, s))
    out.sort(key=lambda p: -p[1])
    return out


def phrase_stems(
    conn: sqlite3.Connection, phrases: Sequence[Sequence[str]]
) -> list[tuple[str, ...]]:
    """Each query phrase as the index's stems (what a row's tokens are compared with)."""
    return [tuple(s for g in stems(conn, list(p)) for s in g) for p in phrases]


@dataclass(frozen=True)
class RankingCheck:
    """A wide search's top ``k`` against FTS5's exhaustive top ``k`` (benchmarks only)."""

    share: float  # of the exhaustive top k's BM25 the found rows hold (1.0: as good)
    overlap: float  # of the exhaustive top k's rows found (1.0: the same rows)


def ranking_share(
    conn: sqlite3.Connection, tenant: str, query: str, event_ids: Sequence[str], k: int
) -> RankingCheck:
    """How much of the best attainable BM25 a wide search's top ``k`` holds, and how
    many of the exhaustive top ``k``'s rows it holds (both 0..1; NaN without a match).

    For benchmarks only: it asks FTS5 to rank the *whole* index (the walk the wide
    search avoids) and compares the exact scores of ``rowids`` (found by the search)
    with those of the exhaustive top ``k``.  Rows of equal score can make the overlap
    lower than the share (another row of the same score is just as good).  Call with
    the store's connection lock held: maintenance syncs the text index on the same
    connection.
    """
    nan = RankingCheck(float("nan"), float("nan"))
    match = fts_query(query)
    if match is None or not event_ids:
        return nan
    sql = q.EXISTING_ROWIDS.format(ids=",".join("?" * len(event_ids)))
    rowids = [r[0] for r in conn.execute(sql, (tenant, *event_ids))]
    best = conn.execute(q.EXHAUSTIVE, (match, k)).fetchall()
    sql = q.EXACT_SCORES.format(rowids=",".join("?" * len(rowids)))
    found = conn.execute(sql, (match, *rowids)).fetchall()
    top = sum(s for _r, s in best)
    if not top:
        return nan
    same = len({r for r, _s in best} & set(rowids)) / len(best)
    return RankingCheck(sum(s for _r, s in found) / top, same)
