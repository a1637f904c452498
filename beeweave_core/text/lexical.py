"""Full-text search terms: what the SQLite FTS index stores, and what it is asked.

Both sides go through :func:`beeweave_core.text.segment.segment`, so Chinese,
codes and numbers are split the same way when an event is written and when a
question is asked.  Numbers written with separators (``2,000`` /
``18.400.000``) also get their bare form (``2000``) on both sides.

Queries are never passed through as FTS syntax: every term is quoted (a quote
inside doubled), so ``NEAR(``, ``*``, ``col:``, ``AND`` or an unbalanced quote
in the user's text is just text.  :mod:`beeweave_core.text.lucene` builds the
same terms for Lucene.
"""

from __future__ import annotations

from collections.abc import Sequence

from beeweave_core.text.segment import (
    STOPWORDS,
    bare_numbers,
    han_characters,
    segment,
    unit_tokens,
)
from beeweave_core.text.stems import stem_strings

__all__ = [
    "CONTEXT_CHARS",
    "fts_query",
    "fts_text",
    "fts_token_text",
    "query_terms",
]

#: How much of the previous turn an event's full-text entry holds (its context):
#: ``substr(p.content, 1, 2000)`` in the SQLite store's ``FTS_CATCH_UP``.
CONTEXT_CHARS = 2000


def fts_text(text: str) -> str:
    """What the FTS index stores for ``text``: segmented words plus bare numbers.

    Total: any failure falls back to the raw text, because this runs inside the
    store's write transaction and must never refuse an event.
    """
    try:
        if not isinstance(text, str):
            text = "" if text is None else str(text)
        body = segment(text, for_index=True)
        extra = bare_numbers(text)
        return body + (" \n " + " ".join(extra) if extra else "")
    except Exception:  # pragma: no cover - defensive: the index must take every event
        return text if isinstance(text, str) else ""


def _segment_word(word: str) -> str:
    return segment(word, for_index=True)


def fts_token_text(texts: Sequence[str]) -> list[str]:
    """The tokens the SQLite FTS index holds for each text, joined by spaces: its
    tokenizer's output for :func:`fts_text`, at about a dictionary lookup per word.

    Segmentation never looks across white space (jieba cuts a run of Han
    characters, the digit/letter split needs both), so each distinct word is
    segmented and tokenised once and remembered (:func:`stem_strings`); only the
    bare numbers are found in the whole text.  Neo4j appends need this per event.
    """
    texts = [t if isinstance(t, str) else "" if t is None else str(t) for t in texts]
    try:
        body = stem_strings(texts, prepare=_segment_word)
        extra = [bare_numbers(t) for t in texts]
    except Exception:  # pragma: no cover - defensive, as fts_text: never refuse an event
        return stem_strings(texts)
    if not any(extra):
        return body
    more = stem_strings([" ".join(e) for e in extra])
    return [f"{b} {m}" if b and m else b or m for b, m in zip(body, more, strict=True)]


def query_terms(query: str) -> list[list[str]]:
    """The query's terms, grouped: a written unit (``JOB-7731``) is one phrase of tokens.

    Stopwords are dropped unless nothing else is left; duplicates are removed.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    groups: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()

    def add(toks: list[str]) -> None:
        if toks and tuple(toks) not in seen:
            seen.add(tuple(toks))
            groups.append(toks)

    for unit in segment(query, for_index=False).split():
        add(unit_tokens(unit))
    for g in list(groups):  # "$181/month" also finds "181 per month"
        for t in g:
            if len(g) > 1 and len(t) > 1 and t.isdigit():
                add([t])
    for bare in bare_numbers(query):
        add([bare])
    for g in list(groups):  # a Chinese word's characters (the index holds them too)
        for c in han_characters(g[0]) if len(g) == 1 else ():
            add([c])
    content = [g for g in groups if not (len(g) == 1 and g[0] in STOPWORDS)]
    return content or groups


def _quote(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def fts_query(query: str, *, max_terms: int = 64) -> str | None:
    """An FTS5 MATCH expression for free text: quoted phrases joined by ``OR``.

    ``None`` when the query has no searchable term (only punctuation, say).
    BM25 ranks documents that match more and rarer terms first, so OR is the
    recall-friendly choice for natural-language questions.
    """
    groups = query_terms(query)[:max_terms]
    if not groups:
        return None
    return " OR ".join(_quote(" ".join(g)) for g in groups)
