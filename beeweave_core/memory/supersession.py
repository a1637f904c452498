"""Supersession by meaning: does a newer statement give another value to the setting an
older one set?

Whatever the wording — a cue word or none, a negation ("not 15 anymore: 16"), a reason
given first, a cancellation and its replacement in one sentence — two statements about
the same setting say the same thing once their values are masked, and differ in a value
of the same kind.  Look-alike items differ in what names them (an id, an object): their
masked texts are close, but each keeps a value the other lacks.  So a pair is judged on
features that need no vocabulary:

* the cosine of the two sentences' embeddings with values masked, and unmasked;
* how many content words they share (Jaccard, and containment of the shorter);
* their values: shared, new in the later one, the older one's repeated, a value of the
  same kind (unit, prefix) changed, two identifiers of one pattern that differ;
* how far apart they were said, and who said each.

A logistic regression over these scores the pair; the weights and the threshold ship in
``beeweave_core/data/supersession-minilm.npz``, fitted by ``beeweave bench supersession``
on the development conversations with the threshold chosen by leave-one-conversation-out
cross-validation (both errors reported: a change missed, a live item merged away).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from beeweave_core.memory.vectors import embed
from beeweave_core.text import language as L
from beeweave_core.text import segment

WEIGHTS = Path(__file__).resolve().parent.parent / "data" / "supersession-minilm.npz"
FEATURES = (
    "cos_masked",
    "cos_raw",
    "jaccard",
    "containment",
    "shared_value",
    "new_value",
    "old_values_repeated",
    "kind_changed",
    "id_conflict",
    "both_valued",
    "log_distance",
    "new_by_user",
    "old_by_user",
    "char_overlap",
)
#: Masked-text cosine above which two statements are one sentence said again.
SAME_SENTENCE = 0.97
#: Candidates compared per new statement (the nearest by masked meaning).
NEAREST = 24

_NUM = re.compile(
    r"(?P<pre>[$€£¥])?(?P<num>\d+(?:[.,:]\d+)*)(?:(?P<suf>%|[A-Za-z]{1,12}\b|["
    + segment.HAN
    + r"]{1,2})|\s(?P<measure>["
    + segment.HAN
    + r"]))?"
)
#: Names: a run of capitalised words inside a sentence (one opening it is not told
#: from a capitalised first word; counting those moved both errors by the same amount).
_CAP = re.compile(r"(?<=[\w,;:] )[A-Z][\w'-]*(?: [A-Z][\w'-]*)*")
#: Short codes a word-level identifier test leaves out (``W7``, ``B12``, ``v2``).
_SHORT_CODE = re.compile(r"\b[A-Za-z]{1,4}\d+[A-Za-z\d]*\b")
_ID_PATTERN = re.compile(r"[A-Za-z]+|\d+")
#: A whole number right after a word (``locker 12``, ``bed 7``, ``room 215``): it names
#: the thing the word says (a label), or gives a setting its value (``port 8080``).
_LABEL = re.compile(r"\b([A-Za-z]{3,})\s#?(\d+)\b(?![.,:]\d|%)")
#: A Chinese statement opening on a numbered item (``10号柜子…``, ``3号床…``): 号 marks
#: the number as the item's label, the characters after it say what it labels.
_ZH_LABEL = re.compile(r"\s*(\d+)\s*号\s*([" + segment.HAN + r"]{1,2})")
#: Words (stopwords aside) at most before a label that opens a statement (``Greenhouse
#: bed 7 ...``, ``The courier van number 40 ...``): it names what the statement is about.
_SUBJECT_WITHIN = 2
#: An amount an identifier pattern also matches: an optional currency sign, digits, at
#: most two letters of unit (``k``, ``ms``), or a range of two such.
_AMOUNT = r"[$€£¥]?\d[\d.,]*[A-Za-z]{0,2}"
_QUANTITY = re.compile(rf"{_AMOUNT}(?:[-–~]{_AMOUNT})?")
#: A Chinese word that is a number with its measure (九折, 两百万, 第三季度): numerals,
#: then at most two characters.  A lone 一 starts ordinary words (一起, 一下), so it
#: counts only with another numeral.
_ZH_NUMBER = re.compile(
    r"第?(?P<num>[零〇一二两三四五六七八九十百千万亿]+)(?P<unit>[^零〇一二两三四五六七八九十百千万亿]{0,2})"
)


@dataclass(frozen=True)
class Value:
    """One value a sentence gives: its text, its kind (a unit, a prefix, ``name``)."""

    text: str
    kind: str


def values(text: str) -> list[Value]:
    """The values of a sentence: numbers with their unit, identifiers, quoted text,
    names (capitalised words inside a sentence), Latin runs inside Chinese."""
    out: dict[str, Value] = {}
    for ident in [*L.identifiers(text), *_SHORT_CODE.findall(text)]:
        if _QUANTITY.fullmatch(ident):  # "$90k-$110k", "5k": an amount, not a code
            unit = "".join(c for c in ident if not (c.isdigit() or c in ".,-–~"))
            out.setdefault(ident.casefold(), Value(ident, "num:" + unit.casefold()))
        elif any(c.isdigit() for c in ident):
            out.setdefault(ident.casefold(), Value(ident, "id:" + _shape(ident)))
    for m in _NUM.finditer(text):
        # a measure word after a space ("20 斤") names the kind; it stays in the text
        span = (m.group("pre") or "") + m.group("num") + (m.group("suf") or "")
        if any(span.casefold() in k for k in out if not k.isdigit()):  # inside a code
            continue
        unit = (m.group("pre") or "") + (m.group("suf") or m.group("measure") or "")
        out.setdefault(span.casefold(), Value(span, "num:" + unit.casefold()))
    for q in L.quoted(text):
        out.setdefault(q.casefold(), Value(q, "quoted"))
    for name in _CAP.findall(text):
        if name.casefold() not in out:
            out[name.casefold()] = Value(name, "name")
    if segment.has_cjk(text):
        for word in segment.tokens(text):
            m = _ZH_NUMBER.fullmatch(word)
            if m and m.group("num") != "一" and word not in out:
                out[word] = Value(word, "num:" + m.group("unit"))
        for run in re.findall(r"[A-Za-z][A-Za-z0-9 ._-]*[A-Za-z0-9]|[A-Za-z]", text):
            if run.casefold() not in out and not any(run.casefold() in k for k in out):
                out[run.casefold()] = Value(run, "latin")
    return list(out.values())


def subject_of(text: str) -> tuple[str, str] | None:
    """``(word, number)`` of a label opening ``text`` (``Greenhouse bed 7 grows ...``):
    what the statement is about, named by a number."""
    zh = _ZH_LABEL.match(text)
    if zh is not None:
        return zh.group(2), zh.group(1)
    m = _LABEL.search(text)
    if m is None or m.group(1).casefold() in segment.STOPWORDS:
        return None
    before = [t for t in segment.tokens(text[: m.start()]) if t not in segment.STOPWORDS]
    if len(before) >= _SUBJECT_WITHIN:
        return None
    return m.group(1).casefold(), m.group(2)


def _shape(ident: str) -> str:
    """An identifier's pattern: its letters, and how many digit groups (``TRL-#``)."""
    parts = _ID_PATTERN.findall(ident)
    return "".join(p.casefold() if p.isalpha() else "#" for p in parts)


def mask(text: str, found: Sequence[Value]) -> str:
    """``text`` with its values replaced by one placeholder word."""
    out = text
    for v in sorted(found, key=lambda v: len(v.text), reverse=True):
        out = out.replace(v.text, " X ")
    return " ".join(out.split())


def char_grams(masked: str) -> frozenset[str]:
    """Character bigrams of a masked sentence's letters (spaces and punctuation out):
    a word-boundary-free view of what it is about, read alike in Chinese and English."""
    chars = "".join(segment.CJK.findall(masked))
    return frozenset(chars[i : i + 2] for i in range(len(chars) - 1))


def content_words(text: str, found: Sequence[Value]) -> frozenset[str]:
    """The words a statement is about: its tokens without stopwords and values."""
    vals = {t for v in found for t in segment.tokens(v.text)}
    return frozenset(
        t
        for t in segment.tokens(text)
        if t not in segment.STOPWORDS and t not in vals and not t.isdigit()
    )


@dataclass
class Said:
    """A statement as supersession compares it (embeddings unit length)."""

    id: str
    text: str
    seq: int
    by_user: bool
    found: list[Value] = field(default_factory=list)
    words: frozenset[str] = frozenset()
    grams: frozenset[str] = frozenset()
    masked_vec: np.ndarray | None = None
    raw_vec: np.ndarray | None = None
    subject: tuple[str, str] | None = None  # see subject_of

    @property
    def value_keys(self) -> set[str]:
        return {v.text.casefold() for v in self.found}


def prepare(items: Sequence[tuple[str, str, int, bool]]) -> list[Said]:
    """``(id, text, seq, said by the user)`` as statements, embedded in one model run."""
    out = []
    for i, text, seq, by_user in items:
        found = values(text)
        words, grams = content_words(text, found), char_grams(mask(text, found))
        out.append(Said(i, text, seq, by_user, found, words, grams, subject=subject_of(text)))
    if out:
        vecs = embed([mask(s.text, s.found) for s in out] + [s.text for s in out])
        for n, s in enumerate(out):
            s.masked_vec, s.raw_vec = vecs[n], vecs[len(out) + n]
    return out


def warm(texts: Sequence[str]) -> None:
    """Compute in one model run the vectors :func:`prepare` will ask for ``texts``."""
    found = [values(t) for t in texts]
    embed([mask(t, f) for t, f in zip(texts, found, strict=True)] + list(texts))


def features(old: Said, new: Said) -> list[float]:
    """The pair's features, in :data:`FEATURES` order."""
    a, b = old.value_keys, new.value_keys
    kinds_a = {v.kind: v.text.casefold() for v in old.found}
    kind_changed = any(
        v.kind in kinds_a and kinds_a[v.kind] != v.text.casefold()
        for v in new.found
        if v.kind != "name"
    )
    ids_a = {v.kind: v.text.casefold() for v in old.found if v.kind.startswith("id:")}
    ids_b = {v.kind: v.text.casefold() for v in new.found if v.kind.startswith("id:")}
    shared_id = set(ids_a.values()) & set(ids_b.values())
    id_conflict = any(k in ids_a and ids_a[k] != t for k, t in ids_b.items()) and not shared_id
    union = old.words | new.words
    inter = old.words & new.words
    return [
        float(old.masked_vec @ new.masked_vec) if old.masked_vec is not None else 0.0,
        float(old.raw_vec @ new.raw_vec) if old.raw_vec is not None else 0.0,
        len(inter) / len(union) if union else 0.0,
        len(inter) / min(len(old.words), len(new.words)) if old.words and new.words else 0.0,
        1.0 if a & b else 0.0,
        1.0 if b - a else 0.0,
        len(a & b) / len(a) if a else 0.0,
        1.0 if kind_changed else 0.0,
        1.0 if id_conflict else 0.0,
        1.0 if a and b else 0.0,
        math.log1p(max(0, new.seq - old.seq)),
        1.0 if new.by_user else 0.0,
        1.0 if old.by_user else 0.0,
        _dice(old.grams, new.grams),
    ]


def _labels_conflict(old: Said, new: Said) -> bool:
    """Two records of a list: both open on one word and a number, the numbers differ
    (``Locker 12 holds ...``, ``Locker 25 holds ...``), and each says something the
    other does not (a word of its own on both sides, or another value).  The same
    record given another number says nothing else new (``Build 110 is the release
    candidate``, then ``Build 138 ...``; ``Use port 8080.``, then ``Use port 9090 from
    now on.``): left to the scorer."""
    a, b = old.subject, new.subject
    if a is None or b is None or a[0] != b[0] or a[1] == b[1]:
        return False
    own = bool(old.words - new.words) and bool(new.words - old.words)
    return own or bool(new.value_keys - old.value_keys - {b[1]})


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


@dataclass(frozen=True)
class Scorer:
    """Logistic regression weights over :data:`FEATURES` and the decision threshold."""

    w: np.ndarray
    b: float
    threshold: float

    @classmethod
    def load(cls, path: Path = WEIGHTS) -> Scorer:
        data = np.load(path, allow_pickle=False)
        return cls(data["w"], float(data["b"]), float(data["threshold"]))

    def save(self, path: Path) -> None:
        np.savez_compressed(
            path,
            w=self.w,
            b=np.array(self.b),
            threshold=np.array(self.threshold),
            features=np.array(FEATURES),
        )

    def probability(self, f: Sequence[float]) -> float:
        z = float(np.dot(self.w, np.asarray(f, dtype=np.float64)) + self.b)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def replaces(self, old: Said, new: Said) -> bool:
        """Does ``new`` give ``old``'s setting another value?"""
        return self.decides(features(old, new))

    def choose(
        self, new: Said, olds: Sequence[Said], feats: Sequence[Sequence[float]]
    ) -> list[int]:
        """Which of ``olds`` (nearest first, with the pairs' features) ``new`` replaces:
        the one it most likely gives another value to, if any passes.  One statement
        changes one setting; taking every candidate over the threshold let a sentence
        with one new value replace two settings that share its unit (a rollout share and
        a crash-rate floor, both in %), and the one it did not change was lost."""
        passed = [
            k for k, f in enumerate(feats) if self.decides(f) and not _labels_conflict(olds[k], new)
        ]
        return [max(passed, key=lambda k: self.probability(feats[k]))] if passed else []

    def decides(self, f: Sequence[float]) -> bool:
        """The decision on a pair's features.  Two rules come before the score, as both
        hold whatever the wording: two items named by identifiers of one pattern that
        differ (two tickets, two orders) are two items; and the same sentence said again
        with every value of a kind changed and none kept (``45-minute slots`` then
        ``60-minute slots``) is a change, however close its words are to the old ones
        (the regression, fitted mostly on reworded changes, scores a bare restatement
        low)."""
        at = FEATURES.index
        if f[at("id_conflict")]:
            return False
        if (
            f[at("cos_masked")] >= SAME_SENTENCE
            and f[at("containment")] >= 1.0
            and f[at("kind_changed")]
            and not f[at("shared_value")]
        ):
            return True
        return self.probability(f) >= self.threshold


@functools.cache
def scorer() -> Scorer:
    """The shipped scorer (loaded once)."""
    return Scorer.load()


class Index:
    """The statements in force in one session, and which a new one replaces.

    Updated one statement at a time (:meth:`observe`), so a caller holding a cursor never
    re-reads a session; a new statement is compared with the :data:`NEAREST` live ones
    closest to it by masked meaning (one matrix product over rows kept in a growing
    array: adding or forgetting one never copies the others).
    """

    def __init__(self, judge: Scorer | None = None) -> None:
        self.judge = judge
        self._rows: list[Said | None] = []
        self._row_of: dict[str, int] = {}
        self._matrix = np.zeros((16, 0), dtype=np.float32)

    def __contains__(self, said_id: str) -> bool:
        return said_id in self._row_of

    def __len__(self) -> int:
        return len(self._row_of)

    def replaced_by(self, new: Said) -> list[str]:
        """Ids of the live statements ``new`` gives another value to."""
        if not self._row_of or new.masked_vec is None:
            return []
        judge = self.judge or scorer()
        n = len(self._rows)
        sims = self._matrix[:n] @ new.masked_vec
        alive = np.array([r is not None for r in self._rows])
        sims = np.where(alive, sims, -np.inf)
        near = [
            old
            for k in np.argsort(-sims)[: min(NEAREST, len(self._row_of))]
            if (old := self._rows[int(k)]) is not None and old.seq <= new.seq
        ]
        chosen = judge.choose(new, near, [features(old, new) for old in near])
        return [near[k].id for k in chosen]

    def add(self, said: Said) -> None:
        vec = said.masked_vec
        if vec is None:
            return
        self.forget(said.id)
        n = len(self._rows)
        if self._matrix.shape[1] != vec.shape[0]:
            self._matrix = np.zeros((max(16, n * 2), vec.shape[0]), dtype=np.float32)
        elif n >= self._matrix.shape[0]:
            grown = np.zeros((n * 2, vec.shape[0]), dtype=np.float32)
            grown[:n] = self._matrix[:n]
            self._matrix = grown
        self._matrix[n] = vec
        self._rows.append(said)
        self._row_of[said.id] = n

    def forget(self, said_id: str) -> None:
        n = self._row_of.pop(said_id, None)
        if n is not None:
            self._rows[n] = None

    def live(self) -> list[Said]:
        return [r for r in self._rows if r is not None]


__all__ = [
    "FEATURES",
    "Index",
    "Said",
    "Scorer",
    "features",
    "mask",
    "prepare",
    "scorer",
    "values",
    "warm",
]
