"""Lexical / entity search: turning text into FTS terms, and questions into safe queries.

Full-text engines split words on spaces and punctuation.  That finds ``JOB-7731``,
``$181`` or ``orders_nightly`` once both sides are split the same way, but it finds
nothing in Chinese, which is written without spaces (SQLite's ``unicode61`` keeps a
whole Chinese sentence as one token).  So BeeWeave segments text itself, once at
index time and once at query time, with the same function:

* Han runs go through ``jieba`` (search mode at index time, which also emits the
  shorter words inside long ones); kana runs become character bigrams;
* a number glued to a unit or word (``30s``, ``5k``, ``v2``) is also split
  (``30 s``) and numbers written with separators (``2,000`` / ``18.400.000``) also
  get their bare form (``2000``), so the way a user types a number matters less.

Queries are never passed through as FTS syntax: every term is quoted (a quote
inside doubled), so ``NEAR(``, ``*``, ``col:``, ``AND`` or an unbalanced quote
in the user's text is just text.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

__all__ = [
    "STOPWORDS",
    "fts_text",
    "fts_query",
    "lucene_query",
    "query_terms",
    "segment",
    "tokens",
]

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff\u31f0-\u31ff"
_HAN_RUN = re.compile(f"[{_HAN}]+")
_KANA_RUN = re.compile(f"[{_KANA}]+")
_CJK = re.compile(f"[{_HAN}{_KANA}]")
_DIGIT_ALPHA = re.compile(r"(?<=\d)(?=[^\W\d_])|(?<=[^\W\d_])(?=\d)")
_SEP_NUMBER = re.compile(r"\d{1,3}(?:[,.' ]\d{3})+(?:\.\d+)?")
#: What ``unicode61`` keeps as one token: runs of letters and digits (``_`` separates).
_TOKEN = re.compile(r"[^\W_]+")

#: Dropped from queries (never from the index) when other terms remain: they match
#: nearly every event and only slow the search down.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does doing for from had has have
    he her hers him his how i if in into is it its me my of on or our ours she so than that
    the their theirs them then there these they this those to too was we were what when
    where which who whom whose why will with would you your yours about any some just also
    very all again ever""".split()  # noqa: SIM905 - a word list reads best as words
)

_jieba_lock = threading.Lock()
_jieba = None


def _load_jieba():  # type: ignore[no-untyped-def]
    """jieba, loaded once and quietly (its dictionary takes ~0.5 s the first time)."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def _han_words(run: str, *, for_index: bool) -> list[str]:
    try:
        jieba = _load_jieba()
    except ImportError:  # without jieba: character bigrams, the same on both sides
        return _bigrams(run)
    words = jieba.cut_for_search(run) if for_index else jieba.cut(run)
    return [w for w in (w.strip() for w in words) if w]


def _bigrams(run: str) -> list[str]:
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def segment(text: str, *, for_index: bool = True) -> str:
    """``text`` with word boundaries made explicit (spaces), for a unicode61 tokenizer."""
    if not text:
        return ""
    out = text
    if _CJK.search(out):
        out = _HAN_RUN.sub(
            lambda m: " " + " ".join(_han_words(m.group(), for_index=for_index)) + " ", out
        )
        out = _KANA_RUN.sub(lambda m: " " + " ".join(_bigrams(m.group())) + " ", out)
    out = _DIGIT_ALPHA.sub(" ", out)
    return out


def fts_text(text: str) -> str:
    """What the FTS index stores for ``text``: segmented words plus bare numbers.

    Total: any failure falls back to the raw text, because this runs inside the
    store's write transaction and must never refuse an event.
    """
    try:
        if not isinstance(text, str):
            text = "" if text is None else str(text)
        body = segment(text, for_index=True)
        extra = [re.sub(r"[,.' ](?=\d{3})", "", m.group()) for m in _SEP_NUMBER.finditer(text)]
        return body + (" \n " + " ".join(extra) if extra else "")
    except Exception:  # pragma: no cover - defensive: the index must take every event
        return text if isinstance(text, str) else ""


def tokens(text: str, *, for_index: bool = False) -> list[str]:
    """Lower-cased terms of ``text`` exactly as the FTS index sees them (no stemming)."""
    return [t.lower() for t in _TOKEN.findall(segment(text, for_index=for_index))]


def query_terms(query: str) -> list[list[str]]:
    """The query's terms, grouped: a written unit (``JOB-7731``) is one phrase of tokens.

    Stopwords are dropped unless nothing else is left; duplicates are removed.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    groups: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for unit in segment(query, for_index=False).split():
        toks = [t.lower() for t in _TOKEN.findall(unit)]
        if toks and tuple(toks) not in seen:
            seen.add(tuple(toks))
            groups.append(toks)
    for g in list(groups):  # "$181/month" also finds "181 per month"
        for t in g:
            if len(g) > 1 and len(t) > 1 and t.isdigit() and (t,) not in seen:
                seen.add((t,))
                groups.append([t])
    for number in _SEP_NUMBER.finditer(query):
        bare = re.sub(r"[,.' ](?=\d{3})", "", number.group())
        if (bare,) not in seen:
            seen.add((bare,))
            groups.append([bare])
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


_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')


def lucene_query(query: str, *, max_terms: int = 64) -> str | None:
    """The same terms as a Lucene query (Neo4j full-text indexes), special chars escaped."""
    groups = query_terms(query)[:max_terms]
    if not groups:
        return None
    parts = []
    for g in groups:
        escaped = " ".join(_LUCENE_SPECIAL.sub(r"\\\1", t) for t in g)
        parts.append(f'"{escaped}"' if len(g) > 1 else escaped)
    return " OR ".join(parts)


def contains_cjk(texts: Iterable[str]) -> bool:
    return any(_CJK.search(t) for t in texts)
