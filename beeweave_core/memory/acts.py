"""Speech acts: what a sentence *does* — states something to remember, asks, agrees, chats.

Only statements become memories: a decision, a constraint, a preference or a fact about
the user or the task.  A task asked for, a question, an acknowledgement, a refusal and
small talk stay events (they are still in the transcript and still recalled as turns).
The decision is a small linear classifier (softmax regression) over the offline MiniLM
sentence embedding, hashed words and word pairs (their weights are learned, not listed),
and a few shape features (a question mark, digits and codes, length, script, symbols).  Its weights ship in
``beeweave_core/data/acts-minilm.npz``; ``beeweave bench acts`` trains them on generated
sentences of domains no benchmark uses and reports them on sentences written apart.
"""

from __future__ import annotations

import functools
import math
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from zlib import crc32

import numpy as np

from beeweave_core.memory.vectors import embed
from beeweave_core.text import segment

ACTS = (
    "decision",
    "constraint",
    "preference",
    "fact",
    "task",
    "question",
    "ack",
    "decline",
    "chatter",
)
#: The acts that are remembered (a memory's kind is the act).
STATEMENTS = frozenset({"decision", "constraint", "preference", "fact"})
#: Replies that take up what the other side proposed (accept it, or turn it down).
REPLIES = frozenset({"ack", "decline"})
WEIGHTS = Path(__file__).resolve().parent.parent / "data" / "acts-minilm.npz"

_CODE = re.compile(r"[A-Za-z]+[-_]?\d|\d+[A-Za-z]")
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"[^\W_]+")


#: Hashed word and word-pair features (learned weights over the words a sentence uses,
#: in any language: the classifier learns which words mark an act, no list is written).
HASH_DIM = 16384


def words(text: str) -> np.ndarray:
    """Binary hashed features of a sentence's lower-cased words and adjacent word pairs
    (Chinese segmented); the hash is stable across runs (CRC32)."""
    toks = [t.casefold() for t in segment.tokens(text)]
    vec = np.zeros(HASH_DIM, dtype=np.float32)
    grams = toks + [f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False)]
    for g in grams:
        vec[crc32(g.encode("utf-8")) % HASH_DIM] = 1.0
    return vec


def shape(text: str) -> list[float]:
    """Features of a sentence's form that need no vocabulary."""
    t = text.strip()
    n = len(t) or 1
    cjk = len(segment.CJK.findall(t))
    symbols = sum(1 for ch in t if unicodedata.category(ch) == "So")
    words = len(_WORD.findall(t)) + cjk
    return [
        1.0 if t.endswith(("?", "？")) else 0.0,
        1.0 if ("?" in t or "？" in t) else 0.0,
        1.0 if _DIGIT.search(t) else 0.0,
        1.0 if _CODE.search(t) else 0.0,
        math.log1p(words),
        cjk / n,
        1.0 if symbols else 0.0,
        1.0 if t.endswith(("!", "！")) else 0.0,
    ]


@dataclass(frozen=True)
class ActModel:
    """Weights of the classifier: ``w`` (features × acts), ``b``, the shape features'
    mean and scale, and the embedding model they were trained on."""

    w: np.ndarray
    b: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    acts: tuple[str, ...]
    embedder: str

    @classmethod
    def load(cls, path: Path = WEIGHTS) -> ActModel:
        data = np.load(path, allow_pickle=False)
        return cls(
            data["w"],
            data["b"],
            data["mean"],
            data["scale"],
            tuple(str(a) for a in data["acts"]),
            str(data["embedder"]),
        )

    def save(self, path: Path) -> None:
        np.savez_compressed(
            path,
            w=self.w,
            b=self.b,
            mean=self.mean,
            scale=self.scale,
            acts=np.array(self.acts),
            embedder=np.array(self.embedder),
        )

    def features(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        shapes = (np.array([shape(t) for t in texts], dtype=np.float32) - self.mean) / self.scale
        hashed = np.vstack([words(t) for t in texts]) if texts else np.zeros((0, HASH_DIM))
        return np.hstack([vectors.astype(np.float32), shapes, hashed])

    def probabilities(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        return softmax(self.features(vectors, texts) @ self.w + self.b)


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


_lock = threading.Lock()  # guards the cache below


@functools.cache
def model() -> ActModel:
    """The shipped classifier (loaded once)."""
    return ActModel.load()


#: Acts already decided, by sentence (chat repeats itself; a batch is decided at once).
_CACHE_MAX = 50_000
_known: dict[str, str] = {}


def classify(texts: Sequence[str]) -> list[str]:
    """The act of each sentence; the ones not seen before in one model run."""
    todo = list(dict.fromkeys(t for t in texts if t not in _known))
    if todo:
        m = model()
        probs = m.probabilities(embed(todo), todo)
        with _lock:
            if len(_known) + len(todo) > _CACHE_MAX:
                _known.clear()
            for t, i in zip(todo, probs.argmax(axis=1), strict=True):
                _known[t] = m.acts[int(i)]
    return [_known.get(t) or classify([t])[0] for t in texts]


__all__ = ["ACTS", "REPLIES", "STATEMENTS", "ActModel", "classify", "model", "shape", "words"]
