"""Where words begin and end: the one segmenter behind every index, search and comparison.

Full-text engines split words on spaces and punctuation.  That finds ``JOB-7731``,
``$181`` or ``orders_nightly`` once both sides are split the same way, but it finds
nothing in Chinese, which is written without spaces (SQLite's ``unicode61`` keeps a
whole Chinese sentence as one token).  So BeeWeave segments text itself, with the
same function wherever words are counted or matched (the FTS index and its queries,
BM25 in the context engine, the similarity of two statements):

* Han runs go through ``jieba`` (search mode at index time, which also emits the
  shorter words inside long ones, and every character of the run); kana runs become
  character bigrams;
* a number glued to a unit or word (``30s``, ``5k``, ``v2``) is also split
  (``30 s``), so the way a user types a number matters less.

No stemming: an exact word, code or number is what lexical search is for; meaning
across inflections is the semantic path's job.
"""

from __future__ import annotations

import logging
import re
import threading
from types import ModuleType

__all__ = [
    "CJK",
    "HAN",
    "HANGUL",
    "KANA",
    "STOPWORDS",
    "WORDLIKE_CHAR",
    "bare_numbers",
    "han_characters",
    "has_cjk",
    "segment",
    "tokens",
    "unit_tokens",
]

#: CJK Unified Ideographs (Extension A, the main block) and the compatibility block.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: Hiragana, katakana and the katakana phonetic extensions.
KANA = "\u3040-\u30ff\u31f0-\u31ff"
#: Precomposed Hangul syllables (Korean is written with spaces, so it is not segmented).
HANGUL = "\uac00-\ud7af"
#: A character of a script written without spaces between words.
CJK = re.compile(f"[{HAN}{KANA}]")
#: A character that carries about a word's worth of text (for sizing texts by words).
WORDLIKE_CHAR = re.compile(f"[{HAN}{KANA}{HANGUL}]")

_HAN_RUN = re.compile(f"[{HAN}]+")
_KANA_RUN = re.compile(f"[{KANA}]+")
_DIGIT_ALPHA = re.compile(r"(?<=\d)(?=[^\W\d_])|(?<=[^\W\d_])(?=\d)")
_SEP_NUMBER = re.compile(r"\d{1,3}(?:[,.' ]\d{3})+(?:\.\d+)?")
#: What every ``_SEP_NUMBER`` match holds (see ``bare_numbers``).
_GROUPED_DIGITS = re.compile(r"\d[,.' ]\d{3}")
_THOUSANDS_SEP = re.compile(r"[,.' ](?=\d{3})")
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
_jieba: ModuleType | None = None


def _load_jieba() -> ModuleType:
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


def has_cjk(text: str) -> bool:
    return bool(CJK.search(text or ""))


def _han_words(run: str, *, for_index: bool) -> list[str]:
    try:
        jieba = _load_jieba()
    except ImportError:  # without jieba: character bigrams, the same on both sides
        return _bigrams(run)
    words = jieba.cut_for_search(run) if for_index else jieba.cut(run)
    out = [w for w in (w.strip() for w in words) if w]
    if for_index:  # the characters too, so a question's one-character word finds them
        singles = {w for w in out if len(w) == 1}
        out += [c for c in run if c not in singles]
    return out


def han_characters(word: str) -> list[str]:
    """The characters of a Chinese word of two or more, as extra query terms.

    The index holds every Han character beside jieba's words, so a question that
    words a thing differently (``车`` for ``车队``, ``上传`` for ``传到``) still shares
    terms with the turn; BM25 weighs the shared characters by how rare they are.
    """
    return list(word) if len(word) > 1 and _HAN_RUN.fullmatch(word) else []


def _bigrams(run: str) -> list[str]:
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def segment(text: str, *, for_index: bool = True) -> str:
    """``text`` with word boundaries made explicit (spaces), for a unicode61 tokenizer."""
    if not text:
        return ""
    out = text
    if CJK.search(out):
        out = _HAN_RUN.sub(
            lambda m: " " + " ".join(_han_words(m.group(), for_index=for_index)) + " ", out
        )
        out = _KANA_RUN.sub(lambda m: " " + " ".join(_bigrams(m.group())) + " ", out)
    out = _DIGIT_ALPHA.sub(" ", out)
    return out


def tokens(text: str, *, for_index: bool = False) -> list[str]:
    """Lower-cased terms of ``text`` exactly as the FTS index sees them (no stemming)."""
    return [t.lower() for t in _TOKEN.findall(segment(text, for_index=for_index))]


def unit_tokens(unit: str) -> list[str]:
    """Lower-cased tokens of one already segmented unit (``JOB-7731`` → ``job``, ``7731``)."""
    return [t.lower() for t in _TOKEN.findall(unit)]


def bare_numbers(text: str) -> list[str]:
    """Numbers written with separators, bare (``2,000`` / ``18.400.000`` → ``2000`` /
    ``18400000``), so the way a user groups digits matters less.

    The matches of ``_SEP_NUMBER`` over the whole text, found faster: each holds a
    ``_GROUPED_DIGITS`` at most two characters after its start, so the full pattern
    is tried only from there (most of a text is skipped by the simpler pattern).
    """
    found, pos = [], 0
    while (hint := _GROUPED_DIGITS.search(text, pos)) is not None:
        m = _SEP_NUMBER.search(text, max(pos, hint.start() - 2))
        if m is None:  # pragma: no cover - the hint itself starts a match
            break
        found.append(_THOUSANDS_SEP.sub("", m.group()))
        pos = m.end()
    return found
