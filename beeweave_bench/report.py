"""One way to show and keep a benchmark's result: a rich table and a JSON file."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sample."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != v:
            return "-"
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def report(
    name: str,
    rows: list[dict[str, Any]],
    *,
    out: Path | None,
    params: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    console: Console | None = None,
) -> Path:
    """Print ``rows`` as a table and write them, with machine facts, to JSON."""
    console = console or Console()
    columns: list[str] = []
    for r in rows:
        columns += [c for c in r if c not in columns]
    table = Table(title=f"beeweave bench {name}")
    for c in columns:
        table.add_column(
            c, justify="left" if c in ("system", "case", "backend", "path") else "right"
        )
    for r in rows:
        table.add_row(*(_fmt(r.get(c, "")) for c in columns))
    console.print(table)
    for n in notes or []:
        console.print(n)
    path = out or Path("bench-results") / f"{name.replace(' ', '-')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "bench": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "params": params or {},
        "rows": rows,
        "notes": notes or [],
    }
    path.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    console.print(f"[dim]JSON written to {path}[/]")
    return path
