"""User text inside a Lucene query (Neo4j's full-text index), as text and never as syntax.

Lucene's classic query parser gives meaning to ``+ - ! ( ) { } [ ] ^ " ~ * ? : \\ /``,
to ``&&`` / ``||`` and to the upper-case words ``AND OR NOT TO``.  A question an
agent relays ("tenant:other", "a AND NOT b", "/regex/") must neither change the
query's structure nor name another field, so every syntax character is
backslash-escaped and the operator words are lower-cased (Lucene's analyzers
lower-case terms anyway, so matching is unchanged).

The Neo4j store's full-text index does not analyse text itself: it holds, and is
asked, the tokens of the SQLite store's FTS5 index (:mod:`~beeweave_core.text.stems`),
so the two stores rank the same words: :func:`session_terms` writes them,
:func:`match_query` asks for them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from beeweave_core.text.lexical import CONTEXT_CHARS, fts_token_text, query_terms
from beeweave_core.text.stems import stem_texts

__all__ = [
    "BODY_REPEAT",
    "Turn",
    "context_terms",
    "escape",
    "match_query",
    "phrase",
    "session_terms",
    "turn_tokens",
]

#: An event's own tokens are written this many times into its indexed text, its
#: previous turn's once: the SQLite store weights the previous turn half
#: (``bm25(events_fts, 1.0, 0.5)``), and FTS5 adds the weighted counts of both
#: columns into one term frequency over one length, which is what one Lucene field
#: holding both texts computes (scaled by 2; a field has no weight per word).
BODY_REPEAT = 2

_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')
_OPERATOR = re.compile(r"\b(AND|OR|NOT|TO)\b")


def escape(text: str) -> str:
    """``text`` as a plain list of words for Lucene's query parser."""
    return _OPERATOR.sub(lambda m: m.group(1).lower(), _SPECIAL.sub(r"\\\1", text))


def phrase(value: str) -> str:
    """``value`` as one quoted Lucene phrase (an exact field value: a tenant, a session id)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: One event's tokens as text: its own, and those that stand for it as the next
#: event's previous turn (``None`` for an empty content, which passes the turn on).
Turn = tuple[str, str | None]


def turn_tokens(contents: Sequence[str]) -> list[Turn]:
    """Each content's :data:`Turn`: its own tokens and those of its first
    :data:`~beeweave_core.text.lexical.CONTEXT_CHARS` characters."""
    texts = list(contents)
    long = [i for i, t in enumerate(texts) if len(t) > CONTEXT_CHARS]
    tokens = fts_token_text(texts + [texts[i][:CONTEXT_CHARS] for i in long])
    heads = {i: tokens[len(texts) + j] for j, i in enumerate(long)}
    return [
        (own, heads.get(i, own) if text else None)
        for i, (own, text) in enumerate(zip(tokens, texts, strict=False))
    ]


def context_terms(text: str) -> str:
    """The tokens that stand for ``text`` as the next event's previous turn."""
    return turn_tokens([text])[0][1] or ""


def session_terms(turns: Sequence[Turn], context: str = "") -> tuple[list[str], str]:
    """The indexed text of consecutive events of one session (their
    :func:`turn_tokens`), in order, and the context the event after them gets.

    Each is its own tokens (:data:`BODY_REPEAT` times) and those of the first
    :data:`~beeweave_core.text.lexical.CONTEXT_CHARS` characters of the last event
    before it with any content (``context`` for the first, :func:`context_terms`
    of that event), as the SQLite store's ``events_fts`` row holds them: what a
    reply answers is part of its text.
    """
    out = []
    for own, head in turns:
        out.append(" ".join(filter(None, [own] * BODY_REPEAT + [context])))
        if head is not None:
            context = head
    return out, context


def match_query(query: str, *, max_terms: int = 64) -> str | None:
    """``query`` as Lucene clauses over :func:`session_terms` text: one quoted phrase
    per query term (a written unit such as ``JOB-7731`` is one phrase), stemmed and
    filtered like the SQLite store's FTS query; ``None`` when nothing is searchable."""
    groups = query_terms(query)[:max_terms]
    stemmed = stem_texts([" ".join(g) for g in groups])
    phrases = dict.fromkeys(" ".join(s) for s in stemmed if s)
    return " ".join(phrase(p) for p in phrases) or None
