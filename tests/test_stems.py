"""``stem_texts`` gives exactly the tokens the SQLite store's FTS5 index holds for a text
(the Neo4j store ranks them), though it tokenises each distinct word once."""

from __future__ import annotations

import random
import sqlite3

import pytest

from beeweave_core.text import stems

TEXTS = [
    "Résumé of the Øresund crossing: 14 lorries, naïve estimate ≈ 3.5 h",
    "ticket PAY-40217 re-opened;\tsee\u00a0note\u2003below\u3000now",
    "仓库 温度 保持 在 四 度 以下",
    "Heizungsstraße\u200bmodernisiert — 12,75 € pro m²",
    "",
    "  \n  ",
    "running runners ran; RUNS!",
]


def fts5_tokens(texts: list[str]) -> list[list[str]]:
    """The ground truth: a real FTS5 table with the store's tokenizer, whole texts."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE d USING fts5(w, tokenize = '{stems.TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(d, instance)")
    conn.executemany("INSERT INTO d (rowid, w) VALUES (?, ?)", enumerate(texts, 1))
    rows: list[list[tuple[int, str]]] = [[] for _ in texts]
    for term, doc, offset in conn.execute("SELECT term, doc, offset FROM v"):
        rows[doc - 1].append((offset, term))
    return [[t for _o, t in sorted(r)] for r in rows]


def mixed_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "aeiouxyzÉéüß0189-_.,;:'\" \t\n\u00a0\u2009\u200b仓库温度"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50))) for _ in range(n)]


def test_same_tokens_as_whole_text_tokenising() -> None:
    texts = TEXTS + mixed_texts(500, seed=5)
    assert stems.stem_texts(texts) == fts5_tokens(texts)
    assert stems.stem_texts(texts) == fts5_tokens(texts)  # second time from memory


def test_a_small_word_memory_still_gives_every_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stems, "WORDS_KEPT", 20)
    texts = mixed_texts(200, seed=11)
    for i in range(0, len(texts), 40):  # each call overflows the memory
        assert stems.stem_texts(texts[i : i + 40]) == fts5_tokens(texts[i : i + 40])
    assert stems.stem_texts(["the crossings crossed"]) == [["the", "cross", "cross"]]


def test_fts_tokens_are_the_tokens_of_the_fts_text() -> None:
    """Per word segmentation (Chinese, kana, digits glued to letters) and the bare
    form of grouped numbers (also across a space) give what whole texts give."""
    from beeweave_core.text.lexical import fts_text, fts_token_text

    texts = TEXTS + mixed_texts(300, seed=17) + [
        "我们决定把批次大小改成两千行 then 30s later v2 of カタカナ語",
        "paid 1 250 000 and 2,000 then 18.400.000 — and 000 555 x9y",
        "x" * 90 + " 仓库温度保持在四度以下并记录" * 8,
    ]  # fmt: skip
    want = stems.stem_texts([fts_text(t) for t in texts])
    assert [t.split() for t in fts_token_text(texts)] == want
    assert [t.split() for t in fts_token_text(texts)] == want  # second time from memory


def test_bare_numbers_are_every_match_of_a_whole_text_scan() -> None:
    """``bare_numbers`` tries its pattern only near grouped digits: what it finds is
    what scanning every position finds (runs of digits, separators, spaces)."""
    from beeweave_core.text import segment

    rng = random.Random(23)
    texts = ["".join(rng.choice("0123456789,.' x\n") for _ in range(rng.randint(0, 40)))
             for _ in range(3000)] + ["1 250 000 and 2,000.5 then 18.400.000 x9 12'345"]  # fmt: skip
    for text in texts:
        scan = [segment._THOUSANDS_SEP.sub("", m.group())
                for m in segment._SEP_NUMBER.finditer(text)]  # fmt: skip
        assert segment.bare_numbers(text) == scan, text
