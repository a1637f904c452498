"""Text analysis in one home: scripts, segmentation, tokens, Lucene escaping.

The sentences are written for these tests; jieba is the real segmenter.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import beeweave_core
from beeweave_core.index.chunking import text_size
from beeweave_core.text import language, lucene
from beeweave_core.text.lexical import fts_text, query_terms
from beeweave_core.text.segment import (
    STOPWORDS,
    WORDLIKE_CHAR,
    bare_numbers,
    has_cjk,
    segment,
    tokens,
)

PACKAGE = Path(beeweave_core.__file__).parent


# ------------------------------------------------------------------- scripts
@pytest.mark.parametrize(
    ("text", "cjk"),
    [
        ("我们明天开会", True),  # Han
        ("ひらがな", True),  # hiragana
        ("カタカナ", True),  # katakana
        ("ㇰㇱ", True),  # katakana phonetic extensions
        ("兀", True),  # U+FA0C, compatibility ideograph
        ("회의는 내일입니다", False),  # Hangul: Korean puts spaces between words
        ("plain ASCII, café, naïve", False),
        ("", False),
    ],
)
def test_which_scripts_are_written_without_spaces(text, cjk):
    assert has_cjk(text) is cjk
    assert language.has_cjk(text) is cjk  # the statement rules read the same ranges


def test_a_wide_character_counts_as_a_word_when_sizing():
    assert WORDLIKE_CHAR.search("회") and WORDLIKE_CHAR.search("茶")
    assert not WORDLIKE_CHAR.search("tea")
    assert text_size("회의 tea 绿茶") == 2 + 1 + 2


def test_the_ranges_are_defined_once():
    """No module outside text/segment.py spells a CJK block or Lucene's operators."""
    blocks = re.compile(r"\\u4e00|\\u3040|\\uac00|\u4e00-")
    operators = re.compile(r"AND\|OR\|NOT")
    for path in PACKAGE.rglob("*.py"):
        src = path.read_text(encoding="utf-8")
        rel = path.relative_to(PACKAGE).as_posix()
        if rel != "text/segment.py":
            assert not blocks.search(src), f"{rel} defines a CJK range"
        if rel != "text/lucene.py":
            assert not operators.search(src), f"{rel} escapes Lucene itself"


# -------------------------------------------------------------- segmentation
def test_chinese_is_segmented_into_words():
    toks = tokens("我喜欢在周末喝绿茶")
    assert "绿茶" in toks and "周末" in toks
    assert "我喜欢在周末喝绿茶" not in toks
    # index side: search mode also emits the shorter words inside a long one
    long_word = "图书馆管理员"
    index_side = tokens(long_word, for_index=True)
    assert "图书馆" in index_side and "管理员" in index_side


def test_kana_runs_become_bigrams():
    assert tokens("メロンパン") == ["メロ", "ロン", "ンパ", "パン"]


def test_numbers_glued_to_units_are_split():
    assert tokens("Retry after 90s on api v4") == [
        "retry",
        "after",
        "90",
        "s",
        "on",
        "api",
        "v",
        "4",
    ]
    assert segment("") == ""


def test_bare_numbers_drop_digit_grouping():
    assert bare_numbers("about 3,450 pages and 12.000.000 visits, 7 days") == ["3450", "12000000"]
    assert bare_numbers("no grouped numbers here: 42") == []


def test_index_and_query_sides_agree():
    """Every query token of a text is among the tokens the index stores for it."""
    for text in (
        "Invoice INV-2291 totals 1,480 EUR",
        "我们把会议改到下午三点",
        "ライブラリ v2 の更新",
    ):
        stored = set(tokens(fts_text(text), for_index=True))
        asked = {t for group in query_terms(text) for t in group}
        assert asked <= stored, text


def test_stopwords_only_leave_queries_with_content():
    assert query_terms("where is the umbrella") == [["umbrella"]]
    assert query_terms("what is it")  # only stopwords: kept rather than nothing
    assert "umbrella" not in STOPWORDS


# ---------------------------------------------------------------- Lucene
SYNTAX = '+-!(){}[]^"~*?:\\/&|'


@pytest.mark.parametrize(
    "text",
    [
        "owner:root AND (x OR y)",
        'say "hi" NOT now',
        "a && b || !c",
        "path/to/file~2^3",
        "[a TO z] {k} *?",
        "back\\slash",
    ],  # fmt: skip
)
def test_lucene_escape_leaves_no_syntax(text):
    out = lucene.escape(text)
    unescaped = re.sub(r"\\.", "", out)  # drop every escaped pair
    assert not any(ch in SYNTAX for ch in unescaped), out
    assert not re.search(r"\b(AND|OR|NOT|TO)\b", out)
    # nothing but syntax is changed: unescaping gives the text back, operators lower-cased
    assert re.sub(r"\\(.)", r"\1", out) == re.sub(
        r"\b(AND|OR|NOT|TO)\b", lambda m: m.group().lower(), text
    )


def test_lucene_phrase_is_one_exact_value():
    assert lucene.phrase('team "blue"\\west') == '"team \\"blue\\"\\\\west"'
    assert lucene.phrase("plain") == '"plain"'
