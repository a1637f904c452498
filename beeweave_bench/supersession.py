"""``beeweave bench supersession``: fit the supersession scorer and choose its threshold
by leave-one-conversation-out cross-validation, reporting both of its errors.

Each conversation's turns are read as the memory writer reads them
(:func:`beeweave_core.memory.extract.statements`).  The probes label the pairs: a
statement holding a probe's ``forbid`` wording is replaced by the later one holding its
``expect`` value (and, for a setting changed twice, by the later ``forbid`` one); every
other pair of statements is not a replacement.  Per held-out conversation:

* *missed* — statements holding a ``forbid`` wording that no later statement of their
  own chain replaces (the old value would still be taken as current; being replaced by
  an unrelated statement does not count as caught);
* *merged* — labelled statements (an ``expect`` value: a live item, a look-alike; or a
  ``forbid`` one) that a statement outside their chain is taken to replace (a live item
  lost, or an old one pointed at the wrong correction).

The threshold minimises missed + merged on the other conversations; the weights are a
class-balanced logistic regression fitted on them.  ``--write`` fits on every
conversation and saves the scorer the product ships.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from beeweave_bench.context import load_scenarios
from beeweave_core.memory.extract import Turn, statements
from beeweave_core.memory.supersession import (
    FEATURES,
    NEAREST,
    Said,
    Scorer,
    features,
    prepare,
)
from beeweave_core.text import language as L

THRESHOLDS = (*(round(0.05 * i, 2) for i in range(2, 19)), 0.95, 0.97, 0.98, 0.99)
EPOCHS = 600


@dataclass
class Conversation:
    """One conversation's statements, their pairs' features and labels."""

    name: str
    said: list[Said]
    pairs: list[tuple[int, int]]
    x: np.ndarray
    y: np.ndarray
    old: set[int]  # statements holding a forbid wording
    live: set[int]  # statements holding an expect value
    after: dict[int, set[int]]  # a labelled statement -> the later ones of its chains


def read(scn: dict[str, Any]) -> Conversation:
    """The conversation's statements (as the writer reads them) and labelled pairs."""
    items: list[tuple[str, str, int, bool]] = []
    before: Turn | None = None
    for i, t in enumerate(scn["turns"]):
        if t["role"] not in ("user", "assistant"):
            continue
        turn = Turn(f"t{i}", i, t["role"], t.get("content") or "")
        for n, st in enumerate(statements(turn, before)):
            items.append((f"{i}:{n}", st.text, st.seq, st.by_user))
        if t["role"] == "assistant" and turn.text:
            before = turn
        elif t["role"] == "user":
            before = None
    said = prepare(items)
    folded = [L.fold(s.text) for s in said]
    old: set[int] = set()
    live: set[int] = set()
    chains: list[list[int]] = []
    for p in scn["probes"]:
        forb = [k for k, f in enumerate(folded) for w in p.get("forbid") or () if L.fold(w) in f]
        exp = [k for k, f in enumerate(folded) for w in p["expect"] if L.fold(w) in f]
        old.update(forb)
        live.update(exp)
        if forb and exp:
            chains.append(sorted(set(forb)) + [min(exp)])
    positive = {(a, b) for ch in chains for i, a in enumerate(ch) for b in ch[i + 1 :]}
    after: dict[int, set[int]] = {k: set() for k in old | live}
    for a, b in positive:
        after[a].add(b)
    pairs = [(a, b) for b in range(len(said)) for a in range(b)]
    x = (
        np.array([features(said[a], said[b]) for a, b in pairs])
        if pairs
        else np.zeros((0, len(FEATURES)))
    )
    y = np.array([1 if (a, b) in positive else 0 for a, b in pairs])
    return Conversation(scn["id"], said, pairs, x, y, old - live, live, after)


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> tuple[np.ndarray, float]:
    """Class-balanced logistic regression by gradient descent (features standardised
    inside, weights returned on the raw scale)."""
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mu) / sd
    pos = max(1, int(y.sum()))
    neg = max(1, len(y) - pos)
    sw = np.where(y == 1, len(y) / (2 * pos), len(y) / (2 * neg))
    w = np.zeros(z.shape[1])
    b = 0.0
    for _ in range(EPOCHS):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = (p - y) * sw / len(y)
        w -= 0.5 * (z.T @ g + l2 * w)
        b -= 0.5 * g.sum()
    return w / sd, float(b - (w / sd) @ mu)


def replay(conv: Conversation, s: Scorer) -> dict[int, set[int]]:
    """Which later statements each statement was replaced by, decided in order as the
    memory writer's :class:`~beeweave_core.memory.supersession.Index` does: a new
    statement is judged against the live ones nearest to it by masked meaning, what it
    replaces is no longer live, and a wording said again is not a new statement."""
    px = {pair: f for pair, f in zip(conv.pairs, conv.x, strict=True)}
    folded = [L.fold(x.text) for x in conv.said]
    live: list[int] = []
    by: dict[int, set[int]] = {}
    for b in range(len(conv.said)):
        if any(folded[a] == folded[b] for a in live):
            continue
        near = sorted(live, key=lambda a: -px[(a, b)][0])[:NEAREST]
        chosen = s.choose(conv.said[b], [conv.said[a] for a in near], [px[(a, b)] for a in near])
        for k in chosen:
            by.setdefault(near[k], set()).add(b)
            live.remove(near[k])
        live.append(b)
    return by


def errors(conv: Conversation, s: Scorer) -> tuple[int, int]:
    """(missed, merged) of one conversation under scorer ``s``, replayed in order."""
    by = replay(conv, s)
    missed = sum(1 for a in conv.old if not by.get(a, set()) & conv.after[a])
    merged = sum(1 for a, bs in by.items() if a in conv.after and bs - conv.after[a])
    return missed, merged


def _rates(convs: Sequence[Conversation], s: Scorer) -> tuple[float, float]:
    counts = [errors(c, s) for c in convs]
    m = sum(missed for missed, _merged in counts)
    g = sum(merged for _missed, merged in counts)
    return m / max(1, sum(len(c.old) for c in convs)), g / max(1, sum(len(c.after) for c in convs))


def choose(convs: Sequence[Conversation]) -> Scorer:
    """Weights fitted on ``convs``, the threshold minimising missed + merged on them."""
    x = np.vstack([c.x for c in convs])
    y = np.concatenate([c.y for c in convs])
    w, b = fit(x, y)
    best = min(THRESHOLDS, key=lambda t: (sum(_rates(convs, Scorer(w, b, t))), -t))
    return Scorer(w, b, best)


def run(
    directories: Sequence[Path], write: Path | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    convs = [read(s) for d in directories for s in load_scenarios(d)]
    rows = []
    for held in convs:
        s = choose([c for c in convs if c is not held])
        missed, merged = errors(held, s)
        rows.append(
            {
                "held_out": held.name,
                "threshold": s.threshold,
                "statements": len(held.said),
                "old": len(held.old),
                "missed": missed,
                "labelled": len(held.after),
                "merged": merged,
            }
        )
    final = choose(convs)
    if write is not None:
        final.save(write)
    total = {k: sum(r[k] for r in rows) for k in ("old", "missed", "labelled", "merged")}
    summary = {
        "held_out_missed_rate": total["missed"] / max(1, total["old"]),
        "held_out_merged_rate": total["merged"] / max(1, total["labelled"]),
        "dev_missed_rate, dev_merged_rate": _rates(convs, final),
        "threshold": final.threshold,
        "weights": dict(zip(FEATURES, [round(float(v), 3) for v in final.w], strict=True)),
    }
    return rows, summary
