"""The recall section of ``beeweave demo``: one question, the hits, and why each came back."""

from __future__ import annotations

from datetime import datetime, timezone

from rich.console import Console
from rich.table import Table

from beeweave_core.retrieval import Hit
from beeweave_core.weave import Weave

DEMO_QUESTION = "What was the job id, and which batch size did we settle on?"


_ABBREV = {
    "semantic": "sem",
    "lexical": "lex",
    "graph": "graph",
    "recent": "recent",
    "temporal": "time",
    "metadata": "meta",
}


def hits_table(hits: list[Hit], title: str) -> Table:
    """Hits with fused score, the rank each path gave them, and where they came from."""
    table = Table(title=title)
    for col in ("#", "score", "paths (rank)", "type", "seq", "content"):
        table.add_column(
            col, overflow="fold" if col == "content" else "ellipsis", no_wrap=col != "content"
        )
    for i, h in enumerate(hits, 1):
        paths = " ".join(f"{_ABBREV.get(p, p)}{h.ranks.get(p, '')}" for p in sorted(h.paths))
        text = " ".join(h.event.content.split())
        table.add_row(
            str(i),
            f"{h.score:.3f}",
            paths,
            h.event.type.value.replace("_message", ""),
            str(h.provenance.seq),
            text if len(text) <= 70 else text[:69] + "…",
        )
    return table


def provenance_line(h: Hit) -> str:
    p = h.provenance
    when = datetime.fromtimestamp(p.ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    line = f"event {p.event_id} · session {p.session_id} · seq {p.seq} · {when}"
    if p.via:
        line += f" · reached through the graph from {', '.join(v[:8] for v in p.via)}"
    return line


def show_recall(weave: Weave, session_id: str, console: Console) -> None:
    """Ask one recall question about the demo session and print the hits."""
    console.print(f"\n[bold]Recall:[/] {DEMO_QUESTION!r}")
    if weave.indexer is not None:
        weave.indexer.sync(120)  # the script just ran: let the vectors catch up first
    hits = weave.retrieve(DEMO_QUESTION, session_id=session_id, k=6)
    console.print(hits_table(hits, "Recalled events"))
    if hits:
        console.print(f"[dim]top hit provenance: {provenance_line(hits[0])}[/]")
    if weave.indexer is not None:
        st = weave.indexer.status()
        console.print(
            f"[dim]semantic index: {st['index']} · {st['identity']} · {st['chunks']} vectors[/]"
        )
