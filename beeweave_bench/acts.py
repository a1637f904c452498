"""``beeweave bench acts``: train the speech-act classifier and judge it on sentences
written apart.

Training data: :mod:`beeweave_bench.acts_corpus` (generated, domains no benchmark uses).
The L2 strength is chosen by cross-validation that holds whole *frames* out (a fold
never sees the sentence shapes it is scored on); the model is then fitted on all of it
and judged on :mod:`beeweave_bench.acts_heldout` (written freehand, other domains).
What the memory writer needs most is reported beside accuracy: of the sentences that
state something, how many are taken as statements (recall), and of those taken as
statements, how many do (precision) — small talk or a question taken for a statement
is the error that fills memory with noise.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from beeweave_bench.acts_corpus import Labelled, corpus
from beeweave_bench.acts_heldout import EN, ZH
from beeweave_core.memory.acts import ACTS, STATEMENTS, WEIGHTS, ActModel, shape, softmax, words

#: L2 strengths the cross-validation chooses among.
GRID = (1e-4, 1e-3, 1e-2)
FOLDS = 4
EPOCHS = 300


def embed(texts: Sequence[str]) -> np.ndarray:
    """The vectors the memory writer gives the classifier (the same model, run alike)."""
    from beeweave_core.memory import vectors

    return vectors.embed(texts)


def fit(
    x: np.ndarray, y: np.ndarray, l2: float, shapes: np.ndarray, hashed: np.ndarray
) -> ActModel:
    """Softmax regression (class-balanced, L2), by Adam on the full batch."""
    mean = shapes.mean(axis=0)
    scale = shapes.std(axis=0) + 1e-6
    feats = np.hstack([x, (shapes - mean) / scale, hashed]).astype(np.float32)
    n, d = feats.shape
    k = len(ACTS)
    onehot = np.eye(k, dtype=np.float32)[y]
    counts = np.bincount(y, minlength=k).astype(np.float32)
    sample_w = (n / (k * np.maximum(counts, 1)))[y][:, None].astype(np.float32)
    w = np.zeros((d, k), dtype=np.float32)
    b = np.zeros(k, dtype=np.float32)
    l2 = np.float32(l2)
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)
    lr, b1, b2 = np.float32(0.05), np.float32(0.9), np.float32(0.999)
    for t in range(1, EPOCHS + 1):
        p = softmax(feats @ w + b)
        g = (p - onehot) * sample_w / n
        gw = feats.T @ g + l2 * w
        gb = g.sum(axis=0)
        mw, vw = b1 * mw + (1 - b1) * gw, b2 * vw + (1 - b2) * gw**2
        mb, vb = b1 * mb + (1 - b1) * gb, b2 * vb + (1 - b2) * gb**2
        w -= lr * (mw / (1 - b1**t)) / (np.sqrt(vw / (1 - b2**t)) + 1e-8)
        b -= lr * (mb / (1 - b1**t)) / (np.sqrt(vb / (1 - b2**t)) + 1e-8)
    return ActModel(
        w.astype(np.float32),
        b.astype(np.float32),
        mean.astype(np.float32),
        scale.astype(np.float32),
        ACTS,
        "minilm",
    )


def _predict(m: ActModel, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    return m.probabilities(x, texts).argmax(axis=1)


def cross_validate(
    data: Sequence[Labelled], x: np.ndarray, shapes: np.ndarray, hashed: np.ndarray
) -> dict[float, float]:
    """Accuracy per L2 strength, each fold holding out whole frames."""
    frames = sorted({d.frame for d in data})
    random.Random(3).shuffle(frames)
    fold_of = {f: i % FOLDS for i, f in enumerate(frames)}
    folds = np.array([fold_of[d.frame] for d in data])
    y = np.array([ACTS.index(d.act) for d in data])
    texts = [d.text for d in data]
    out: dict[float, float] = {}
    for l2 in GRID:
        right = 0
        for f in range(FOLDS):
            tr, te = folds != f, folds == f
            m = fit(x[tr], y[tr], l2, shapes[tr], hashed[tr])
            right += int(
                (
                    _predict(m, x[te], [t for t, k in zip(texts, te, strict=True) if k]) == y[te]
                ).sum()
            )
        out[l2] = right / len(data)
    return out


def judge(m: ActModel, items: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Accuracy, statement precision/recall and the confusions on labelled sentences."""
    texts = [t for t, _ in items]
    got = [m.acts[i] for i in _predict(m, embed(texts), texts)]
    want = [a for _, a in items]
    said = [w in STATEMENTS for w in want]
    taken = [g in STATEMENTS for g in got]
    tp = sum(a and b for a, b in zip(said, taken, strict=True))
    wrong = Counter((w, g) for w, g in zip(want, got, strict=True) if w != g)
    return {
        "n": len(items),
        "accuracy": sum(w == g for w, g in zip(want, got, strict=True)) / len(items),
        "statement_recall": tp / max(1, sum(said)),
        "statement_precision": tp / max(1, sum(taken)),
        "kind_accuracy": sum(w == g for w, g in zip(want, got, strict=True) if w in STATEMENTS)
        / max(1, sum(said)),
        "confusions": {f"{w}->{g}": n for (w, g), n in wrong.most_common(8)},
    }


def run(
    write: Path | None = None, per_act: int = 320
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Cross-validate, fit on everything, judge on the held-out sentences; ``write``
    saves the weights there (the shipped file is ``beeweave_core/data/acts-minilm.npz``,
    fitted with the default ``per_act``: generated sentences per act and language)."""
    data = corpus(per_act=per_act)
    texts = [d.text for d in data]
    x = embed(texts)
    shapes = np.array([shape(t) for t in texts], dtype=np.float32)
    hashed = np.vstack([words(t) for t in texts])
    cv = cross_validate(data, x, shapes, hashed)
    l2 = max(cv, key=lambda k: (cv[k], -k))
    y = np.array([ACTS.index(d.act) for d in data])
    m = fit(x, y, l2, shapes, hashed)
    if write is not None:
        m.save(write)
    rows = []
    for lang, items in (("en", EN), ("zh", ZH), ("all", EN + ZH)):
        r = judge(m, items)
        rows.append(
            {"set": f"held-out {lang}", **{k: v for k, v in r.items() if k != "confusions"}}
        )
    summary = {
        "train_sentences": len(data),
        "cv_accuracy": cv,
        "chosen_l2": l2,
        "confusions": judge(m, EN + ZH)["confusions"],
    }
    return rows, summary


__all__ = ["WEIGHTS", "cross_validate", "fit", "judge", "run"]
