"""The SQLite store's full-text tokenizer as a function, for indexes that are not SQLite.

The Neo4j store ranks the very tokens the SQLite FTS5 index holds, so both stores
find and rank the same events: Lucene's English analyzer splits, stems and drops
stop words its own way (``hiking`` and ``hike``, numbers, codes).  Rather than
imitate FTS5's tokenizer, this asks it: an in-memory FTS5 table with the same
tokenizer, read back in order through ``fts5vocab``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence

__all__ = ["TOKENIZER", "stem_strings", "stem_texts"]

#: The tokenizer of the SQLite store's ``events_fts`` table.
TOKENIZER = "porter unicode61 remove_diacritics 2"

#: Distinct words whose tokens are remembered (then forgotten all at once).
WORDS_KEPT = 200_000
#: Longer words (a Chinese sentence has no spaces) are tokenised every time.
WORD_CHARS_KEPT = 64

_lock = threading.Lock()
_conn: sqlite3.Connection | None = None
#: Per ``prepare`` function (None: the word as it is), each word's tokens as text.
_words: dict[Callable[[str], str] | None, dict[str, str]] = {}


def _connection() -> sqlite3.Connection:
    global _conn
    if _conn is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        # contentless: only the index is kept, and ``delete-all`` empties it at once
        conn.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(w, content = '', tokenize = '{TOKENIZER}')"
        )
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        _conn = conn
    return _conn


def stem_texts(
    texts: Sequence[str], *, prepare: Callable[[str], str] | None = None
) -> list[list[str]]:
    """Each text's tokens as the FTS5 index stores them (lower-cased, stemmed), in order.

    ``prepare`` rewrites each word before it is tokenised (see :func:`stem_strings`).
    """
    return [s.split() for s in stem_strings(texts, prepare=prepare)]


def stem_strings(texts: Sequence[str], *, prepare: Callable[[str], str] | None = None) -> list[str]:
    """Each text's tokens (as :func:`stem_texts`) joined by single spaces.

    FTS5's tokens never span white space, so each distinct word is tokenised once
    (and remembered, up to :data:`WORDS_KEPT` words) and a text is its words' tokens:
    the same result as tokenising the text whole, at a dictionary lookup per word
    (Neo4j appends compute every event's terms on the write path).  ``prepare``
    rewrites each word before it is tokenised (segmentation); it must act on a
    word as it acts on the word inside any text, which a function that never
    looks across white space does.
    """
    if not texts:
        return []
    split = [t.split() for t in texts]
    with _lock:
        words = _words.setdefault(prepare, {})
        missing = [w for w in set().union(*split) if w not in words]
        if len(words) + len(missing) > WORDS_KEPT:
            words.clear()  # a bounded memory: the words of purged text go too
            missing = list(set().union(*split))
        if missing:
            prepared = [prepare(w) for w in missing] if prepare else missing
            words.update(zip(missing, map(" ".join, _tokenise(prepared)), strict=True))
        look = words.__getitem__
        out = [" ".join(filter(None, map(look, ws))) for ws in split]
        for w in missing:
            if len(w) > WORD_CHARS_KEPT:
                del words[w]
        return out


def _tokenise(texts: Sequence[str]) -> list[tuple[str, ...]]:
    """Each text's tokens in order, read back from an in-memory FTS5 index."""
    found: list[list[tuple[int, str]]] = [[] for _ in texts]
    conn = _connection()
    try:
        conn.executemany("INSERT INTO t (rowid, w) VALUES (?, ?)", enumerate(texts, 1))
        for term, doc, offset in conn.execute("SELECT term, doc, offset FROM v"):
            found[doc - 1].append((offset, term))
    finally:
        conn.execute("INSERT INTO t (t) VALUES ('delete-all')")
    return [tuple(t for _o, t in sorted(row)) for row in found]
