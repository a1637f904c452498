"""What the recalled layer may hold, and how much each piece is worth for this query.

Candidates are memories and summary lines of the session, the original turns of
segments whose summary was rolled back or that are not compacted yet but fell out of
the immediate window, and — for the same user — memories and summaries of their other
sessions (through the fused retriever when it is available, else straight from the
store).  Each is scored by lexical relevance to the query (BM25 from
:mod:`beeweave_core.ranking`, over the same terms the search index uses, Chinese
segmented), a prior by kind, recency, and memory decay (a half-life per kind).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from beeweave_core.context.compactor import summary_lines
from beeweave_core.context.editing import Editor, SourceLine
from beeweave_core.context.memory import decay, expired
from beeweave_core.context.messages import Unit
from beeweave_core.events import Event, EventType
from beeweave_core.ranking import bm25, rrf_shares
from beeweave_core.text import language as L
from beeweave_core.text import segment

log = logging.getLogger("beeweave.context")

#: How much a piece of each kind is worth before the query is known: what the agent
#: was told to do (decisions, constraints) first, then what the user likes, then
#: things produced and facts; a summary line and a raw turn are the least distilled.
PRIOR = {
    "decision": 0.9,
    "constraint": 0.9,
    "preference": 0.8,
    "artifact": 0.75,
    "fact": 0.6,
    "summary": 0.55,
    "original": 0.5,
}
#: A piece's score: ``RELEVANCE * bm25 / best bm25 + KIND_PRIOR * prior + RECENCY *
#: recency`` (each part in 0..1, the weights sum to 1).  Relevance dominates: a piece
#: with the best match scores at least 0.725, one matching nothing at most 0.375, so a
#: piece with over ~42 % of the best relevance outranks any non-matching piece
#: whatever its kind or age.  The prior (spread 0.1 over the kinds) and recency
#: (spread 0.15) order pieces that match alike, and everything when nothing matches;
#: recency weighs a little more because the latest word on a subject is the one that
#: holds.
RELEVANCE, KIND_PRIOR, RECENCY = 0.6, 0.25, 0.15
#: Weight of another session's memories and summaries: the same user's, but said in
#: another task whose context may not apply here.
OTHER_SESSION = 0.85


@dataclass
class Recallable:
    """One piece the recalled layer may include, with where it came from."""

    key: str
    kind: str  # a memory kind, "summary" or "original"
    text: str
    group: str  # render header shared by pieces of one source
    event_ids: tuple[str, ...]
    session_id: str
    seq_range: tuple[int, int]
    weight: float = 1.0  # decay x cross-session discount
    recency: float = 0.0
    score: float = 0.0
    via: str = "store"
    core: str = ""  # the statement itself, for spotting the same thing said twice

    def line(self) -> str:
        if self.group.startswith("[memories"):
            return f"- ({self.kind} #{self.seq_range[0]}) {self.text}"
        return f"- {self.text}"


@dataclass
class OtherSession:
    """What recall takes from another session of the user (bounded by the reader,
    see :mod:`.cross_session`): memories, its newest top summaries (their newest lines
    and those sharing query terms), and lines of its older top summaries sharing terms
    (summary, line index)."""

    session_id: str
    memories: list[Event]
    summaries: list[Event]
    lines: list[tuple[Event, int]] = field(default_factory=list)


#: Pieces of other sessions sharing no query term kept for a call (the best by kind
#: prior and weight): all they can rank by, so the rest could never outrank them.
PRIOR_ONLY = 64


@dataclass
class RecallInputs:
    """Everything :func:`gather` reads, so the assembler decides it once."""

    session_id: str
    query: str
    user_id: str | None
    memories: Sequence[Event]
    exclude: set[str]
    exclude_texts: set[str]
    top_summaries: Sequence[Event]
    rolled_back: Sequence[Event]
    #: turns no visible summary stands for, oldest first (bounded by the caller)
    uncovered: Sequence[Unit]
    span: int  # the session's last seq (for recency)
    window_from: int  # first seq in the immediate window (tentative)
    editor: Editor
    now: float
    #: query terms -> candidates of the user's other sessions
    other_sessions: Callable[[frozenset[str]], list[OtherSession]] = lambda _terms: []
    retrieve: Callable[[str], list[Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: (query terms, ids of the older top summaries) -> their lines sharing the most
    #: terms, as (summary, line index), from the caller's index; ``None``: scan them
    older_lines: Callable[[frozenset[str], set[str]], list[tuple[Event, int]]] | None = None

    @property
    def query_terms(self) -> frozenset[str]:
        return frozenset(t for t in _tokens(self.query or "") if t not in segment.STOPWORDS)


def _mem_piece(m: Event, origin: str, weight: float, recency: float) -> Recallable:
    seq = int(m.payload.get("source_seq", m.seq))
    return Recallable(
        key=m.id,
        kind=str(m.payload.get("kind", "fact")),
        text=m.content,
        group=f"[memories · {origin}]",
        event_ids=(m.id, *(m.payload.get("source_ids") or ())),
        session_id=m.session_id,
        seq_range=(seq, seq),
        weight=weight,
        recency=recency,
        core=m.content,
    )


#: Summary lines offered to recall per summary: the newest, and as many sharing the most
#: query terms.
SUMMARY_LINES = 40
#: Top summaries whose newest lines are offered; older ones offer only lines sharing
#: query terms (a long session has many: a call must not cost what they all hold).
NEWEST_SUMMARIES = 8


_PARSED: dict[str, tuple[tuple[SourceLine, frozenset[str]], ...]] = {}


def parsed_lines(summary: Event) -> tuple[tuple[SourceLine, frozenset[str]], ...]:
    """A summary's lines with their terms (a stored summary never changes: parse once)."""
    hit = _PARSED.get(summary.id)
    if hit is None:
        if len(_PARSED) > 8192:
            _PARSED.clear()
        hit = _PARSED[summary.id] = tuple(
            (ln, frozenset(_tokens(ln.text))) for ln in summary_lines(summary)
        )
    return hit


def _summary_pieces(
    s: Event,
    origin: str,
    weight: float,
    window_from: int | None,
    query_terms: frozenset[str] = frozenset(),
) -> list[Recallable]:
    lines = parsed_lines(s)
    newest = len(lines) - SUMMARY_LINES
    shared = sorted(((len(t & query_terms), i) for i, (_ln, t) in enumerate(lines[:newest])
                     if t & query_terms), reverse=True)[:SUMMARY_LINES]  # fmt: skip
    picked = {i for _n, i in shared}
    out = []
    for i, (ln, _terms) in enumerate(lines):
        if window_from is not None and ln.seq >= window_from:
            continue  # that turn is shown verbatim
        if i < newest and i not in picked:
            continue  # an older line the query touches less: bounded cost per call
        out.append(_line_piece(s, i, ln, origin, weight))
    return out


def _line_piece(s: Event, i: int, ln: SourceLine, origin: str, weight: float) -> Recallable:
    a, b = int(s.payload.get("seq_from", s.seq)), int(s.payload.get("seq_to", s.seq))
    group = f"[summary · {origin} · turns #{a}-#{b}]"
    text = ln.text if ln.role == "summary" else f"#{ln.seq} {ln.role}: {ln.text}"
    return Recallable(f"{s.id}:{i}", "summary", text, group, (s.id,), s.session_id,
                      (ln.seq, ln.seq), weight, 0.0, core=ln.text)  # fmt: skip


def _older_pieces(
    summaries: Sequence[Event], query_terms: frozenset[str], window_from: int
) -> list[Recallable]:
    """Of summaries older than the newest few: the lines sharing the most query terms
    (newest first on ties), at most :data:`SUMMARY_LINES` in all, whatever their count."""
    scored = []
    for s in summaries:
        if not s.content:
            continue
        for i, (ln, terms) in enumerate(parsed_lines(s)):
            shared = terms & query_terms
            if shared and ln.seq < window_from:
                scored.append((len(shared), ln.seq, i, s, ln))
    best = heapq.nlargest(SUMMARY_LINES, scored, key=lambda x: (x[0], x[1]))
    return [_line_piece(s, i, ln, "this session", 1.0) for _n, _q, i, s, ln in best]


@lru_cache(maxsize=65536)
def _tokens(text: str) -> tuple[str, ...]:
    """BM25 terms of a text (pieces repeat across calls: tokenised once)."""
    return tuple(segment.tokens(text))


def gather(inp: RecallInputs) -> list[Recallable]:
    """All candidates for the recalled layer, scored for ``inp.query``."""
    out: list[Recallable] = []
    span = max(1, inp.span)
    for m in inp.memories:
        if m.id in inp.exclude or expired(m, inp.now):
            continue
        sources = m.payload.get("source_ids") or ()
        seq = int(m.payload.get("source_seq", m.seq))
        if seq >= inp.window_from and sources:
            continue  # said in a turn the immediate layer shows verbatim
        out.append(_mem_piece(m, "this session", decay(m, inp.now), seq / span))
    cut = max(0, len(inp.top_summaries) - NEWEST_SUMMARIES)
    if inp.older_lines is None:
        pieces = _older_pieces(inp.top_summaries[:cut], inp.query_terms, inp.window_from)
    else:
        found = inp.older_lines(inp.query_terms, {s.id for s in inp.top_summaries[:cut]})
        pieces = [_line_piece(s, i, ln, "this session", 1.0) for s, i in found
                  if (ln := parsed_lines(s)[i][0]).seq < inp.window_from]  # fmt: skip
    for s in inp.top_summaries[cut:]:
        if s.content:
            pieces += _summary_pieces(s, "this session", 1.0, inp.window_from, inp.query_terms)
    for p in pieces:
        p.recency = p.seq_range[1] / span
    out += pieces
    out += _originals(inp, span)
    try:
        out += _cross_session(inp)
    except Exception:  # cross-session recall is a bonus; never fail an assembly on it
        log.exception("beeweave: cross-session recall failed")
    _score(out, inp.query)
    seen = set(inp.exclude_texts)
    unique = []
    for r in sorted(out, key=lambda r: r.score, reverse=True):
        f = L.fold(r.core or r.text)
        if f not in seen:
            seen.add(f)
            unique.append(r)
    return unique


def _originals(inp: RecallInputs, span: int) -> list[Recallable]:
    """Turns no summary stands for: rolled-back segments, and uncompacted turns that
    fell out of the immediate window."""
    out: list[Recallable] = []
    groups: list[tuple[str, list[Unit]]] = []
    before = [u for u in inp.uncovered if u.seq_to < inp.window_from]
    taken: set[int] = set()
    for s in inp.rolled_back:
        ids = set(s.payload.get("source_ids") or ())
        units = [u for u in before if set(u.ids) & ids]
        taken.update(id(u) for u in units)
        if units:
            groups.append(("summary rolled back, originals kept", units))
    gap = [u for u in before if id(u) not in taken]
    if gap:
        groups.append(("not yet compacted", gap))
    seen: set[str] = set()
    for why, units in groups:
        lines = inp.editor.source_lines(units, seen=seen)
        if not lines:
            continue
        a, b = units[0].seq_from, units[-1].seq_to
        group = f"[original turns · this session · #{a}-#{b} · {why}]"
        for ln in lines:
            out.append(Recallable(f"{ln.event_id}:orig", "original", f"#{ln.seq} {ln.role}: {ln.text}",
                                  group, (ln.event_id,), inp.session_id, (ln.seq, ln.seq), 1.0,
                                  ln.seq / span, core=ln.text))  # fmt: skip
    return out


def _cross_session(inp: RecallInputs) -> list[Recallable]:
    """The same user's memories and summaries from their other sessions."""
    if not inp.user_id:
        return []
    pieces: list[Recallable] = []
    known: set[str] = set()
    terms = inp.query_terms
    for other in inp.other_sessions(terms):
        origin = f"session {other.session_id}"
        for m in other.memories:
            if not expired(m, inp.now):
                pieces.append(_mem_piece(m, origin, OTHER_SESSION * decay(m, inp.now), 0.0))
                known.add(m.id)
        for s in other.summaries:
            pieces += _summary_pieces(s, origin, OTHER_SESSION, None, terms)
            known.add(s.id)
        for s, i in other.lines:
            pieces.append(_line_piece(s, i, parsed_lines(s)[i][0], origin, OTHER_SESSION))
            known.add(s.id)
    out = _bounded(pieces, terms)
    if inp.retrieve is not None and inp.query:
        _add_retrieved(inp, out, known)
    return out


def _bounded(pieces: list[Recallable], terms: frozenset[str]) -> list[Recallable]:
    """Every piece sharing a query term, and the :data:`PRIOR_ONLY` best of the rest by
    what they can score with no term (prior x weight): what scoring then costs follows
    the query, not how much the other sessions hold."""
    matching: list[Recallable] = []
    rest: list[Recallable] = []
    for p in pieces:
        (matching if terms.intersection(_tokens(p.text)) else rest).append(p)
    best = heapq.nlargest(PRIOR_ONLY, rest, key=lambda p: PRIOR.get(p.kind, 0.5) * p.weight)
    return matching + best


def _add_retrieved(inp: RecallInputs, out: list[Recallable], known: set[str]) -> None:
    """What the fused retriever finds in other sessions, and its order as a bonus.

    A piece the retriever returned gets its weight times ``1 + 1/rank`` (reciprocal
    rank with no damping, k=0): the retriever already kept only its few best hits and
    sees meaning the BM25 of :func:`_score` misses, so its first hit doubles a
    piece's weight and its tenth still adds a tenth.
    """
    hits = inp.retrieve(inp.query) if inp.retrieve is not None else []
    share = dict(rrf_shares([(h.event.id, 0.0) for h in hits], k=0.0))
    bonus: dict[str, float] = {}
    for hit in hits:
        ev = hit.event
        if ev.session_id == inp.session_id:
            continue
        bonus[ev.id] = share[ev.id]
        if ev.id in known:
            continue
        origin = f"session {ev.session_id}"
        found: list[Recallable] = []
        if ev.type == EventType.MEMORY and not expired(ev, inp.now):
            found = [_mem_piece(ev, origin, OTHER_SESSION * decay(ev, inp.now), 0.0)]
        elif ev.type == EventType.SUMMARY and ev.content:
            found = _summary_pieces(ev, origin, OTHER_SESSION, None)
        for p in found:
            p.via = "retriever"
        out += found
    for p in out:
        if p.event_ids[0] in bonus:
            p.via = "retriever"
            p.weight *= 1.0 + bonus[p.event_ids[0]]


def _score(pieces: list[Recallable], query: str) -> None:
    """Blend BM25 relevance (0..1, by the best piece), the kind prior and recency, x weight."""
    q = [t for t in segment.tokens(query) if t not in segment.STOPWORDS]
    rel = bm25(q, [list(_tokens(p.text)) for p in pieces])
    top = max(rel, default=0.0) or 1.0
    for p, r in zip(pieces, rel, strict=True):
        blend = RELEVANCE * r / top + KIND_PRIOR * PRIOR.get(p.kind, 0.5) + RECENCY * p.recency
        p.score = blend * p.weight
