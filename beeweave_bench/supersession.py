"""Supersession alone, and the choice of its one threshold by cross-validation.

Every user sentence of a conversation goes through a :class:`SlotIndex` in order; at
the end a probe is *right* when the sentence holding its ``expect`` value is still in
force and no sentence holding its ``forbid`` wording is.  Runs in milliseconds, so the
threshold (how many extra words an unlinked restatement may carry) is chosen on some
conversations and scored on the others (k folds over conversations, never one).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from beeweave_bench.context import load_scenarios
from beeweave_core.context.supersession import SlotIndex
from beeweave_core.text import language as L
from beeweave_core.text.statements import is_statement

CHOICES = (0, 1, 2, 3)


def score_conversation(scn: dict[str, Any], max_extra: int) -> list[dict[str, Any]]:
    """One row per probe: kind, right (value kept and overturned wording gone)."""
    index = SlotIndex(max_unlinked_extra=max_extra)
    live: dict[str, str] = {}
    for i, turn in enumerate(scn["turns"]):
        if turn["role"] != "user":
            continue
        for j, sent in enumerate(L.sentences(turn.get("content") or "")):
            if not is_statement(sent):
                continue
            sid = f"{i}:{j}"
            for gone in index.observe(sid, sent, i):
                live.pop(gone, None)
            live[sid] = sent
    folded = [L.fold(s) for s in live.values()]
    rows = []
    for p in scn["probes"]:
        kept = all(any(L.fold(e) in f for f in folded) for e in p["expect"])
        stale = any(L.fold(f) in s for f in p.get("forbid") or () for s in folded)
        rows.append({"scenario": scn["id"], "kind": p.get("kind", "plain"),
                     "right": kept and not stale, "kept": kept, "stale": stale})  # fmt: skip
    return rows


def _accuracy(rows: Sequence[dict[str, Any]]) -> float:
    return sum(r["right"] for r in rows) / len(rows) if rows else float("nan")


def cross_validate(directory: str | Path, folds: int = 3) -> dict[str, Any]:
    """Choose ``max_unlinked_extra`` on k-1 folds, score on the held-out fold."""
    scenarios = load_scenarios(directory)
    if folds < 2 or len(scenarios) < folds:
        raise ValueError(
            f"--folds {folds} needs at least 2 folds and {folds} scenarios; {directory} has "
            f"{len(scenarios)}"
        )
    cache = {(s["id"], c): score_conversation(s, c) for s in scenarios for c in CHOICES}
    held_out: list[dict[str, Any]] = []
    chosen = []
    for k in range(folds):
        test = [s for n, s in enumerate(scenarios) if n % folds == k]
        train = [s for n, s in enumerate(scenarios) if n % folds != k]
        acc = {c: _accuracy([r for s in train for r in cache[(s["id"], c)]]) for c in CHOICES}
        top = max(acc.values())
        tied = [c for c in CHOICES if acc[c] == top]
        choice = tied[len(tied) // 2]  # the middle of a tie, not its edge
        chosen.append({"fold": k, "train_accuracy": acc, "chosen": choice,
                       "test": [s["id"] for s in test]})  # fmt: skip
        held_out += [r for s in test for r in cache[(s["id"], choice)]]
    kinds = sorted({r["kind"] for r in held_out})
    return {
        "folds": chosen,
        "held_out_accuracy": _accuracy(held_out),
        "held_out_by_kind": {k: _accuracy([r for r in held_out if r["kind"] == k]) for k in kinds},
        "wrong": [r for r in held_out if not r["right"]],
    }
