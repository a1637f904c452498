"""``beeweave bench recall-zh``: evidence recall on Chinese conversations, beside English.

The Chinese set ships with BeeWeave (``beeweave_bench/data/zh_recall/``): four
agent/user conversations written for this check (a trip being planned, a data
pipeline being debugged, a parent's medication and check-ups, a small online
shop), 207 turns over three sessions each, and 57 questions whose evidence turns
are named.  The questions mostly say things in other words than the turns
("老爷子得过哪些慢性病？" against "他有高血压和二型糖尿病"), so both the
words path and the vector path are tested.  The files have LoCoMo's shape, so
the LoCoMo runner scores them the same way: R@k per path (BeeWeave's lexical,
semantic and fused recall, with the BM25 / dense / naive-RRF baselines).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from beeweave_bench import locomo

#: The packaged Chinese conversations.
ZH_DATA = Path(__file__).parent / "data" / "zh_recall"

#: What each system is called in this bench's table (the path it measures).
PATHS = {
    "bw-lexical": "lexical",
    "bw-semantic": "dense",
    "beeweave": "fused",
    "bm25": "bm25 baseline",
    "dense": "dense baseline",
    "rrf": "rrf baseline",
}


def run(
    *,
    zh: Path = ZH_DATA,
    en: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score the Chinese set (and the English one when given); rows carry ``set``."""
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for name, data in (("zh", zh), ("en", en)):
        if data is None:
            continue
        got, info = locomo.run(data, progress=progress)
        rows += [_row(name, r) for r in got if r["category"] == "all"]
        summary[name] = info
    return rows, summary


def _row(set_name: str, row: dict[str, Any]) -> dict[str, Any]:
    out = {"set": set_name, "path": PATHS.get(row["system"], row["system"])}
    out.update({k: v for k, v in row.items() if k not in ("system", "category")})
    return out
